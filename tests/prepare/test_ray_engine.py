"""``prepare --engine ray`` on a local Ray cluster that the tests start (and stop): the same folder as
``--engine local`` for 1, 3 and 7 shards, and each fault: a worker killed mid-shard, a shard that
raises (once, and on every attempt), the driver killed and started again, a task that ran twice, a
shard folder that is not this plan's or whose digest differs."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from beam_sft.errors import PreparedError
from beam_sft.prepare import PrepareConfig, SourceSpec, prepare, ray_engine
from tests.encode.conftest import simple_row, write_jsonl
from tests.prepare.same_folder import assert_same_folder

ray = pytest.importorskip("ray", reason="the Ray tier needs pip install 'beam-sft[ray]'")
pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster of 2 CPUs for this module; its workers import this tree (and these tests)."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def setup(tmp_path_factory, tokenizer_dir):
    """1000 records in two sources (shard 0 of 7 holds more than the encoder's probe reads, so even the
    probe is the local run's), with rejects of two kinds, a weight that repeats rows, and the local folder."""
    root = tmp_path_factory.mktemp("ray")
    rows = [simple_row(i) for i in range(700)]
    rows[5] = simple_row(5, reasoning="")  # missing_reasoning
    rows[400] = {"messages": "not a list"}  # a row convert rejects
    a = write_jsonl(root / "a.jsonl", rows)
    b = write_jsonl(root / "b.jsonl", [simple_row(i, answer="x " * (i % 40)) for i in range(300)])
    config = PrepareConfig(sources=[SourceSpec(path=str(a), weight=1.5), SourceSpec(path=str(b))],
                           tokenizer=str(tokenizer_dir), num_proc=1, max_length=100)
    local = prepare(dataclasses.replace(config, output=str(root / "local")))
    return root, config, local


def _check_published(out: Path, local: Path, shards: int) -> dict:
    from beam_sft.train.data import check_trainable

    assert_same_folder(out, local)
    report = json.loads((out / "report.json").read_text())
    assert report["verify"]["ok"] and report["engine"]["name"] == "ray" and report["engine"]["count"] == shards
    assert [entry["shard"] for entry in report["engine"]["plan"]] == list(range(shards))
    assert not ray_engine.shards_root(out.absolute()).exists()  # the shard folders went with the publish
    check_trainable(out)  # train accepts it
    return report


@pytest.mark.parametrize("shards", [1, 3, 7, None])
def test_same_folder_as_local(cluster, setup, shards):
    """(None: the default, one shard per CPU of the cluster: 2.) A later local prepare of the same
    config, and `--engine ray` itself, take the folder as their cache hit."""
    root, config, local = setup
    target = dataclasses.replace(config, output=str(root / f"ray-{shards}"))
    out = ray_engine.prepare_on_ray(target, shards=shards)
    shards = shards or 2
    report = _check_published(out, local, shards)
    before = (out / "report.json").read_bytes()
    assert prepare(target) == out and ray_engine.prepare_on_ray(target, shards=5) == out
    assert (out / "report.json").read_bytes() == before
    plan = report["engine"]["plan"]
    assert plan[0]["records"][0] == 0 and plan[-1]["records"][1] == 1000
    assert report["engine"]["attempts"] == {str(i): 1 for i in range(shards)} and not report["engine"]["retried"]


def _beside_root(attempts, suffix: str) -> Path:
    """A test's own note about a shard, beside the shards' folder (not in it: a file no run of ours
    writes would keep that folder from being removed after the publish)."""
    root = Path(attempts).parents[1]
    return root.parent / f"{root.name}.{suffix}"


def raises_once(config, attempts, *run):
    """Shard 1's first attempt raises inside its prepare; every other attempt is the real task."""
    flag = _beside_root(attempts, "raised")
    if config.shard_index != 1 or flag.exists():
        return ray_engine.run_shard(config, attempts, *run)
    flag.touch()
    return _with_prepare_raising(config, attempts, *run)


def always_raises(config, attempts, *run):
    if config.shard_index == 1:
        return _with_prepare_raising(config, attempts, *run)
    return ray_engine.run_shard(config, attempts, *run)


def refuses(config, attempts, *run):
    """Shard 1's prepare refuses as a bad config does: the same on every attempt."""
    from beam_sft.errors import ConfigError

    if config.shard_index == 1:
        return _with_prepare_raising(config, attempts, *run, error=ConfigError("max_length", "injected refusal"))
    return ray_engine.run_shard(config, attempts, *run)


def _with_prepare_raising(config, attempts, *run, error=None):
    from beam_sft.prepare import pipeline

    def broken(*args, **kwargs):
        raise error or RuntimeError("injected: the shard's prepare failed")

    real, pipeline.prepare = pipeline.prepare, broken
    try:
        return ray_engine.run_shard(config, attempts, *run)
    finally:
        pipeline.prepare = real


def test_a_shard_that_raises_once_is_retried_by_ray(cluster, setup, caplog):
    root, config, local = setup
    caplog.set_level(logging.INFO, logger="beam_sft.prepare")
    out = ray_engine.prepare_on_ray(dataclasses.replace(config, output=str(root / "raised-once")), shards=3,
                                    task=raises_once)
    report = _check_published(out, local, 3)
    assert report["engine"]["attempts"] == {"0": 1, "1": 2, "2": 1}
    [retried] = report["engine"]["retried"]
    assert retried["shard"] == 1 and "raised RuntimeError: injected: the shard's prepare failed" in retried["why"]
    assert any(r.getMessage().startswith("ray: shard 1 retried: attempt 1 (pid ") and "raised RuntimeError" in
               r.getMessage() for r in caplog.records)


def test_a_shard_that_always_raises_publishes_nothing_and_the_rerun_reuses_the_sealed(cluster, setup, caplog):
    """Each driver run counts its own attempts: a second failing run says 3 attempts, not 6, and the
    run that succeeds reports none of the earlier runs' attempts as its retries."""
    root, config, local = setup
    target = dataclasses.replace(config, output=str(root / "raised-always"))
    for _ in range(2):
        with pytest.raises(PreparedError, match=r"shard 1 of 3 failed after 3 attempt\(s\): RuntimeError: injected"):
            ray_engine.prepare_on_ray(target, shards=3, task=always_raises)
    assert not Path(target.output).exists()
    shards_root = ray_engine.shards_root(Path(target.output).absolute())
    sealed = {i: (shards_root / f"shard-{i}" / "report.json").stat().st_mtime_ns for i in (0, 2)}
    assert not (shards_root / "shard-1").exists()

    caplog.set_level(logging.INFO, logger="beam_sft.prepare")
    out = ray_engine.prepare_on_ray(target, shards=3)
    report = _check_published(out, local, 3)
    assert report["engine"]["reused"] == [0, 2] and report["engine"]["attempts"]["1"] == 1
    assert report["engine"]["retried"] == []  # the earlier runs' 6 attempts are theirs, not this run's
    messages = [r.getMessage() for r in caplog.records]
    for i in (0, 2):
        assert f"ray: shard {i}: sealed by an earlier run, reused (not recomputed)" in messages
    assert report["engine"]["attempts"]["0"] == report["engine"]["attempts"]["2"] == 0  # reused: not run
    assert sealed  # (merged as they were: the merge checked their seals)


def test_a_deterministic_refusal_in_a_shard_is_not_retried(cluster, setup):
    """A ConfigError (as any of ray_engine.DETERMINISTIC) would refuse the same way on every attempt:
    the shard ends at its first, named with its own type."""
    root, config, local = setup
    target = dataclasses.replace(config, output=str(root / "refused"))
    with pytest.raises(PreparedError, match=r"shard 1 of 3 failed after 1 attempt\(s\): ConfigError: max_length: "
                                            "injected refusal"):
        ray_engine.prepare_on_ray(target, shards=3, task=refuses)
    assert not Path(target.output).exists()
    attempts = ray_engine.shards_root(Path(target.output).absolute()) / "attempts" / "shard-1.jsonl"
    assert [json.loads(line)["event"] for line in attempts.read_text().splitlines()] == ["start", "refused"]


def test_a_users_file_in_the_shards_folder_keeps_it(cluster, setup, caplog):
    """The shards' folder of an earlier (failed) run, ours by its marker, with a user's files put in
    it since: the run publishes, and the folder stays whole, said in a warning naming those files."""
    root, config, local = setup
    target = dataclasses.replace(config, output=str(root / "user-files"))
    shards_root = ray_engine.shards_root(Path(target.output).absolute())
    from beam_sft.dataset_folder import owner

    shards_root.mkdir()
    owner.write_marker(shards_root)
    (shards_root / "notes.txt").write_text("mine\n")
    (shards_root / "keep").mkdir()
    (shards_root / "keep" / "important.jsonl").write_text("{}\n")
    caplog.set_level(logging.INFO, logger="beam_sft.prepare")
    out = ray_engine.prepare_on_ray(target, shards=3)
    assert_same_folder(out, local)
    assert (shards_root / "notes.txt").read_text() == "mine\n"
    assert (shards_root / "keep" / "important.jsonl").read_text() == "{}\n"
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith(f"left {shards_root} (the Ray shards' folder): it also holds keep/, notes.txt")


def killed_mid_shard(config, attempts, *run):
    """Shard 1's first attempt stops just before its publish (its staging folder written, its lock
    held) and names its pid, for the test to kill it there."""
    pid_file = _beside_root(attempts, "pid")
    if config.shard_index != 1 or pid_file.exists():
        return ray_engine.run_shard(config, attempts, *run)
    from beam_sft.prepare import pipeline

    real = pipeline.verify_then_publish

    def stall(*args, **kwargs):
        pid_file.write_text(str(os.getpid()))
        time.sleep(300)
        return real(*args, **kwargs)

    pipeline.verify_then_publish = stall
    return ray_engine.run_shard(config, attempts, *run)


def test_a_worker_killed_mid_shard_is_retried_and_its_leftovers_cleared(cluster, setup, caplog):
    root, config, local = setup
    caplog.set_level(logging.INFO, logger="beam_sft.prepare")
    target = dataclasses.replace(config, output=str(root / "killed"))
    shards_root = ray_engine.shards_root(Path(target.output).absolute())
    result: dict = {}
    driver = threading.Thread(target=lambda: result.update(
        out=_run_catching(lambda: ray_engine.prepare_on_ray(target, shards=3, task=killed_mid_shard))))
    driver.start()
    pid_file = shards_root.parent / f"{shards_root.name}.pid"
    deadline = time.time() + 240
    while not pid_file.is_file() or not pid_file.read_text():
        assert time.time() < deadline and driver.is_alive(), result
        time.sleep(0.1)
    pid = int(pid_file.read_text())
    assert list(shards_root.glob(".shard-1.staging-*"))  # it is mid-shard: its staging folder is there
    os.kill(pid, signal.SIGKILL)
    driver.join(300)
    out = result["out"]
    assert isinstance(out, Path), out
    report = _check_published(out, local, 3)
    assert report["engine"]["attempts"]["1"] == 2
    assert any(f"ray: shard 1 retried: attempt 1 (pid {pid} on " in r.getMessage() and "its worker died" in
               r.getMessage() for r in caplog.records)


def _run_catching(work):
    try:
        return work()
    except BaseException as exc:  # noqa: BLE001 (handed to the test's thread, which shows it)
        return exc


def test_driver_killed_and_started_again_reuses_the_sealed_shards(setup, tmp_path):
    """The driver is a `beam-sft prepare --engine ray` process with its own local cluster; killed with
    SIGKILL once a shard is sealed, then run again: the sealed shards are reused, not recomputed."""
    root, config, local = setup
    out = tmp_path / "driver"
    argv = [sys.executable, "-m", "beam_sft", "prepare", "--data", config.sources[0].path, "--weight", "1.5",
            "--data", config.sources[1].path, "--weight", "1", "--tokenizer", config.tokenizer, "--num-proc", "1",
            "--max-length", "100", "--engine", "ray", "--shards", "7", "--output", str(out), "-q"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    shards_root = ray_engine.shards_root(out)
    first = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        deadline = time.time() + 300
        while not list(shards_root.glob("shard-*/report.json")):
            assert time.time() < deadline and first.poll() is None
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(60)
    finally:
        _end_group(first)
    sealed = {p.parent.name: p.stat().st_mtime_ns for p in shards_root.glob("shard-*/report.json")}
    assert sealed and not out.exists()

    again = subprocess.run([a for a in argv if a != "-q"], env=env, capture_output=True, text=True, timeout=600,
                           start_new_session=True)
    assert again.returncode == 0, again.stderr[-3000:]
    for name in sealed:
        index = int(name.split("-")[1])
        assert f"ray: shard {index}: sealed by an earlier run, reused (not recomputed)" in again.stderr, again.stderr
    report = _check_published(out, local, 7)
    assert sorted(report["engine"]["reused"]) == sorted(int(n.split("-")[1]) for n in sealed)
    assert len(sealed) < 7  # some shards were computed by the second driver


def _end_group(process) -> None:
    """The killed driver's own local cluster goes down with it; whatever of it is slow to go (its
    process group, which this test started) is ended here, by its id."""
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def runs_twice(config, attempts, *run):
    """Shard 0's task runs a second time once it has sealed its folder (as a retry of a task that had
    in fact finished would); the second run must be its cache hit, the folder unchanged."""
    first = ray_engine.run_shard(config, attempts, *run)
    if config.shard_index != 0:
        return first
    before = (Path(first["path"]) / "report.json").read_bytes()
    second = ray_engine.run_shard(config, attempts, *run)
    assert (Path(second["path"]) / "report.json").read_bytes() == before
    return second


def test_a_task_that_ran_twice_is_merged_once(cluster, setup, caplog):
    """Shard 0's task run a second time finds its sealed folder and reuses it: one folder per shard,
    each row merged once, and the log says it ran twice."""
    root, config, local = setup
    target = dataclasses.replace(config, output=str(root / "twice"))
    caplog.set_level(logging.INFO, logger="beam_sft.prepare")
    out = ray_engine.prepare_on_ray(target, shards=3, task=runs_twice)
    report = _check_published(out, local, 3)
    assert report["engine"]["attempts"] == {"0": 2, "1": 1, "2": 1}
    [retried] = report["engine"]["retried"]
    assert retried["shard"] == 0 and "attempt 1 (pid" in retried["why"]
    assert "sealed the shard and ran again" in retried["why"]


def test_a_shard_folder_of_another_run_is_replaced_and_a_changed_one_never_merged(cluster, setup, caplog):
    root, config, local = setup
    target = dataclasses.replace(config, output=str(root / "foreign"))
    shards_root = ray_engine.shards_root(Path(target.output).absolute())
    # a dead driver of another plan (2 shards) left its sealed shard-1 there: another fingerprint
    other = dataclasses.replace(config, num_shards=2, shard_index=1, output=str(shards_root / "shard-1"))
    from beam_sft.dataset_folder import owner

    shards_root.mkdir()
    owner.write_marker(shards_root)
    prepare(other)
    caplog.set_level(logging.INFO, logger="beam_sft.prepare")
    out = ray_engine.prepare_on_ray(target, shards=3)
    report = _check_published(out, local, 3)  # its rows were not merged: the folder is the local one
    assert report["engine"]["reused"] == []
    assert any(r.getMessage().startswith("ray: shard 1: ") and "is another run's (another fingerprint): prepared "
               "again" in r.getMessage() for r in caplog.records)

    # this run's shard, sealed, then one of its files changed: its digest differs
    again = dataclasses.replace(config, output=str(root / "changed"))
    shards_root = ray_engine.shards_root(Path(again.output).absolute())
    shards_root.mkdir()
    owner.write_marker(shards_root)
    prepare(dataclasses.replace(config, num_shards=3, shard_index=1, output=str(shards_root / "shard-1")))
    rejects = shards_root / "shard-1" / "rejects.jsonl"
    rejects.write_text(rejects.read_text() + "\n")
    with pytest.raises(PreparedError, match="rejects.jsonl"):
        ray_engine.prepare_on_ray(again, shards=3)
    assert not Path(again.output).exists()
