"""report.json: the one reader, the one (atomic) writer, and the one builder ``prepare`` and
``merge-shards`` both use, so their reports cannot drift apart.

What it holds: per source, read = kept + rejected (by code, converter and encoder codes alike);
``selected`` rows were encoded and kept, ``rows_out`` counts their copies (the mix). A row the mix
left out is counted as kept but never encoded. Token statistics stream over the saved dataset's
small columns, with a length histogram whose size depends on the longest row, not on the rows.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from beam_sft.errors import PreparedError
from beam_sft.prepared.layout import REPORT_FILE

REPORT_VERSION = 2  # 2: "files" (sizes and digests), encoder.name always a string

# Per-source counters of one run (summed over batches, processes and shards).
SOURCE_COUNTERS = ("read", "kept", "selected", "rows_out")
# Run-wide counters.
TOTAL_COUNTERS = ("trimmed_rows", "trimmed_messages", "fallback_rows")


def read_report(directory: str | Path) -> dict | None:
    """DIR/report.json as a dict; None when it is absent or not a JSON object."""
    path = Path(directory) / REPORT_FILE
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def require_report(directory: str | Path) -> dict:
    """DIR/report.json, or PreparedError naming it."""
    report = read_report(directory)
    if report is None:
        raise PreparedError(Path(directory) / REPORT_FILE, "missing or not a JSON object: not a prepared folder")
    return report


def dump_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def write_report(directory: str | Path, report: Mapping) -> Path:
    """Write DIR/report.json atomically (a reader sees the old file or the new one, never half)."""
    path = Path(directory) / REPORT_FILE
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(dump_json(report), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:  # read-only, full: one line naming the folder, and no temporary file left
        from beam_sft.prepared.oserrors import unwritable

        with contextlib.suppress(OSError):
            tmp.unlink()
        error = unwritable(Path(directory), exc)
        if error is exc:
            raise
        raise error from exc
    return path


def update_report(directory: str | Path, key: str, section: Any) -> Path:
    """Set one top-level section of DIR/report.json, keeping the others (atomically)."""
    report = read_report(directory) or {}
    report[key] = section
    return write_report(directory, report)


@dataclass(frozen=True)
class SourceInfo:
    """What reading decided about a source, for the report."""

    label: str
    path: str
    format: str
    detection: str
    weight: float
    skipped: tuple[dict, ...] = ()  # files of a directory source that are not data files: {path, reason}
    unreadable: tuple[dict, ...] = ()  # a syntax error hid the rest of a file: {file, byte, about_more_records}


class Counts:
    """Rows counted by source and reason code; built from the encode step's status column."""

    def __init__(self) -> None:
        self.sources: dict[str, Counter] = defaultdict(Counter)
        self.rejected: dict[str, Counter] = defaultdict(Counter)
        self.formats: dict[str, Counter] = defaultdict(Counter)  # rows by the format that read them
        self.unreadable: dict[str, list[dict]] = defaultdict(list)  # from other shards' reports (merge)
        self.totals: Counter = Counter()

    def merge(self, other: Counts) -> Counts:
        for name, counter in other.sources.items():
            self.sources[name].update(counter)
        for name, codes in other.rejected.items():
            self.rejected[name].update(codes)
        for name, formats in other.formats.items():
            self.formats[name].update(formats)
        for name, rests in other.unreadable.items():
            self.unreadable[name].extend(rests)
        self.totals.update(other.totals)
        return self

    @classmethod
    def from_report(cls, report: Mapping) -> Counts:
        """The counts a finished report holds (to sum shards)."""
        counts = cls()
        for name, entry in report["sources"].items():
            counts.sources[name].update({k: entry[k] for k in SOURCE_COUNTERS})
            counts.rejected[name].update(entry["rejected"])
            counts.formats[name].update(entry.get("formats") or {})
            counts.unreadable[name].extend(entry.get("unreadable") or [])
        counts.totals["trimmed_rows"] += report["length_policy"]["trimmed_rows"]
        counts.totals["trimmed_messages"] += report["length_policy"]["trimmed_messages"]
        counts.totals["fallback_rows"] += report["encoder"].get("fallback_rows", 0)
        return counts

    def kept(self) -> int:
        return sum(c["rows_out"] for c in self.sources.values())


