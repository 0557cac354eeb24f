"""Progress of ``prepare`` for the person or the log watching it.

- On a terminal: a bar (rows/s and ETA) for the encode pass (``bar``: ``datasets``' tqdm, so that it
  follows ``datasets``' progress-bar setting) and one line per finished phase.
- Not on a terminal (a log): no bars (their carriage returns make one endless line of a log, so the
  CLI turns them off for its own run and back on after); instead one line per phase every
  ``interval`` seconds while it runs: records done, rows/s, ETA, from a counter the workers share.
- ``--quiet``: neither (warnings and errors only).

The library never changes ``datasets``' settings by itself: only the CLI does, for the run it makes.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import sys
import time
from collections.abc import Iterator

from beam_sft.periodic import periodic

logger = logging.getLogger("beam_sft.prepare")


class Counter:
    """Records done, shared with forked workers (a ``multiprocessing.Value``, made before the fork)."""

    def __init__(self) -> None:
        self._value = multiprocessing.get_context("fork").Value("q", 0)

    def add(self, n: int) -> None:
        with self._value.get_lock():
            self._value.value += n

    @property
    def value(self) -> int:
        return int(self._value.value)


def line(phase: str, done: int, total: int, seconds: float) -> str:
    """One progress line.

    >>> line("encode", 250, 1000, 5.0)
    'encode: 250/1000 records (25%), 50 rows/s, ETA 15s'
    """
    rate = done / seconds if seconds > 0 else 0.0
    eta = f"{(total - done) / rate:.0f}s" if rate > 0 else "?"
    share = f" ({100 * done // total}%)" if total else ""
    return f"{phase}: {done}/{total} records{share}, {rate:.0f} rows/s, ETA {eta}"


@contextlib.contextmanager
def heartbeat(phase: str, total: int, counter: Counter | None, interval: float) -> Iterator[None]:
    """Log ``line(...)`` every ``interval`` seconds while the block runs (interval <= 0: never)."""
    if counter is None or interval <= 0:
        yield
        return
    started = time.time()
    with periodic(interval, lambda: logger.info(line(phase, counter.value, total, time.time() - started)),
                  f"beam-sft-progress-{phase}"):
        yield


@contextlib.contextmanager
def cli_progress(quiet: bool) -> Iterator[float]:
    """The CLI's choice (see the module docstring); yields the heartbeat interval for the run."""
    import datasets as ds_logging

    interactive = sys.stderr.isatty()
    was_enabled = ds_logging.is_progress_bar_enabled()
    if quiet or not interactive:
        ds_logging.disable_progress_bars()
    try:
        yield 0.0 if quiet or interactive else 10.0
    finally:
        if was_enabled:
            ds_logging.enable_progress_bars()


@contextlib.contextmanager
def bar(phase: str, total: int, done: int = 0) -> Iterator:
    """A progress bar for ``phase`` (``update(n)`` as records are done); shown only where
    ``datasets``' progress bars are on (the CLI turns them off for a log and for ``--quiet``)."""
    from datasets.utils import tqdm

    with tqdm(total=total, initial=done, desc=phase, unit=" records") as progress:
        yield progress
