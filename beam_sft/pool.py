"""How a ``multiprocessing`` pool's work is read and the pool ended: ``imap_then_close``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator


def imap_then_close(pool, func: Callable, tasks: Iterable) -> Iterator:
    """``pool.imap(func, tasks)``, results in task order; then the pool ends.

    At the normal end it is closed and joined: each worker takes the end-of-work sentinel and exits
    by itself. Only on an error, or when the caller stops reading early (the generator is closed),
    is it terminated, which sends each worker SIGTERM. Ending every run that way (``with pool:``)
    twice left ``prepare`` waiting for ever on 2 cores: one worker had died holding the task
    queue's lock, and the other, waiting for that lock, was still alive when the join began.
    """
    try:
        yield from pool.imap(func, tasks)
        pool.close()
        pool.join()
    finally:
        pool.terminate()  # (after close and join: nothing left to signal)
