"""Statistics for the report: per-row counts, then one streaming aggregate over the rows checked.

Memory does not grow with rows: lengths go into an exact histogram (one counter per distinct
length), trained fractions into fixed bins, the rest into a few counters. Aggregates from worker
processes merge.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from beam_sft.verify.compare import content_beside_tool_calls
from beam_sft.verify.context import RowContext, is_trained_message

CHANNELS = ("analysis", "final", "tool_call", "other")
PERCENTILES = (50, 90, 99)
FRACTION_BINS = 20
STATS_VERSION = 2


@dataclass(frozen=True)
class RowStats:
    """What one row adds to the report."""

    source: str
    num_tokens: int
    num_trained: int
    trained_by_channel: dict[str, int] = field(default_factory=dict)
    notes: dict[str, int] = field(default_factory=dict)

    @property
    def trained_fraction(self) -> float:
        return self.num_trained / self.num_tokens if self.num_tokens else 0.0


def row_stats(ctx: RowContext) -> RowStats:
    """Count trained tokens by the channel of the message that holds them (from its header).

    Trained tokens of an assistant message count as ``analysis``, ``final`` or ``tool_call`` (a
    message addressed ``to=NAME``); trained tokens anywhere else count as ``other``.
    """
    shaped = len(ctx.mask) == len(ctx.ids)
    total = ctx.trained_total if shaped else 0
    by_channel = dict.fromkeys(CHANNELS, 0)
    inside = 0
    if shaped:
        for message, trained in zip(ctx.messages, ctx.message_trained, strict=True):
            if message.role != "assistant":
                continue
            part = message.part if message.part in CHANNELS else "other"
            by_channel[part] += trained
            inside += trained
    by_channel["other"] += total - inside
    notes = {}
    dropped = sum(1 for _, m in ctx.assistant_sources if is_trained_message(m) and content_beside_tool_calls(m))
    if dropped:
        notes["content_beside_tool_calls"] = dropped
    return RowStats(ctx.source, len(ctx.ids), total, by_channel, notes)


def percentile(counts: dict[int, int] | Iterable[int], p: float) -> int:
    """Nearest-rank percentile (an actual value, so the report stays integral and stable), from a
    histogram ``{value: count}`` or from the values themselves.

    >>> percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90)
    9
    >>> percentile({1: 9, 100: 1}, 90), percentile({1: 9, 100: 1}, 99)
    (1, 100)
    """
    histogram = counts if isinstance(counts, dict) else Counter(counts)
    total = sum(histogram.values())
    if not total:
        return 0
    rank = max(1, math.ceil(p / 100 * total))
    seen = 0
    for value in sorted(histogram):
        seen += histogram[value]
        if seen >= rank:
            return value
    return max(histogram)


def _fraction(part: int, whole: int) -> float:
    return round(part / whole, 6) if whole else 0.0


class Aggregator:
    """Adds rows up one at a time, keeping only histograms and counters (flat in rows)."""

    def __init__(self) -> None:
        self.lengths: Counter = Counter()  # length -> rows
        self.fractions = np.zeros(FRACTION_BINS, dtype=np.int64)
        self.rows = 0
        self.tokens = 0
        self.trained = 0
        self.channels: Counter = Counter()
        self.notes: Counter = Counter()
        self.sources: dict[str, dict] = {}

    def add(self, row: RowStats) -> None:
        self.rows += 1
        self.tokens += row.num_tokens
        self.trained += row.num_trained
        self.lengths[row.num_tokens] += 1
        self.fractions[min(FRACTION_BINS - 1, int(row.trained_fraction * FRACTION_BINS))] += 1
        channels = self.channels
        for name, count in row.trained_by_channel.items():
            channels[name] += count
        if row.notes:
            self.notes.update(row.notes)
        src = self.sources.setdefault(row.source, {"rows": 0, "tokens": 0, "trained_tokens": 0})
        src["rows"] += 1
        src["tokens"] += row.num_tokens
        src["trained_tokens"] += row.num_trained

    def merge(self, other: Aggregator) -> None:
        self.rows += other.rows
        self.tokens += other.tokens
        self.trained += other.trained
        self.lengths.update(other.lengths)
        self.fractions += other.fractions
        self.channels.update(other.channels)
        self.notes.update(other.notes)
        for name, entry in other.sources.items():
            mine = self.sources.setdefault(name, {"rows": 0, "tokens": 0, "trained_tokens": 0})
            for key, value in entry.items():
                mine[key] += value

    def result(self) -> dict:
        """Rows, tokens, trained fraction by channel and by source, and length percentiles."""
        sources = {name: {**self.sources[name], "trained_fraction": _fraction(
            self.sources[name]["trained_tokens"], self.sources[name]["tokens"])} for name in sorted(self.sources)}
        return {
            "rows_checked": self.rows,
            "tokens": self.tokens,
            "trained_tokens": self.trained,
            "trained_fraction": _fraction(self.trained, self.tokens),
            "trained_by_channel": {
                name: {"tokens": self.channels.get(name, 0),
                       "fraction_of_trained": _fraction(self.channels.get(name, 0), self.trained)}
                for name in CHANNELS
            },
            "by_source": sources,
            "lengths": {
                "min": min(self.lengths) if self.lengths else 0,
                **{f"p{p}": percentile(self.lengths, p) for p in PERCENTILES},
                "max": max(self.lengths) if self.lengths else 0,
                "mean": round(self.tokens / self.rows, 3) if self.rows else 0.0,
            },
            # Not violations: things the template itself leaves out, counted so they are seen.
            "notes": dict(sorted(self.notes.items())),
        }
