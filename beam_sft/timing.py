"""Phase timing: the one clock prepare, reason, verify and the benchmarks measure seconds with.

``PhaseClock.phase(name)`` records the seconds since the last mark under ``name`` (rounded to the
millisecond, as the reports print them); ``elapsed()`` is the seconds since the clock started.
``timed()`` measures one block. A monotonic clock: a wall-clock step (NTP) cannot make a phase negative.

>>> ticks = iter([0.0, 1.25, 3.5, 4.0])
>>> clock = PhaseClock(now=lambda: next(ticks))
>>> clock.phase("read"), clock.phase("encode"), clock.elapsed()
(1.25, 2.25, 4.0)
>>> clock.phases
{'read': 1.25, 'encode': 2.25}
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator


class PhaseClock:
    """Seconds per phase, in the order they ended."""

    def __init__(self, now: Callable[[], float] = time.perf_counter) -> None:
        self._now = now
        self.started = self.last = now()
        self.phases: dict[str, float] = {}

    def phase(self, name: str) -> float:
        """End phase ``name`` now; returns its seconds."""
        now = self._now()
        self.phases[name] = round(now - self.last, 3)
        self.last = now
        return self.phases[name]

    def elapsed(self) -> float:
        return self._now() - self.started


@contextlib.contextmanager
def timed() -> Iterator[PhaseClock]:
    """``with timed() as t: ...`` then ``t.phases["total"]``: the block's seconds (also on an exception)."""
    clock = PhaseClock()
    try:
        yield clock
    finally:
        clock.phase("total")
