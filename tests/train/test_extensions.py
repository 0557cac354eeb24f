"""A stale DeepSpeed build lock in the torch extensions cache hung ZeRO
launches. ``beam_sft.train.extensions`` removes a lock no process holds, keeps a held one, and only
reports one on a network file system (a builder on another node may hold it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from beam_sft.train.extensions import build_locks, clear_stale_build_locks, filesystem_type


def _lock(root, op="cpu_adam"):
    folder = root / "py311_cpu" / op
    folder.mkdir(parents=True)
    lock = folder / "lock"
    lock.write_text("")
    return lock


def test_a_lock_no_process_holds_is_removed(tmp_path, caplog):
    stale = _lock(tmp_path)
    with caplog.at_level("WARNING", logger="beam_sft.train"):
        assert clear_stale_build_locks(tmp_path) == [stale]
    assert not stale.exists() and str(stale) in caplog.text


def test_a_lock_a_live_build_holds_is_kept(tmp_path):
    held = _lock(tmp_path, "fused_adam")
    builder = subprocess.Popen([sys.executable, "-c", "import os, sys, time; os.open(sys.argv[1], os.O_RDONLY); "
                                "print('ok', flush=True); time.sleep(60)", str(held)], stdout=subprocess.PIPE, text=True)
    try:
        assert builder.stdout.readline().strip() == "ok"
        assert clear_stale_build_locks(tmp_path) == []
        assert held.exists()
    finally:
        builder.kill()
        builder.wait()
    assert clear_stale_build_locks(tmp_path) == [held]  # its builder died: now stale


def test_a_lock_on_a_network_file_system_is_only_reported(tmp_path, monkeypatch, caplog):
    lock = _lock(tmp_path)
    monkeypatch.setattr("beam_sft.train.extensions.filesystem_type", lambda path: "nfs4")
    with caplog.at_level("WARNING", logger="beam_sft.train"):
        assert clear_stale_build_locks(tmp_path) == []
    assert lock.exists() and f"rm {lock}" in caplog.text


def test_the_file_system_type_is_the_longest_mount_above(tmp_path):
    mounts = "/dev/sda1 / ext4 rw 0 0\nserver:/home /home nfs4 rw 0 0\nserver:/home/x/y /home/x/y lustre rw 0 0\n"
    assert filesystem_type(tmp_path.__class__("/home/me/.cache"), mounts) == "nfs4"
    assert filesystem_type(tmp_path.__class__("/home/x/y/z"), mounts) == "lustre"
    assert filesystem_type(tmp_path.__class__("/homework"), mounts) == "ext4"


def test_torch_extensions_dir_is_honoured_and_a_missing_cache_is_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "none"))
    assert clear_stale_build_locks() == []
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    stale = _lock(tmp_path)
    assert build_locks(tmp_path) == [stale]
    os.utime(stale, (time.time() - 3600,) * 2)
    assert clear_stale_build_locks() == [stale]


def test_a_real_file_baton_left_by_a_killed_builder_no_longer_blocks(tmp_path):
    """torch's own FileBaton, as cpp_extension.load uses it: the builder is killed holding it."""
    import signal

    from torch.utils.file_baton import FileBaton

    folder = tmp_path / "py311_cpu" / "cpu_adam"
    folder.mkdir(parents=True)
    lock = folder / "lock"
    builder = subprocess.Popen([sys.executable, "-c", "import sys, time; from torch.utils.file_baton import "
                                "FileBaton; b = FileBaton(sys.argv[1]); assert b.try_acquire(); print('ok', "
                                "flush=True); time.sleep(60)", str(lock)], stdout=subprocess.PIPE, text=True)
    assert builder.stdout.readline().strip() == "ok"
    assert clear_stale_build_locks(tmp_path) == []  # building: kept
    builder.send_signal(signal.SIGKILL)
    builder.wait()
    assert not FileBaton(str(lock)).try_acquire()  # what hung every later launch
    assert clear_stale_build_locks(tmp_path) == [lock]
    baton = FileBaton(str(lock))
    assert baton.try_acquire()
    baton.release()