class TokenStats:
    """Streaming token statistics: totals per source and an exact length histogram."""

    def __init__(self):
        self.hist = np.zeros(1, dtype=np.int64)
        self.by_source: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # rows, tokens, trained

    def add(self, sources: np.ndarray, lengths: np.ndarray, trained: np.ndarray) -> None:
        if not len(lengths):
            return
        counts = np.bincount(lengths, minlength=len(self.hist))
        if len(counts) > len(self.hist):
            self.hist = np.concatenate([self.hist, np.zeros(len(counts) - len(self.hist), dtype=np.int64)])
        self.hist += counts
        names, inverse = np.unique(sources, return_inverse=True)
        rows = np.bincount(inverse, minlength=len(names))
        tokens = np.bincount(inverse, weights=lengths, minlength=len(names))
        trains = np.bincount(inverse, weights=trained, minlength=len(names))
        for i, name in enumerate(names):
            entry = self.by_source[str(name)]
            entry[0] += int(rows[i])
            entry[1] += int(tokens[i])
            entry[2] += int(trains[i])

    def add_batch(self, batch) -> None:
        """The rows of an Arrow record batch or table with the ``source``, ``num_tokens`` and
        ``num_trained`` columns."""
        self.add(np.asarray(batch.column("source").to_numpy(zero_copy_only=False)),
                 batch.column("num_tokens").to_numpy().astype(np.int64),
                 batch.column("num_trained").to_numpy().astype(np.int64))

    def percentile(self, q: float) -> int:
        """Nearest-rank percentile of the row lengths.

        >>> stats = TokenStats()
        >>> stats.add(np.array(["a"] * 4), np.array([1, 2, 3, 10]), np.array([1, 1, 1, 1]))
        >>> stats.percentile(50), stats.percentile(99)
        (2, 10)
        """
        total = int(self.hist.sum())
        if not total:
            return 0
        rank = max(1, int(np.ceil(q / 100 * total)))
        return int(np.searchsorted(np.cumsum(self.hist), rank))

    def to_json(self) -> dict:
        rows = int(self.hist.sum())
        tokens = sum(e[1] for e in self.by_source.values())
        trained = sum(e[2] for e in self.by_source.values())
        nonzero = np.flatnonzero(self.hist)
        return {
            "rows": rows,
            "total": tokens,
            "trained": trained,
            "trained_fraction": round(trained / tokens, 4) if tokens else 0.0,
            "length": {
                "min": int(nonzero[0]) if len(nonzero) else 0,
                "p50": self.percentile(50), "p90": self.percentile(90), "p99": self.percentile(99),
                "max": int(nonzero[-1]) if len(nonzero) else 0,
                "mean": round(tokens / rows, 1) if rows else 0.0,
            },
            "by_source": {name: {"rows": e[0], "tokens": e[1], "trained": e[2]}
                          for name, e in sorted(self.by_source.items())},
        }


def sources_section(infos: Iterable[SourceInfo], counts: Counts) -> dict:
    out = {}
    for info in infos:
        name = info.label
        entry = counts.sources[name]
        out[name] = {
            "path": info.path, "format": info.format, "detection": info.detection, "weight": info.weight,
            "read": entry["read"], "kept": entry["kept"],
            "rejected": dict(sorted(counts.rejected[name].items())),
            "selected": entry["selected"], "rows_out": entry["rows_out"], "empty": entry["read"] == 0,
            "formats": dict(sorted(counts.formats[name].items())),
        }
        unreadable = [*info.unreadable, *counts.unreadable[name]]
        if unreadable:
            out[name]["unreadable"] = unreadable
        if info.skipped:
            out[name]["skipped"] = list(info.skipped)
    return out


def infos_from_report(report: Mapping) -> list[SourceInfo]:
    # unreadable rests are not copied here: Counts.from_report sums them over every shard
    return [SourceInfo(name, e["path"], e["format"], e["detection"], e["weight"], skipped=tuple(e.get("skipped", ())))
            for name, e in report["sources"].items()]


def rejects_section(counts: Counts) -> dict:
    by_code: Counter = Counter()
    for codes in counts.rejected.values():
        by_code.update(codes)
    return {"total": sum(by_code.values()), "by_code": dict(sorted(by_code.items()))}


def encoder_names(sections: Iterable[Mapping]) -> str:
    """One encoder name for several runs' encoder sections: the shared name, or ``mixed``.

    >>> encoder_names([{"name": "fast"}, {"name": "fast"}]), encoder_names([{"name": "fast"}, {"name": "template"}])
    ('fast', 'mixed')
    """
    names = {s["name"] for s in sections}
    return names.pop() if len(names) == 1 else "mixed"


def build_report(*, fingerprint: str, fingerprint_base: str, fingerprint_parts: Mapping, shard: Mapping,
                 config: Mapping, encoder: Mapping, infos: list[SourceInfo], counts: Counts, seed: int,
                 max_length: int | None, length_policy: str, tokens: TokenStats, timing: Mapping,
                 files: Mapping) -> dict:
    """The report of a prepared folder (``prepare`` and ``merge-shards`` alike)."""
    from beam_sft.data.mix import mix_report

    sources = sources_section(infos, counts)
    if not isinstance(encoder.get("name"), str):
        raise ValueError(f"encoder.name must be a string, got {encoder.get('name')!r}")
    return {
        "version": REPORT_VERSION,
        "fingerprint": fingerprint,
        "fingerprint_base": fingerprint_base,
        "fingerprint_parts": dict(fingerprint_parts),
        "shard": dict(shard),
        "config": dict(config),
        "encoder": {**encoder, "fallback_rows": counts.totals["fallback_rows"]},
        "sources": sources,
        "mix": mix_report({n: s["weight"] for n, s in sources.items()}, {n: s["read"] for n, s in sources.items()},
                          {n: s["rows_out"] for n, s in sources.items()}, seed),
        "length_policy": {
            "max_length": max_length, "policy": length_policy,
            "dropped_too_long": sum(codes.get("too_long", 0) for codes in counts.rejected.values()),
            "trimmed_rows": counts.totals["trimmed_rows"], "trimmed_messages": counts.totals["trimmed_messages"],
        },
        "rejects": rejects_section(counts),
        "tokens": tokens.to_json(),
        "timing": dict(timing),
        "files": dict(files),
    }
