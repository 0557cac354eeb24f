"""``reason``'s outputs as ``prepare``'s: one writer per output, staged and published at the end, an
earlier output intact until then (``beam_sft.dataset_folder.staged_files``); two runs on one cache ask each turn once
(``AnswerCache.claim``)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from beam_sft.cli import main
from tests.reason.stub_server import Reply, StubServer, always
from tests.reason.test_reason import read, write_rows

ROWS = [{"messages": [{"role": "user", "content": f"Q{i}?"}, {"role": "assistant", "content": f"A{i}"}]}
        for i in range(6)]


def _args(src, out, base_url, cache, *extra):
    return ["reason", str(src), "-o", str(out), "--rejects", str(out.with_suffix(".rej")), "--summary-json",
            str(out.with_suffix(".sum")), "--base-url", base_url, "--model", "m", "--cache-dir", str(cache), "-q",
            *extra]


def _snapshot(out: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(out.parent.iterdir()) if p.name.startswith(out.stem) and p.is_file()}


def test_a_failing_run_leaves_the_earlier_outputs_as_they_were(tmp_path, monkeypatch, capsys):
    import os

    from beam_sft.reason import cache as cache_mod

    src = write_rows(tmp_path / "rows.jsonl", ROWS)
    out = tmp_path / "out.jsonl"
    with StubServer() as stub:
        assert main(_args(src, out, stub.base_url, tmp_path / "c")) == 0
        before = _snapshot(out)
        assert len(read(out)) == 6 and set(before) == {"out.jsonl", "out.rej", "out.sum"}

        def full(*args, **kwargs):
            raise OSError(28, os.strerror(28))
        monkeypatch.setattr(cache_mod.tempfile, "mkstemp", full)
        assert main(_args(src, out, stub.base_url, tmp_path / "c2", "--concurrency", "1")) == 2
    assert "cannot write to" in capsys.readouterr().err
    assert _snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "c2", "out.jsonl", "out.rej", "out.sum", "rows.jsonl"]


def _in_thread(args, results, name):
    thread = threading.Thread(target=lambda: results.__setitem__(name, main(args)))
    thread.start()
    return thread


def test_a_second_run_on_the_same_output_is_refused_in_one_line(tmp_path, capsys):
    src = write_rows(tmp_path / "rows.jsonl", ROWS)
    out = tmp_path / "out.jsonl"
    results: dict = {}
    with StubServer(always(Reply(delay=0.3))) as stub:
        first = _in_thread(_args(src, out, stub.base_url, tmp_path / "c", "--concurrency", "1"), results, "first")
        deadline = time.time() + 30
        while not stub.requests and time.time() < deadline:
            time.sleep(0.02)
        results["second"] = main(_args(src, out, stub.base_url, tmp_path / "c2"))
        err = capsys.readouterr().err
        first.join()
    assert results == {"first": 0, "second": 2}
    assert err.count("\n") == 1 and "is being written by process" in err, err
    assert len(read(out)) == 6 and len(stub.requests) == 6  # the second asked nothing


def test_two_runs_on_one_cache_ask_each_turn_once(tmp_path):
    src = write_rows(tmp_path / "rows.jsonl", ROWS)
    results: dict = {}
    with StubServer(always(Reply(delay=0.2))) as stub:
        threads = [_in_thread(_args(src, tmp_path / f"out{i}.jsonl", stub.base_url, tmp_path / "cache",
                                    "--concurrency", "2"), results, i) for i in range(2)]
        for thread in threads:
            thread.join()
    assert results == {0: 0, 1: 0}
    assert len(stub.requests) == 6, "a turn was asked by both runs"
    assert [r["messages"] for r in read(tmp_path / "out0.jsonl")] == [r["messages"] for r in read(tmp_path / "out1.jsonl")]
    assert not list((tmp_path / "cache").rglob("*.lock"))


@pytest.mark.slow  # a second process, killed: the fault-injection tier
def test_kill_9_mid_run_leaves_the_earlier_output_whole(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    src = write_rows(tmp_path / "rows.jsonl", ROWS)
    out = tmp_path / "out.jsonl"
    with StubServer(always(Reply(delay=0.3))) as stub:
        assert main(_args(src, out, stub.base_url, tmp_path / "c")) == 0
        before = _snapshot(out)
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        proc = subprocess.Popen([sys.executable, "-m", "beam_sft", *_args(src, out, stub.base_url, tmp_path / "c2",
                                                                           "--concurrency", "1")],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while len(stub.requests) < 8 and time.time() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert _snapshot(out) == before  # whole, as the first run wrote it
        assert any(".partial-" in p.name for p in tmp_path.iterdir())  # the dead run's staged file
        assert main(_args(src, out, stub.base_url, tmp_path / "c2")) == 0  # takes over, removes it
    assert len(read(out)) == 6 and not any(".partial-" in p.name or p.name.endswith(".lock")
                                           for p in tmp_path.iterdir())
    json.loads((out.with_suffix(".sum")).read_text())
