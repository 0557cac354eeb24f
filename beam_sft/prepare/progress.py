"""Progress of ``prepare`` for the person or the log watching it.

- On a terminal: a bar (rows/s and ETA) for the encode pass (``bar``) and one line per finished phase.
- Not on a terminal (a log): no bars (their carriage returns make one endless line of a log, so the
  CLI turns off ``datasets``' too, for its own run); instead one line per phase every ``interval``
  seconds while it runs: records done, rows/s, ETA, from a counter the workers share.
- ``--quiet``: neither (warnings and errors only).
- ``HF_DATASETS_DISABLE_PROGRESS_BARS``, where set, decides the bars, ours as ``datasets``'.

The library never changes ``datasets``' settings by itself: only the CLI does, for the run it makes.
Nothing here imports ``datasets`` (half a second of a CLI start that reads only local files): where
it is not imported yet, the CLI's choice reaches it through its environment variable, which it reads
once, at import.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import multiprocessing
import os
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


BARS_VARIABLE = "HF_DATASETS_DISABLE_PROGRESS_BARS"
_TRUE, _FALSE = ("1", "ON", "YES", "TRUE"), ("0", "OFF", "NO", "FALSE")  # as datasets reads it


@dataclasses.dataclass(frozen=True)
class Progress:
    """What the CLI chose for a run: heartbeat lines every ``interval`` seconds (0: none), bars or not."""

    interval: float
    bars: bool


def bars_forced() -> bool | None:
    """``HF_DATASETS_DISABLE_PROGRESS_BARS``: False where it turns bars off, True where it keeps them on,
    None where unset (or not a value ``datasets`` reads)."""
    value = os.environ.get(BARS_VARIABLE, "").upper()
    return False if value in _TRUE else True if value in _FALSE else None


@contextlib.contextmanager
def cli_progress(quiet: bool) -> Iterator[Progress]:
    """The CLI's choice (see the module docstring) for the run inside the block."""
    interactive = sys.stderr.isatty()
    forced = bars_forced()
    bars = forced if forced is not None else not quiet and interactive
    with _datasets_bars(bars or forced is not None):
        yield Progress(interval=0.0 if quiet or interactive else 10.0, bars=bars)


@contextlib.contextmanager
def _datasets_bars(leave: bool) -> Iterator[None]:
    """``datasets``' bars off inside the block (unless ``leave``), back as they were after it."""
    if leave:
        yield
        return
    if "datasets" in sys.modules:
        import datasets

        was_enabled = datasets.is_progress_bar_enabled()
        datasets.disable_progress_bars()
        try:
            yield
        finally:
            if was_enabled:
                datasets.enable_progress_bars()
        return
    # Not imported: an import during the run (a hub source) reads this, once; its bars then stay off
    # for the rest of this process, which for the CLI is the run.
    os.environ[BARS_VARIABLE] = "1"
    try:
        yield
    finally:
        os.environ.pop(BARS_VARIABLE, None)


@contextlib.contextmanager
def bar(phase: str, total: int, done: int = 0, *, show: bool = True) -> Iterator:
    """A progress bar for ``phase`` (``update(n)`` as records are done); ``show=False``: none (the CLI
    off a terminal, ``--quiet``), and none where ``HF_DATASETS_DISABLE_PROGRESS_BARS`` turns bars off."""
    from tqdm.auto import tqdm

    forced = bars_forced()
    with tqdm(total=total, initial=done, desc=phase, unit=" records",
              disable=not (forced if forced is not None else show)) as progress:
        yield progress
