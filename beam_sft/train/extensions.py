"""Stale build locks in the torch extensions cache, cleared before a launch instead of hanging it.

DeepSpeed builds its ops (``cpu_adam``, ``fused_adam``, ...) on first use with
``torch.utils.cpp_extension.load``, which serializes builds through a ``lock`` file in the op's build
folder (``FileBaton``): made with O_EXCL, held open by the builder, removed when the build ends. A
builder that was killed leaves the file, and every later launch waits on it forever (rank 0 quiet
inside ``deepspeed.initialize``, the other ranks timing out much later).

A lock is stale when no process holds it open. Only processes of this machine can be seen (their
``/proc/PID/fd``), so a lock on a local file system with no local holder is certainly stale and is
removed (with a warning naming it); on a network file system (NFS, Lustre, GPFS, ...) a builder on
another node may hold it, so it is only reported (with the command that removes it) and left alone.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

logger = logging.getLogger("beam_sft.train")

NETWORK_FS = {"nfs", "nfs4", "lustre", "gpfs", "cifs", "smb3", "beegfs", "glusterfs", "fuse.sshfs", "ceph",
              "fuse.ceph", "9p", "afs", "wekafs", "fuse.juicefs"}


def extensions_root() -> Path:
    """Where torch builds extensions: ``$TORCH_EXTENSIONS_DIR``, else torch's default build root."""
    env = os.environ.get("TORCH_EXTENSIONS_DIR")
    if env:
        return Path(env)
    from torch.utils.cpp_extension import get_default_build_root

    return Path(get_default_build_root())


def build_locks(root: Path) -> list[Path]:
    """The ``lock`` files of the build folders under ``root`` (``<root>/<py_cu>/<op>/lock``, and one level up)."""
    if not root.is_dir():
        return []
    return sorted({*root.glob("*/lock"), *root.glob("*/*/lock")})


def open_by_some_process(path: Path) -> bool:
    """Whether any process of this machine that we can see has ``path`` open."""
    try:
        target = os.stat(path)
    except OSError:
        return False
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
                return True
    return False


def filesystem_type(path: Path, mounts: str | None = None) -> str | None:
    """The type of the file system holding ``path`` (the longest mount point above it in /proc/mounts)."""
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    real = os.path.realpath(path)
    best, kind = "", None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def clear_stale_build_locks(root: Path | None = None) -> list[Path]:
    """Remove every build lock under the extensions cache that no process holds (on a local file
    system); report the ones on a network file system. Returns what was removed. Never raises."""
    try:
        root = extensions_root() if root is None else Path(root)
        locks = build_locks(root)
    except Exception as exc:  # noqa: BLE001 (best effort: a launch must not fail over its cache)
        logger.debug("torch extensions cache not inspected: %s", exc)
        return []
    removed = []
    for lock in locks:
        if open_by_some_process(lock):
            continue  # a build in progress here
        if filesystem_type(lock) in NETWORK_FS:
            logger.warning("%s: a torch extension build lock no process of this machine holds; if no other "
                           "node is building, remove it (rm %s) or the launch waits on it forever", lock, lock)
            continue
        try:
            lock.unlink()
        except FileNotFoundError:  # its build just ended
            continue
        except OSError as exc:
            logger.warning("%s: a stale torch extension build lock that cannot be removed (%s)", lock, exc)
            continue
        logger.warning("removed %s: a torch extension build lock left by a killed build (no process holds it); "
                       "the op is built again", lock)
        removed.append(lock)
    return removed
