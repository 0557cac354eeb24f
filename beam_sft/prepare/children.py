"""Processes forked while ``prepare`` runs (the encode and verify pools' workers, and a
``datasets`` queue manager if a library call starts one) die
with it, however it dies (kill -9 included), and leave Ctrl-C to it.

``children_die_with_me()`` arms an ``os.register_at_fork`` hook for its duration: in every child
forked meanwhile, Linux's ``PR_SET_PDEATHSIG`` makes the kernel send SIGTERM when the parent goes,
SIGINT is ignored (the parent handles it, cleans up and says so in one line) and SIGTERM kills as its
default action does, except in ``datasets``' queue manager, which exits through ``SystemExit`` so
that its exit handlers remove its ``pymp-*`` socket folder from TMPDIR (killed outright, it would
leave the folder behind whenever the parent is killed with kill -9). Workers are not given
``SystemExit``: library code that catches it would keep them alive, and the pool's terminate waits.
``subprocess`` launches do not run the hook (they exec at once).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator

_PR_SET_PDEATHSIG = 1
_armed_for: list[int] = []  # the pid children must die with, while armed (the hook reads it)
_registered: list[bool] = []


def _is_queue_manager() -> bool:
    for name in ("multiprocess", "multiprocessing"):  # datasets forks through dill's multiprocess
        module = sys.modules.get(name)
        if module is not None and module.current_process().name.startswith("SyncManager"):
            return True
    return False


def _on_sigterm(signum, frame) -> None:
    if _is_queue_manager():
        raise SystemExit(128 + signum)  # its server loop exits on it, quietly, running exit handlers
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _in_child() -> None:
    if not _armed_for:
        return
    parent = _armed_for[-1]
    _armed_for.clear()  # a grandchild is its parent's business
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the pool's own shutdown is all there is
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


@contextlib.contextmanager
def children_die_with_me() -> Iterator[None]:
    if not _registered:
        os.register_at_fork(after_in_child=_in_child)
        _registered.append(True)
    _armed_for.append(os.getpid())
    try:
        yield
    finally:
        if _armed_for:  # (nested use: the outer block stays armed)
            _armed_for.pop()
