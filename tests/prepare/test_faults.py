"""Faults around ``prepare``: two runs into one folder, dead runs' leftovers, signals, unwritable
output, empty sources."""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beam_sft.dataset_folder.lock import lock_path, output_lock
from beam_sft.errors import NothingKept, OutputLocked, OutputUnwritable
from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
from tests.encode.conftest import simple_row, write_jsonl

REPO_ROOT = Path(__file__).resolve().parents[2]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _config(tmp_path, fixture_dir, rows=None, **options) -> PrepareConfig:
    data = write_jsonl(tmp_path / "rows.jsonl", rows if rows is not None else [simple_row(i) for i in range(4)])
    return PrepareConfig(sources=[SourceSpec(path=str(data))], tokenizer=str(fixture_dir),
                         output=str(tmp_path / "out"), num_proc=1, verify=False, **options)


def test_a_second_writer_is_refused_with_the_holders_pid(tmp_path, fixture_dir):
    config = _config(tmp_path, fixture_dir)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; sys.path.insert(0, sys.argv[1]);"
        "from pathlib import Path; from beam_sft.dataset_folder.lock import output_lock\n"
        "with output_lock(Path(sys.argv[2])):\n    print('locked', flush=True); time.sleep(60)"),
        str(REPO_ROOT), config.output], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(OutputLocked, match=rf"being written by process {holder.pid} "):
            prepare(config)
        assert not Path(config.output).exists()
    finally:
        holder.kill()
        holder.wait()
    assert prepare(config).is_dir()  # the kernel released the dead holder's lock


def test_a_stale_lock_of_a_dead_process_is_reported_and_taken_over(tmp_path, caplog):
    target = tmp_path / "out"
    dead = _dead_pid()
    lock_path(target).write_text(f"{dead}\n")
    with caplog.at_level("WARNING", logger="beam_sft.prepare"), output_lock(target) as path:
        assert path.read_text().strip() == str(os.getpid())
    assert f"taking over the stale lock {lock_path(target)} of process {dead} (dead)" in caplog.text
    assert not lock_path(target).exists()  # released


def _marked(folder: Path, pid: int) -> Path:
    """A folder as a run of ours with ``pid`` left it (its marker names that run)."""
    import json

    from beam_sft.dataset_folder import owner

    (folder / "tokenizer").mkdir(parents=True)
    (folder / owner.MARKER).write_text(json.dumps({**owner.this_run(), "pid": pid,
                                                   "started": owner.process_start(pid)}))
    return folder


def test_staging_left_by_a_dead_run_is_cleaned(tmp_path, fixture_dir):
    config = _config(tmp_path, fixture_dir)
    dead_pid = _dead_pid()
    dead = _marked(tmp_path / f".out.staging-{dead_pid}", dead_pid)
    old = _marked(tmp_path / f".out.old-{dead_pid}", os.getpid())  # renamed by the dead process
    alive = _marked(tmp_path / f".out.staging-{os.getppid()}", os.getppid())  # a live process's: left alone
    prepare(config)
    assert not dead.exists() and not old.exists() and alive.is_dir()


def test_an_unwritable_output_is_a_clear_error(tmp_path, fixture_dir, monkeypatch):
    config = _config(tmp_path, fixture_dir)
    from beam_sft.dataset_folder.arrow_dataset import DatasetWriter

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / ".out.staging-1" / "data.arrow"))

    monkeypatch.setattr(DatasetWriter, "write", full)  # where the dataset's rows are written
    with pytest.raises(OutputUnwritable, match=rf"^cannot write to {tmp_path}: no space left on the device"):
        prepare(config)
    monkeypatch.undo()
    assert not list(tmp_path.glob(".out.staging-*"))

    def read_only(path, *args, **kwargs):
        raise PermissionError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(OutputUnwritable, match=rf"^cannot write to {tmp_path}: the file system is read-only"):
        prepare(config)


