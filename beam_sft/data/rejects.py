"""rejects.jsonl and the per-source accounting: read = kept + rejected, rejected by reason code.

>>> s = SourceSummary("a.jsonl", "openai")
>>> s.count_kept(); s.count_rejected("missing_reasoning"); s.count_rejected("missing_reasoning")
>>> s.read, s.kept, dict(s.rejected), round(s.reject_rate, 3)
(3, 1, {'missing_reasoning': 2}, 0.667)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from beam_sft.dataset_folder.rejects import placed, reject_json
from beam_sft.visible import visible


class RejectRecord(Protocol):
    code: str

    def to_json(self) -> dict[str, Any]: ...


@dataclass
class SourceSummary:
    """Counts for one source. Every record read is counted once, as kept or as rejected.

    ``formats`` counts rows by the format that read them (``--format auto`` decides per row);
    ``notes`` counts what kept rows carry worth a word (text dropped by an option, a low
    reasoning effort); ``unreadable`` is ``(byte, about how many more records)`` when a syntax
    error hid the rest of the file (its one rejection then stands for all of them).
    """

    source: str
    format: str
    detection: str = ""
    read: int = 0
    kept: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    formats: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)
    causes: Counter[str] = field(default_factory=Counter)  # "code: why" for rejections worth explaining
    unreadable: tuple[int | None, int | None] | None = None

    def count_kept(self, format: str | None = None, notes: Mapping[str, int] | None = None) -> None:
        self.read += 1
        self.kept += 1
        if format:
            self.formats[format] += 1
        if notes:
            self.notes.update(notes)

    def count_rejected(self, code: str, format: str | None = None, cause: str | None = None) -> None:
        self.read += 1
        self.rejected[code] += 1
        if format:
            self.formats[format] += 1
        if cause:
            self.causes[f"{code} {cause}"] += 1

    @property
    def n_rejected(self) -> int:
        return sum(self.rejected.values())

    @property
    def empty(self) -> bool:
        return self.read == 0

    @property
    def reject_rate(self) -> float:
        """Rejected over read; an unreadable rest counts as the records it likely held."""
        hidden = (self.unreadable[1] or 1) - 1 if self.unreadable else 0
        total = self.read + hidden
        return (self.n_rejected + hidden) / total if total else 0.0

    @property
    def format_label(self) -> str:
        """The format column: the format, or each format's row count when rows differ."""
        if len(self.formats) > 1:
            return " ".join(f"{f}={n}" for f, n in sorted(self.formats.items(), key=lambda kv: (-kv[1], kv[0])))
        return next(iter(self.formats), self.format)

    def remarks(self) -> list[str]:
        """Lines worth reading under the table: empty source, unreadable rest, notes (the source's name,
        a file's, shown ``visible``: it is printed)."""
        out = []
        source = visible(self.source, newlines=False)
        if self.empty:
            out.append(f"{source}: the source is empty (no records)")
        if self.unreadable:
            byte, more = self.unreadable
            about = f"about {more} more records" if more is not None else "record count unknown"
            out.append(f"{source}: unreadable from byte {byte} ({about}), counted as one unreadable_rest")
        if self.notes:
            out.append(f"{source}: notes " + _reasons(self.notes))
        out.extend(visible(f"{source}: {n} rejected {cause}", newlines=False) for cause, n in sorted(self.causes.items()))
        return out

    def to_json(self) -> dict[str, Any]:
        out = {
            "source": self.source,
            "format": self.format,
            "detection": self.detection,
            "read": self.read,
            "kept": self.kept,
            "rejected": self.n_rejected,
            "by_code": dict(sorted(self.rejected.items())),
            "formats": dict(sorted(self.formats.items())),
        }
        if self.notes:
            out["notes"] = dict(sorted(self.notes.items()))
        if self.causes:
            out["causes"] = dict(sorted(self.causes.items()))
        if self.unreadable:
            out["unreadable"] = {"byte": self.unreadable[0], "about_more_records": self.unreadable[1]}
        if self.empty:
            out["empty"] = True
        return out


def format_summary_table(summaries: list[SourceSummary]) -> str:
    """A plain-text table: one line per source, then the total; reasons as ``code=count``. Every cell is
    shown ``visible`` on one line: a source is named by its file, and a file's name is anyone's.

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
        lines.append((visible(s.source, newlines=False), visible(s.format_label, newlines=False), str(s.read),
                      str(s.kept), str(s.n_rejected), visible(_reasons(s.rejected), newlines=False)))
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
    out.extend(remark for s in summaries for remark in s.remarks())
    return "\n".join(out)


def sources_table(sources: Mapping[str, Mapping[str, Any]] | Iterable[Mapping[str, Any]]) -> str:
    """The same table from report data: ``report.json``'s ``sources`` mapping (name -> {format,
    read, kept, rejected: {code: n}}) or a list of ``SourceSummary.to_json()`` records. For
    ``prepare`` to print when it keeps nothing.

    >>> print(sources_table({"a.jsonl": {"format": "openai", "read": 2, "kept": 0,
    ...                                  "rejected": {"missing_reasoning": 2}}}))
    source   format  read  kept  rejected  reasons
    a.jsonl  openai     2     0         2  missing_reasoning=2
    TOTAL               2     0         2  missing_reasoning=2
    """
    items = list(sources.items()) if isinstance(sources, Mapping) else [(r.get("source"), r) for r in sources]
    summaries = []
    for name, data in items:
        codes = data.get("by_code", data.get("rejected"))
        summary = SourceSummary(str(name), str(data.get("format", "")), str(data.get("detection", "")),
                                int(data.get("read", 0)), int(data.get("kept", 0)),
                                Counter(codes if isinstance(codes, Mapping) else {}),
                                Counter(data.get("formats") or {}), Counter(data.get("notes") or {}))
        rests = data.get("unreadable")
        rests = [rests] if isinstance(rests, Mapping) else list(rests or ())  # prepare's report: one per file
        if rests:
            summary.unreadable = (rests[0].get("byte"), rests[0].get("about_more_records"))
        summaries.append(summary)
    return format_summary_table(summaries)


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

    def write(self, rejection: RejectRecord, *, source: str | None = None, index: int | None = None) -> None:
        """One line. ``source``: the label of the source the rejection's own ``source`` (its file) belongs
        to, with ``index`` the record's number in that source: the line is ``placed`` (it names the file
        and the index where they differ from the source and the row), as prepare's lines are."""
        self.count += 1
        if self._fh is not None:
            record = rejection.to_json()
            if source is not None:
                record = placed(record, source, record.get("source"), index)
            self._fh.write(reject_json(record) + "\n")


    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
