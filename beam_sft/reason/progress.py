"""The run's progress on stderr: rows/s, requests, tokens, cache hits, errors, rejected turns.

On a terminal one line redrawn in place; in a log one line every ``interval`` seconds; ``quiet``:
nothing. A daemon thread draws it, so the workers never wait on the terminal.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from beam_sft.periodic import periodic
from beam_sft.reason.client import Budget
from beam_sft.reason.fill import FillStats
from beam_sft.timing import PhaseClock


def line(stats: FillStats, budget: Budget, seconds: float) -> str:
    """
    >>> line(FillStats(rows=10, filled=3), Budget(requests=4, tokens=900, errors=1), 2.0)
    'reason: 10 rows, 5.0 rows/s, 3 filled, 0 rejected, 4 requests, 900 tokens, 0 cached, 1 errors'
    """
    rate = stats.rows / seconds if seconds > 0 else 0.0
    return (f"reason: {stats.rows} rows, {rate:.1f} rows/s, {stats.filled} filled, "
            f"{sum(stats.rejected.values())} rejected, {budget.requests} requests, {budget.tokens} tokens, "
            f"{stats.cached} cached, {budget.errors} errors")


@contextlib.contextmanager
def progress(stats: FillStats, budget: Budget, *, quiet: bool, interval: float | None = None) -> Iterator[None]:
    if quiet:
        yield
        return
    interactive = sys.stderr.isatty()
    every = interval if interval is not None else (0.5 if interactive else 10.0)
    clock = PhaseClock()  # beam_sft/timing.py

    def draw() -> None:
        text = line(stats, budget, clock.elapsed())
        sys.stderr.write(f"\r{text}\x1b[K" if interactive else text + "\n")
        sys.stderr.flush()

    try:
        with periodic(every, draw, "beam-sft-reason-progress"):
            yield
    finally:
        draw()
        if interactive:
            sys.stderr.write("\n")
