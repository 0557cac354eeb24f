"""What a prepare run can work out while its tokenizer loads: in a forked process, on the core the load
leaves idle.

Loading the tokenizer takes one core for a second or two at every start (importing transformers, then
the backend's read of tokenizer.json, which holds the GIL, so no thread can run beside it), and the
other core waits. Two parts of the run's fingerprint do not depend on the tokenizer: the code digest
(``fingerprint.results_code_digest``: every module that decides the result, compiled; 0.2 to 0.3 s)
and the bytes of every local input file (``resolved.data_digest``: a second a few GB). ``HeadStart.fork``
forks a child that computes both and sends them back through a pipe; ``resolve`` takes them from
``HeadStart.result`` once the tokenizer is loaded.

A helper, never a second path: what the child does not deliver (it failed, was killed, the source is
a hub dataset whose revision is looked up online, the platform has no ``fork``) the parent computes
itself, as before, so an error is raised where and as it always was, and every value is the one the
same function gives in the parent (``tests/prepare/test_head_start.py``).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

from beam_sft.data import fingerprint as fp
from beam_sft.data.hub import DatasetRef, dataset_source
from beam_sft.prepare.children import children_die_with_me
from beam_sft.prepare.config import SourceSpec
from beam_sft.prepare.resolved import Head, data_digest


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
    """The forked child and the read end of its pipe. ``result()`` waits for it (once); ``close()``
    ends a child whose result was never read and reaps it."""

    def __init__(self, pid: int, fd: int):
        self.pid = pid
        self.fd = fd
        self._result: Head | None = None

    @classmethod
    def fork(cls, sources: Sequence[SourceSpec]) -> HeadStart | None:
        """Fork the child, or None where that cannot be done safely: no ``fork`` (a spawned process
        would import everything again), not Linux (forking a process that may hold system frameworks),
        or another Python thread running (a caller's: it may hold the import lock or a logging lock,
        which the child, importing modules, would then wait on for ever)."""
        if not sys.platform.startswith("linux") or not hasattr(os, "fork") or threading.active_count() > 1:
            return None
        read_end, write_end = os.pipe()
        try:
            with children_die_with_me():  # killed with the parent, Ctrl-C left to the parent
                pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return None
        if pid == 0:  # the child: never returns into the caller's code
            code = 0
            try:
                os.close(read_end)
                _write_all(write_end, pickle.dumps(work_out(sources)))
            except BaseException:  # noqa: BLE001 (the parent computes what is missing)
                code = 1
            finally:
                os._exit(code)  # no atexit handlers, no flush of buffers inherited from the parent
        os.close(write_end)
        return cls(pid, read_end)

    def result(self) -> Head:
        """The child's result; an empty Head when it delivered none."""
        if self._result is not None:
            return self._result
        chunks = []
        try:
            while chunk := os.read(self.fd, 1 << 16):
                chunks.append(chunk)
        except OSError:
            chunks = []
        self._close_fd()
        self._reap()
        try:
            found = pickle.loads(b"".join(chunks)) if chunks else Head()
        except Exception:  # noqa: BLE001 (cut off: the child was killed while writing)
            found = Head()
        self._result = found if isinstance(found, Head) else Head()
        return self._result

    def close(self) -> None:
        """End the child if its result was never read (an error or an interrupt came first), and reap it."""
        self._close_fd()
        if self._result is None and self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        self._reap()

    def _close_fd(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def _reap(self) -> None:
        if self.pid:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.pid = 0


@contextlib.contextmanager
def head_start(sources: Sequence[SourceSpec]) -> Iterator[HeadStart | None]:
    """``HeadStart.fork(sources)`` for the block's duration; the child never outlives it. (The sources,
    not the config: ``resolve`` is the one reader of the config.)"""
    head = HeadStart.fork(sources)
    try:
        yield head
    finally:
        if head is not None:
            head.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.close(fd)
