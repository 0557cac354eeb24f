"""What a prepare run can work out while its tokenizer loads: in a forked process, on the core the load
leaves idle.

Loading the tokenizer takes one core for a second or two at every start (importing transformers, then
the backend's read of tokenizer.json, which holds the GIL, so no thread can run beside it), and the
other core waits. Two parts of the run's fingerprint do not depend on the tokenizer: the code digest
(``fingerprint.results_code_digest``: every module that decides the result, compiled; 0.2 to 0.3 s)
and the bytes of every local input file (``resolved.data_digest``: a second a few GB). ``HeadStart.fork``
forks a child that computes both and sends them back through a pipe; ``resolve`` takes them from
``HeadStart.result`` once the tokenizer is loaded. Where the run allows it (``resolved.ahead_plan``)
the child then converts records until the parent stops it (``convert_ahead.py``).

A helper, never a second path: what the child does not deliver (it failed, was killed, the source is
a hub dataset whose revision is looked up online, the platform has no ``fork``) the parent computes
itself, as before, so an error is raised where and as it always was, and every value is the one the
same function gives in the parent (``tests/prepare/test_head_start.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import select
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence

from beam_sft.data import fingerprint as fp
from beam_sft.data.hub import DatasetRef, dataset_source
from beam_sft.prepare.children import children_die_with_me
from beam_sft.prepare.config import SourceSpec
from beam_sft.prepare.convert_ahead import Ahead, convert_ahead
from beam_sft.prepare.resolved import AheadPlan, Head, data_digest


def work_out(sources: Sequence[SourceSpec]) -> Head:
    """The child's work, for the run's sources (the same functions a run without a child computes with)."""
    data: dict[int, str] = {}
    for index, spec in enumerate(sources):
        try:
            # a local file or folder only: a hub dataset's digest names its revision, looked up online
            if spec.batch_input is None and not isinstance(dataset_source(spec), DatasetRef):
                data[index] = data_digest(spec)
        except Exception:  # noqa: BLE001 (the parent computes it and raises as it always did)
            continue
    try:
        code = fp.results_code_digest()
    except Exception:  # noqa: BLE001
        code = None
    return Head(code, data)


class HeadStart:
    """The forked child and the read end of its pipe. ``result()`` waits for its digests (once);
    with an ``AheadPlan`` the child then converts records (``convert_ahead``) until ``take_ahead()``
    stops it and takes its batches; ``close()`` ends a child still running and reaps it."""

    def __init__(self, pid: int, fd: int, stop_fd: int = -1, ahead_fd: int = -1):
        self.pid = pid
        self.fd = fd
        self.stop_fd = stop_fd  # parent -> child: stop converting (a byte, or the end of the pipe)
        self.ahead_fd = ahead_fd  # the unlinked file the child writes converted batches into
        self._result: Head | None = None

    @classmethod
    def fork(cls, sources: Sequence[SourceSpec], ahead: AheadPlan | None = None) -> HeadStart | None:
        """Fork the child, or None where that cannot be done safely: no ``fork`` (a spawned process
        would import everything again), not Linux (forking a process that may hold system frameworks),
        or another Python thread running (a caller's: it may hold the import lock or a logging lock,
        which the child, importing modules, would then wait on for ever)."""
        if not sys.platform.startswith("linux") or not hasattr(os, "fork") or threading.active_count() > 1:
            return None
        read_end, write_end = os.pipe()
        stop_read = stop_write = ahead_fd = -1
        if ahead is not None:
            try:
                stop_read, stop_write = os.pipe()
                with tempfile.TemporaryFile() as scratch:  # unlinked: gone with the last descriptor, even on a kill
                    ahead_fd = os.dup(scratch.fileno())
            except OSError:  # no temporary folder to write in: the digests only, the workers convert
                _close(stop_read, stop_write)
                stop_read = stop_write = ahead_fd = -1
                ahead = None
        try:
            with children_die_with_me():  # killed with the parent, Ctrl-C left to the parent
                pid = os.fork()
        except OSError:
            _close(read_end, write_end, stop_read, stop_write, ahead_fd)
            return None
        if pid == 0:  # the child: never returns into the caller's code
            code = 0
            try:
                _close(read_end, stop_write)
                _quiet()
                _send(write_end, work_out(sources))
                if ahead is not None:
                    try:
                        converted = convert_ahead(ahead, ahead_fd, stop_read)
                    except Exception:  # noqa: BLE001 (the workers convert every batch, as always)
                        converted = None
                    _send(write_end, converted)
            except BaseException:  # noqa: BLE001 (the parent computes what is missing)
                code = 1
            finally:
                os._exit(code)  # no atexit handlers, no flush of buffers inherited from the parent
        _close(write_end, stop_read)
        return cls(pid, read_end, stop_write, ahead_fd)

    def result(self) -> Head:
        """The child's digests; an empty Head when it delivered none."""
        if self._result is not None:
            return self._result
        found = _receive(self.fd)
        self._result = found if isinstance(found, Head) else Head()
        if self.ahead_fd < 0 or not isinstance(found, Head):  # nothing more will come
            self._close_fd()
            self._reap()
        return self._result

    def stop_ahead(self) -> None:
        """Tell the child to stop converting (it answers within 16 records; ``take_ahead`` takes its batches)."""
        if self.stop_fd >= 0:
            _close(self.stop_fd)  # the end of the pipe: readable for the child's select
            self.stop_fd = -1

    def take_ahead(self, timeout: float = 1.0) -> Ahead | None:
        """The batches the child converted (it is stopped first), owning their file from now on; None
        when there are none, or the child does not answer within ``timeout`` seconds (it is killed)."""
        if self.ahead_fd < 0:
            return None
        self.result()
        self.stop_ahead()
        found = _receive(self.fd, timeout) if self.fd >= 0 else None
        if isinstance(found, Ahead):
            found.fd, self.ahead_fd = self.ahead_fd, -1  # (not closed with the child below)
        self.close()
        return found if isinstance(found, Ahead) else None

    def close(self) -> None:
        """End the child if it may still run (an error or an interrupt came first, or it is still
        converting), and reap it; the converted batches' file goes unless ``take_ahead`` took it."""
        self._close_fd()
        self.stop_ahead()
        if self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        self._reap()
        if self.ahead_fd >= 0:
            _close(self.ahead_fd)
            self.ahead_fd = -1

    def _close_fd(self) -> None:
        if self.fd >= 0:
            _close(self.fd)
            self.fd = -1

    def _reap(self) -> None:
        if self.pid:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.pid = 0


