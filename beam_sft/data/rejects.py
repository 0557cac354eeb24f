"""rejects.jsonl and the per-source accounting: read = kept + rejected, rejected by reason code.

>>> s = SourceSummary("a.jsonl", "openai")
>>> s.count_kept(); s.count_rejected("missing_reasoning"); s.count_rejected("missing_reasoning")
>>> s.read, s.kept, dict(s.rejected), round(s.reject_rate, 3)
(3, 1, {'missing_reasoning': 2}, 0.667)
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol


class RejectRecord(Protocol):
    code: str

    def to_json(self) -> dict[str, Any]: ...


@dataclass
class SourceSummary:
    """Counts for one source. Every record read is counted once, as kept or as rejected."""

    source: str
    format: str
    detection: str = ""
    read: int = 0
    kept: int = 0
    rejected: Counter[str] = field(default_factory=Counter)

    def count_kept(self) -> None:
        self.read += 1
        self.kept += 1

    def count_rejected(self, code: str) -> None:
        self.read += 1
        self.rejected[code] += 1

    @property
    def n_rejected(self) -> int:
        return sum(self.rejected.values())

    @property
    def reject_rate(self) -> float:
        return self.n_rejected / self.read if self.read else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "format": self.format,
            "detection": self.detection,
            "read": self.read,
            "kept": self.kept,
            "rejected": self.n_rejected,
            "by_code": dict(sorted(self.rejected.items())),
        }


def format_summary_table(summaries: list[SourceSummary]) -> str:
    """A plain-text table: one line per source, then the total; reasons as ``code=count``.

    >>> s = SourceSummary("a.jsonl", "openai", read=3, kept=1, rejected=Counter(missing_reasoning=2))
    >>> print(format_summary_table([s]))
    source   format  read  kept  rejected  reasons
    a.jsonl  openai     3     1         2  missing_reasoning=2
    TOTAL               3     1         2  missing_reasoning=2
    """
    total = Counter[str]()
    for s in summaries:
        total.update(s.rejected)
    lines = [("source", "format", "read", "kept", "rejected", "reasons")]
    for s in summaries:
        lines.append((s.source, s.format, str(s.read), str(s.kept), str(s.n_rejected), _reasons(s.rejected)))
    lines.append(
        (
            "TOTAL",
            "",
            str(sum(s.read for s in summaries)),
            str(sum(s.kept for s in summaries)),
            str(sum(total.values())),
            _reasons(total),
        )
    )
    widths = [max(len(line[i]) for line in lines) for i in range(5)]
    out = []
    for line in lines:
        cells = [line[0].ljust(widths[0]), line[1].ljust(widths[1])]
        cells += [line[i].rjust(max(widths[i], len(lines[0][i]))) for i in (2, 3, 4)]
        out.append("  ".join(cells + [line[5]]).rstrip())
    return "\n".join(out)


def _reasons(counts: Counter[str]) -> str:
    return " ".join(f"{code}={n}" for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


class RejectsWriter:
    """Appends one JSON line per rejection (source, row, code, message, raw); a no-op without a path."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None
        self._fh: IO[str] | None = None
        self.count = 0

    def __enter__(self) -> RejectsWriter:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "w", encoding="utf-8")
        return self

    def write(self, rejection: RejectRecord) -> None:
        self.count += 1
        if self._fh is not None:
            self._fh.write(json.dumps(rejection.to_json(), ensure_ascii=False, default=repr) + "\n")

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
