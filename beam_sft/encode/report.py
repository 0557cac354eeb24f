"""report.json: what ``prepare`` read, kept, rejected (by source and reason code), mixed and encoded.

Token statistics are computed by streaming over the saved dataset's small columns, with a length
histogram whose size depends on the longest row, not on the number of rows.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np

REPORT_VERSION = 1


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

    def add_dataset(self, dataset, chunk: int = 65_536) -> None:
        table = dataset.data.table if hasattr(dataset.data, "table") else dataset.data
        table = table.select(["source", "num_tokens", "num_trained"])
        for batch in table.to_batches(max_chunksize=chunk):
            self.add(np.asarray(batch.column(0).to_numpy(zero_copy_only=False)),
                     batch.column(1).to_numpy().astype(np.int64), batch.column(2).to_numpy().astype(np.int64))

    def percentile(self, q: float) -> int:
        """Nearest-rank percentile of the row lengths."""
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
        out = {
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
        return out


def sum_stats(lines: Iterable[str]) -> dict:
    """Sum the per-batch stats lines written by ``batch.process_batch``."""
    totals: dict[str, Counter] = defaultdict(Counter)
    rejected: dict[str, Counter] = defaultdict(Counter)
    for line in lines:
        record = json.loads(line)
        for key, per_source in record.items():
            if key == "rejected":
                for source, codes in per_source.items():
                    rejected[source].update(codes)
            else:
                totals[key].update(per_source)
    return {"totals": totals, "rejected": rejected}


def read_stats(work_dir: Path) -> dict:
    lines: list[str] = []
    for path in sorted(work_dir.glob("stats-*.jsonl")):
        lines.extend(line for line in path.read_text(encoding="utf-8").splitlines() if line)
    return sum_stats(lines)


def sources_section(infos, stats: dict) -> dict:
    """Per source: read = kept + rejected (by code, converter and encoder codes alike); ``selected``
    rows were encoded and kept, ``rows_out`` counts their copies (the mix). A row the mix left out
    is counted as kept but never encoded, so an encoding rejection cannot show for it."""
    totals, rejected = stats["totals"], stats["rejected"]
    out = {}
    for info in infos:
        name = info.label
        out[name] = {
            "path": info.path, "format": info.format, "detection": info.detection, "weight": info.weight,
            "read": totals["read"][name], "kept": totals["kept"][name],
            "rejected": dict(sorted(rejected[name].items())),
            "selected": totals["selected"][name], "rows_out": totals["rows_out"][name],
        }
    return out


def length_section(config, stats: dict) -> dict:
    totals, rejected = stats["totals"], stats["rejected"]
    return {
        "max_length": config.max_length,
        "policy": config.length_policy,
        "dropped_too_long": sum(codes.get("too_long", 0) for codes in rejected.values()),
        "trimmed_rows": sum(totals["trimmed"].values()),
        "trimmed_messages": sum(totals["trimmed_messages"].values()),
    }


def rejects_section(stats: dict) -> dict:
    by_code: Counter = Counter()
    for codes in stats["rejected"].values():
        by_code.update(codes)
    return {"total": sum(by_code.values()), "by_code": dict(sorted(by_code.items()))}


def write_report(directory: Path, report: dict) -> Path:
    path = directory / "report.json"
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