def test_empty_sources_are_said_and_nothing_kept_fails(tmp_path, fixture_dir, caplog):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n  \n\n")
    config = _config(tmp_path, fixture_dir)
    config = PrepareConfig(**{**config.__dict__, "sources": [*config.sources, SourceSpec(path=str(empty))]})
    with caplog.at_level("WARNING", logger="beam_sft.prepare"):
        out = prepare(config)
    assert f"source {empty} ({empty}) is empty" in caplog.text
    import json

    entry = json.loads((out / "report.json").read_text())["sources"][str(empty)]
    assert entry["empty"] is True and entry["read"] == 0
    only_empty = PrepareConfig(**{**config.__dict__, "sources": [SourceSpec(path=str(empty))],
                                  "output": str(tmp_path / "nothing")})
    with pytest.raises(NothingKept, match=r"(?s)nothing to prepare.*the source is empty"):
        prepare(only_empty)
    assert not (tmp_path / "nothing").exists()


def test_nothing_kept_exits_non_zero_with_the_table(tmp_path, fixture_dir, capsys):
    from beam_sft.cli import main

    data = write_jsonl(tmp_path / "bad.jsonl", [{"messages": [{"role": "user", "content": "no answer"}]}] * 3)
    code = main(["prepare", "--data", str(data), "--tokenizer", str(fixture_dir), "--output", str(tmp_path / "o"),
                 "--num-proc", "1", "--no-verify"])
    err = capsys.readouterr().err
    assert code == 2 and "nothing to prepare" in err
    assert re.search(r"bad\.jsonl\s+openai\s+3\s+0\s+3\s+no_trained_turn=3", err)  # convert's table


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_prepare_cleanly(tmp_path, fixture_dir, signum):
    from beam_sft.data.synthetic import synthetic_rows

    data = write_jsonl(tmp_path / "rows.jsonl", synthetic_rows(6000, seed=1))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "beam_sft", "prepare", "--data", str(data), "--tokenizer",
                             str(fixture_dir), "--output", str(tmp_path / "out"), "--num-proc", "2", "--no-verify"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    workers: list[int] = []
    deadline = time.time() + 120
    while time.time() < deadline and len(workers) < 2 and proc.poll() is None:
        workers = _children(proc.pid)
        time.sleep(0.1)
    assert len(workers) >= 2, "the workers never started"
    time.sleep(0.5)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    last = [line for line in err.splitlines() if line.strip()][-1]
    assert last == f"beam-sft prepare: interrupted by {signal.Signals(signum).name}; nothing was published, staging removed"
    assert "Traceback" not in err
    time.sleep(1)
    assert [w for w in workers if Path(f"/proc/{w}").exists() and "zombie" not in
            Path(f"/proc/{w}/status").read_text()] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl"]


@pytest.mark.slow
def test_workers_die_with_a_killed_parent(tmp_path, fixture_dir):
    from beam_sft.data.synthetic import synthetic_rows

    data = write_jsonl(tmp_path / "rows.jsonl", synthetic_rows(6000, seed=2))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "beam_sft", "prepare", "--data", str(data), "--tokenizer",
                             str(fixture_dir), "--output", str(tmp_path / "out"), "--num-proc", "2", "--no-verify"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[int] = []
    deadline = time.time() + 120
    while time.time() < deadline and len(workers) < 2 and proc.poll() is None:
        workers = _children(proc.pid)
        time.sleep(0.1)
    assert len(workers) >= 2
    time.sleep(1.0)  # mid-run
    proc.kill()
    proc.wait()
    time.sleep(2)
    assert [w for w in workers if Path(f"/proc/{w}").exists()] == []
    # the next run removes the dead run's staging
    prepare(PrepareConfig(sources=[SourceSpec(path=str(write_jsonl(tmp_path / "small.jsonl", [simple_row(0)])))],
                          tokenizer=str(fixture_dir), output=str(tmp_path / "out"), num_proc=1, verify=False))
    assert not list(tmp_path.glob(".out.staging-*"))


def test_readers_of_a_cache_hit_need_no_lock(tmp_path, fixture_dir):
    """The ranks of a training run read the folder the first one prepared, all at once."""
    config = _config(tmp_path, fixture_dir)
    out = prepare(config)
    with output_lock(Path(config.output)):  # as if another run held it
        assert prepare(config) == out
