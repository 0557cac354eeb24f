"""Statistics for the report: per-row counts, then one aggregate over the rows checked."""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from beam_sft.verify.compare import content_beside_tool_calls
from beam_sft.verify.context import RowContext, is_trained_message

CHANNELS = ("analysis", "final", "tool_call", "other")
PERCENTILES = (50, 90, 99)
STATS_VERSION = 1


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
    mask = ctx.mask if len(ctx.mask) == len(ctx.ids) else []
    by_channel = dict.fromkeys(CHANNELS, 0)
    inside = 0
    for message in ctx.messages:
        if message.role != "assistant":
            continue
        trained = sum(1 for m in mask[message.start:message.end + 1] if m)
        part = message.part if message.part in CHANNELS else "other"
        by_channel[part] += trained
        inside += trained
    total = sum(1 for m in mask if m)
    by_channel["other"] += total - inside
    notes = {}
    dropped = sum(1 for _, m in ctx.assistant_sources if is_trained_message(m) and content_beside_tool_calls(m))
    if dropped:
        notes["content_beside_tool_calls"] = dropped
    return RowStats(ctx.source, len(ctx.ids), total, by_channel, notes)


def percentile(values: Sequence[int], p: float) -> int:
    """Nearest-rank percentile (an actual value, so the report stays integral and stable).

    >>> percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90)
    9
    """
    if not values:
        return 0
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def _fraction(part: int, whole: int) -> float:
    return round(part / whole, 6) if whole else 0.0


class Aggregator:
    """Adds rows up one at a time, keeping only what the report needs (a few numbers per row)."""

    def __init__(self) -> None:
        self.lengths = array("q")
        self.trained = array("q")
        self.channels: Counter = Counter()
        self.notes: Counter = Counter()
        self.sources: dict[str, dict] = {}

    def add(self, row: RowStats) -> None:
        self.lengths.append(row.num_tokens)
        self.trained.append(row.num_trained)
        self.channels.update(row.trained_by_channel)
        self.notes.update(row.notes)
        src = self.sources.setdefault(row.source, {"rows": 0, "tokens": 0, "trained_tokens": 0})
        src["rows"] += 1
        src["tokens"] += row.num_tokens
        src["trained_tokens"] += row.num_trained

    @property
    def trained_fractions(self) -> list[float]:
        return [t / n if n else 0.0 for t, n in zip(self.trained, self.lengths, strict=True)]

    def result(self) -> dict:
        """Rows, tokens, trained fraction by channel and by source, and length percentiles."""
        lengths = sorted(self.lengths)
        tokens = sum(lengths)
        trained = sum(self.trained)
        sources = {name: {**self.sources[name], "trained_fraction": _fraction(
            self.sources[name]["trained_tokens"], self.sources[name]["tokens"])} for name in sorted(self.sources)}
        return {
            "rows_checked": len(lengths),
            "tokens": tokens,
            "trained_tokens": trained,
            "trained_fraction": _fraction(trained, tokens),
            "trained_by_channel": {
                name: {"tokens": self.channels.get(name, 0),
                       "fraction_of_trained": _fraction(self.channels.get(name, 0), trained)}
                for name in CHANNELS
            },
            "by_source": sources,
            "lengths": {
                "min": lengths[0] if lengths else 0,
                **{f"p{p}": percentile(lengths, p) for p in PERCENTILES},
                "max": lengths[-1] if lengths else 0,
                "mean": round(tokens / len(lengths), 3) if lengths else 0.0,
            },
            # Not violations: things the template itself leaves out, counted so they are seen.
            "notes": dict(sorted(self.notes.items())),
        }


def rejections(report: dict, rejects: Iterable[dict]) -> dict:
    """Rejections by code: counted from rejects.jsonl, and by source from report.json's "sources".

    >>> rejections({"sources": {"a": {"rejected": {"empty": 2}}}}, [{"code": "empty"}, {"code": "empty"}])
    {'total': 2, 'by_code': {'empty': 2}, 'by_source': {'a': {'empty': 2}}, 'consistent': True}
    """
    by_code = Counter(str(r.get("code", "unknown")) for r in rejects)
    by_source: dict[str, dict[str, int]] = {}
    for name, entry in sorted((report.get("sources") or {}).items()):
        rejected = entry.get("rejected") if isinstance(entry, dict) else None
        if isinstance(rejected, dict):
            by_source[name] = {code: int(n) for code, n in sorted(rejected.items())}
    from_report = Counter()
    for counts in by_source.values():
        from_report.update(counts)
    if not by_code and from_report:
        by_code = from_report  # no rejects.jsonl: the report's totals are all there is
    return {
        "total": sum(by_code.values()),
        "by_code": dict(sorted(by_code.items())),
        "by_source": by_source,
        "consistent": not by_source or from_report == by_code,
    }
