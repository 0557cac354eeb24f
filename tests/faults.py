"""In-process fault injection for the file system (tests run as root, so chmod stops nothing): under one
folder, every write says "read-only file system" (EROFS) or "no space left on the device" (ENOSPC).

Python's file objects, ``os.open``/``os.write``, ``os.replace``/``os.rename`` and ``os.mkdir`` are all
covered, so a write anywhere in our code (or in the pure-Python parts of a library) meets the fault.
"""

from __future__ import annotations

import builtins
import errno
import io
import os
from pathlib import Path

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _under(path, root: Path) -> bool:
    try:
        real = Path(os.path.realpath(os.fspath(path)))
    except (TypeError, ValueError):
        return False
    return real == root or root in real.parents


def _fd_under(fd: int, root: Path) -> bool:
    try:
        return _under(os.readlink(f"/proc/self/fd/{fd}"), root)
    except OSError:
        return False


class _FullFile(io.RawIOBase):
    """A file that opens, then fails every write with ENOSPC (as a full disk does)."""

    def __init__(self, inner, name):
        self._inner, self.name = inner, name

    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(self.name))

    def writable(self):
        return True

    def close(self):
        self._inner.close()
        super().close()

    def __getattr__(self, item):
        return getattr(self._inner, item)


def inject(monkeypatch, root: Path, code: int) -> None:
    """Make every write under ``root`` fail with ``code`` (errno.EROFS or errno.ENOSPC)."""
    root = Path(os.path.realpath(root))
    message = os.strerror(code)
    real_open, real_os_open, real_write = builtins.open, os.open, os.write
    real_replace, real_rename, real_mkdir = os.replace, os.rename, os.mkdir

    def fail(path):
        raise OSError(code, message, str(path))

    def fake_open(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, bytes, os.PathLike)) and any(c in mode for c in "wax+") and _under(file, root):
            if code == errno.ENOSPC:
                inner = real_open(file, mode, *args, **kwargs)  # the file is made; its bytes do not fit
                return io.TextIOWrapper(io.BufferedWriter(_FullFile(inner, file))) if "b" not in mode \
                    else io.BufferedWriter(_FullFile(inner, file))
            fail(file)
        return real_open(file, mode, *args, **kwargs)

    def fake_os_open(path, flags, *args, **kwargs):
        if flags & _WRITE_FLAGS and _under(path, root) and code == errno.EROFS:
            fail(path)
        return real_os_open(path, flags, *args, **kwargs)

    def fake_write(fd, data):
        if _fd_under(fd, root):
            raise OSError(code, message)
        return real_write(fd, data)

    def guarded(real):
        def call(src, dst, *args, **kwargs):
            if code == errno.EROFS and (_under(src, root) or _under(dst, root)):
                fail(dst)
            return real(src, dst, *args, **kwargs)
        return call

    def fake_mkdir(path, *args, **kwargs):
        if code == errno.EROFS and _under(path, root):
            fail(path)
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr(os, "open", fake_os_open)
    monkeypatch.setattr(os, "write", fake_write)
    monkeypatch.setattr(os, "replace", guarded(real_replace))
    monkeypatch.setattr(os, "rename", guarded(real_rename))
    monkeypatch.setattr(os, "mkdir", fake_mkdir)
