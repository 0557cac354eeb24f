"""One writer per output folder: ``output_lock(final)`` holds ``.NAME.lock`` beside it.

The lock is an ``flock`` on that file, so the kernel releases it when the holder dies, however it
dies; the file also records the holder's pid, so a refusal can say who holds it, and a lock file left
by a dead process is reported as taken over. Two ``prepare`` runs into one folder: the second is
refused with the first one's pid, instead of the two mixing their data.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path

from beam_sft.dataset_folder.oserrors import unwritable
from beam_sft.errors import OutputLocked

logger = logging.getLogger("beam_sft.prepare")


def lock_path(final: Path) -> Path:
    return Path(final).parent / f".{Path(final).name}.lock"


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (on this machine)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _read_pid(fd: int) -> int | None:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 64).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None


def _is_lock_file(fd: int) -> bool:
    """Whether the file open at ``fd`` is one of our lock files: empty (made, not yet written) or a pid
    line; anything else is a user's file that only has the name, and is neither written nor removed."""
    os.lseek(fd, 0, os.SEEK_SET)
    data = os.read(fd, 65)
    return len(data) <= 64 and (not data.strip() or data.strip().isdigit())


_SIGNALS = {signal.SIGINT, signal.SIGTERM}


@contextlib.contextmanager
def output_lock(final: Path) -> Iterator[Path]:
    """Hold the lock of ``final`` for the duration; OutputLocked when a live process holds it.

    SIGINT and SIGTERM wait while the lock file is taken and released (a handler that raises there
    would leave the file behind); they arrive once the holder is inside the block that removes it.
    """
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        fd, path = _acquire(final)
    except BaseException:  # refused or unwritable: nothing of ours to remove
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        raise
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a signal that waited is handled here, inside
        yield path
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        try:
            with contextlib.suppress(OSError):
                path.unlink()
            os.close(fd)  # releases the flock
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def clear_stale_lock(final: Path) -> bool:
    """Remove the lock file of ``final`` when its holder is gone (a killed run): a reader that takes a
    cache hit never takes the lock, and would otherwise leave a dead run's lock there for good. A lock
    held by a live process, or a file that is not one of our locks, is left as it is. True if removed."""
    path = lock_path(final)
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:  # none there, a link, unreadable: nothing of ours to clear
        return False
    try:
        if not _is_lock_file(fd):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live writer holds it
        if os.fstat(fd).st_ino != os.stat(path).st_ino:
            return False
        holder = _read_pid(fd)
        path.unlink()
        logger.info("removed the stale lock %s of process %s, which is gone", path, holder)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _acquire(final: Path) -> tuple[int, Path]:
    """Take the flock and write our pid; (the locked fd, the lock file)."""
    path = lock_path(final)
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # O_NOFOLLOW: a link named like the lock must not make us write through it
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise OutputLocked(f"{path} is a symbolic link, not a lock of beam-sft; move it away") from None
            raise unwritable(path.parent, exc) from exc
        try:
            ours = _is_lock_file(fd)
        except OSError as exc:
            os.close(fd)
            raise unwritable(path.parent, exc) from exc
        if not ours:
            os.close(fd)
            raise OutputLocked(f"{path} is in the way of the lock for {final} and is not a lock of beam-sft (it "
                               "holds other data); move it away")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"process {holder}" if holder is not None else "another process"
            raise OutputLocked(f"{final} is being written by {who} (lock {path}); wait for it to finish, "
                               "or give another --output") from None
        try:  # the file we locked must still be the one at the path (a releaser may have removed it)
            if os.fstat(fd).st_ino != os.stat(path).st_ino:
                raise FileNotFoundError
        except FileNotFoundError:
            os.close(fd)
            continue
        break
    try:
        previous = _read_pid(fd)
        if previous is not None and previous != os.getpid():
            state = "dead" if not pid_alive(previous) else "no longer holding it"
            logger.warning("taking over the stale lock %s of process %s (%s)", path, previous, state)
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, f"{os.getpid()}\n".encode())
    except BaseException as exc:
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)
        if isinstance(exc, OSError):  # a full disk or a read-only file system while writing the pid
            raise unwritable(path.parent, exc) from exc
        raise
    return fd, path
