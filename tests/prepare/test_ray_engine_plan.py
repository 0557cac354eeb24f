"""``prepare --engine ray`` without a cluster: the missing extra's one line, the flags' rules, the
words the log gives a retried shard, and the refusal of a shard folder that is not this plan's.
(The runs on a local Ray cluster are in test_ray_engine.py, slow tier.)"""

from __future__ import annotations

import sys

import pytest

from beam_sft.cli import main
from beam_sft.errors import ConfigError
from beam_sft.prepare import PrepareConfig, SourceSpec, ray_engine
from tests.encode.conftest import simple_row, write_jsonl


def test_missing_ray_is_one_line_naming_the_extra(tmp_path, monkeypatch, capsys, tokenizer_dir):
    monkeypatch.setitem(sys.modules, "ray", None)  # as on a machine without it: import ray fails
    data = write_jsonl(tmp_path / "rows.jsonl", [simple_row(i) for i in range(3)])
    code = main(["prepare", "--data", str(data), "--tokenizer", str(tokenizer_dir), "--engine", "ray",
                 "--output", str(tmp_path / "out"), "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == ["beam-sft prepare: error: engine: --engine ray needs Ray, which is not installed: "
                   "pip install 'beam-sft[ray]'"]
    assert not (tmp_path / "out").exists()


def test_missing_ray_from_the_api(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ConfigError, match=r"pip install 'beam-sft\[ray\]'"):
        ray_engine.prepare_on_ray(PrepareConfig(sources=[SourceSpec(path="x.jsonl")]))


@pytest.mark.parametrize("argv, message", [
    (["--shards", "3"], "--ray-address and --shards go with --engine ray"),
    (["--ray-address", "127.0.0.1:6379"], "--ray-address and --shards go with --engine ray"),
    (["--engine", "ray", "--num-shards", "2", "--shard-index", "0"], "give --shards N, not --num-shards"),
])
def test_engine_flags_go_with_their_engine(tmp_path, capsys, argv, message):
    data = write_jsonl(tmp_path / "rows.jsonl", [simple_row(0)])
    code = main(["prepare", "--data", str(data), "--tokenizer", "tok", "--output", str(tmp_path / "o"), *argv])
    assert code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_shards_flag_is_a_count(capsys):
    with pytest.raises(SystemExit):
        main(["prepare", "--data", "x.jsonl", "--engine", "ray", "--shards", "0"])
    assert "--shards" in capsys.readouterr().err


def test_retry_words(tmp_path):
    attempts = tmp_path / "shard-1.jsonl"
    attempts.write_text(
        '{"event": "start", "shard": 1, "pid": 11, "host": "n1"}\n'
        '{"event": "start", "shard": 1, "pid": 12, "host": "n2"}\n'
        '{"event": "raised", "shard": 1, "error": "RuntimeError: disk", "pid": 12, "host": "n2"}\n'
        '{"event": "start", "shard": 1, "pid": 13, "host": "n2"}\n'
        '{"event": "sealed", "shard": 1, "pid": 13, "host": "n2"}\n'
        '{"event": "sta')  # cut off by a kill mid-write: skipped
    history = ray_engine.read_attempts(attempts)
    assert len(history) == 3
    assert ray_engine.retries(history) == [
        "attempt 1 (pid 11 on n1) ended without a result: its worker died (killed, or its node was lost)",
        "attempt 2 (pid 12 on n2) raised RuntimeError: disk"]
    assert ray_engine.retries(ray_engine.read_attempts(tmp_path / "none.jsonl")) == []