@contextlib.contextmanager
def head_start(sources: Sequence[SourceSpec], ahead: AheadPlan | None = None) -> Iterator[HeadStart | None]:
    """``HeadStart.fork(sources, ahead)`` for the block's duration; the child never outlives it. (The
    sources and the ``AheadPlan``, not the config: ``resolve``'s module is the one reader of the config.)"""
    head = HeadStart.fork(sources, ahead)
    try:
        yield head
    finally:
        if head is not None:
            head.close()


def _quiet() -> None:
    """The child's output goes nowhere: a warning or a log line its conversion makes is the parent's to
    give (the workers convert the same rows), not a second copy on the user's terminal."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    # and what writes to the stream objects themselves, or to a handler holding the old ones
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (the child's, to its os._exit)
    logging.disable(logging.CRITICAL)


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


def _send(fd: int, value) -> None:
    """One message on the pipe: its length (8 bytes), then the pickle."""
    data = pickle.dumps(value)
    _write_all(fd, len(data).to_bytes(8, "little") + data)


def _receive(fd: int, timeout: float | None = None):
    """The next message on the pipe, or None (the pipe ended or was cut short, or nothing came within
    ``timeout`` seconds: the child writes each message whole, so only its start is waited for)."""
    try:
        if timeout is not None and not select.select([fd], [], [], timeout)[0]:
            return None
        size = _read_exactly(fd, 8)
        data = _read_exactly(fd, int.from_bytes(size, "little")) if size is not None else None
        return pickle.loads(data) if data is not None else None
    except Exception:  # noqa: BLE001 (cut off: the child was killed while writing)
        return None


def _read_exactly(fd: int, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
