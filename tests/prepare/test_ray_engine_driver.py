"""``prepare --engine ray``'s driver without a cluster: an address where no cluster answers is one line
and exit 2 within seconds, attempts are counted per driver run, and the shards' folder is removed
only by our removal rule. (The runs on a local Ray cluster are in test_ray_engine.py, slow tier.)"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from beam_sft.dataset_folder import owner
from beam_sft.errors import ConfigError
from beam_sft.prepare import ray_engine
from tests.encode.conftest import simple_row, write_jsonl

ROOT = Path(__file__).resolve().parents[2]


def _closed_port() -> socket.socket:
    """A port that refuses connections for as long as the socket is held: bound, never listening. (A
    port bound and closed again is free for the next bind: another test's server on the other worker
    took it, and its requests were this test's connection attempts.)"""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


def test_an_address_where_no_cluster_answers_is_one_line_and_exit_2(tmp_path, tokenizer_dir):
    """ray.init alone retries such an address for many minutes; the driver says so at once."""
    pytest.importorskip("ray", reason="needs pip install 'beam-sft[ray]'")
    data = write_jsonl(tmp_path / "rows.jsonl", [simple_row(i) for i in range(3)])
    held = _closed_port()
    address = f"127.0.0.1:{held.getsockname()[1]}"
    argv = [sys.executable, "-m", "beam_sft", "prepare", "--data", str(data), "--tokenizer", str(tokenizer_dir),
            "--engine", "ray", "--ray-address", address, "--output", str(tmp_path / "out"), "-q"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the process group this test started
        proc.communicate()
        pytest.fail(f"prepare --ray-address {address} still running after 60 s")
    assert proc.returncode == 2
    lines = [line for line in err.splitlines() if line.startswith("beam-sft prepare:")]
    assert len(lines) == 1 and lines[0].startswith(f"beam-sft prepare: error: ray_address: no Ray cluster answers "
                                                   f"at {address} (")
    assert not (tmp_path / "out").exists()
    held.close()


def test_check_answers_names_the_address_and_where_it_came_from():
    held = _closed_port()
    address = f"127.0.0.1:{held.getsockname()[1]}"
    with pytest.raises(ConfigError, match=rf"^RAY_ADDRESS: no Ray cluster answers at {address} \("):
        ray_engine.check_answers(address, "RAY_ADDRESS", timeout=5)
    held.close()
    ray_engine.check_answers("auto", "ray_address")  # not host:port: ray.init judges it
    with socket.socket() as sock:  # a port that takes connections passes
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        ray_engine.check_answers(f"127.0.0.1:{sock.getsockname()[1]}", "ray_address", timeout=5)


def test_attempts_are_counted_per_driver_run(tmp_path):
    """An earlier driver's attempts (and a task of it still running) are in the same file; only this
    run's count, so its failure says 3 attempts, not 6, and a later run reports no earlier retries."""
    path = tmp_path / "shard-1.jsonl"
    lines = []
    for run in ("old", "old", "old", "new"):
        lines += [{"event": "start", "run": run, "pid": 7, "host": "n1"},
                  {"event": "raised" if run == "old" else "sealed", "run": run, "error": "RuntimeError: x"}]
    lines.insert(2, {"event": "start", "run": "older-still-running", "pid": 8, "host": "n2"})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert len(ray_engine.read_attempts(path, "old")) == 3
    new = ray_engine.read_attempts(path, "new")
    assert len(new) == 1 and ray_engine.retries(new) == []
    assert len(ray_engine.read_attempts(path)) == 5  # without a run: every line, as before


def _root_of_ours(tmp_path: Path) -> Path:
    """A shards' folder as a finished run leaves it: marker, attempts, a lock, sealed shard folders."""
    root = tmp_path / ".out.ray-shards"
    root.mkdir()
    owner.write_marker(root)
    (root / "attempts").mkdir()
    (root / "attempts" / "shard-0.jsonl").write_text("{}\n")
    (root / ".shard-0.lock").write_text("123\n")
    for index in (0, 1):
        shard = root / f"shard-{index}"
        shard.mkdir()
        owner.write_marker(shard)
        (shard / "data-00000-of-00001.arrow").write_bytes(b"x")
        (shard / "report.json").write_text("{}")
    return root


def test_the_shards_folder_of_ours_is_removed(tmp_path):
    root = _root_of_ours(tmp_path)
    assert ray_engine.unexplained_shards(root) == []
    assert ray_engine.remove_shards_root(root) and not root.exists()


@pytest.mark.parametrize("extra, named", [
    ("notes.txt", "notes.txt"),
    ("keep/important.jsonl", "keep/"),
    ("attempts/mine.txt", "attempts/mine.txt"),
    ("shard-1/mine.txt", "shard-1/mine.txt"),
])
def test_a_users_file_keeps_the_shards_folder(tmp_path, caplog, extra, named):
    """Our marker on the folder is not enough (an earlier failed run leaves it): a file no run of ours
    writes, anywhere in it, keeps the whole folder, said in a warning."""
    root = _root_of_ours(tmp_path)
    (root / extra).parent.mkdir(exist_ok=True)
    (root / extra).write_text("mine\n")
    caplog.set_level(logging.WARNING, logger="beam_sft.prepare")
    assert ray_engine.unexplained_shards(root) == [named]
    assert not ray_engine.remove_shards_root(root)
    assert (root / extra).read_text() == "mine\n" and (root / "shard-0").is_dir()
    [warning] = [r.getMessage() for r in caplog.records]
    assert warning == (f"left {root} (the Ray shards' folder): it also holds {named}, which no run of ours wrote; "
                       "remove it yourself once that is saved")


def test_a_shards_folder_without_our_marker_stays(tmp_path):
    root = _root_of_ours(tmp_path)
    (root / owner.MARKER).unlink()
    assert not ray_engine.remove_shards_root(root) and (root / "shard-0").is_dir()
