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
import math
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from beam_sft.arrow_arrays import numbers
from beam_sft.dataset_folder.layout import REPORT_FILE
from beam_sft.errors import PreparedError

REPORT_VERSION = 3  # 2: "files" (sizes and digests), encoder.name always a string; 3: "integrity" (the seal)
SEAL_KEY = "integrity"  # the report's own digest, over every other key (``seal``)

# Per-source counters of one run (summed over batches, processes and shards).
SOURCE_COUNTERS = ("read", "kept", "selected", "rows_out")


def mix_report(weights: Mapping[str, float], read: Mapping[str, int], out: Mapping[str, int], seed: int) -> dict:
    """The report's ``mix`` section: planned rows (``weight * rows read``) and real rows (after
    rejections), each with its share of the total.

    >>> mix_report({"a": 1.0, "b": 2.0}, {"a": 10, "b": 5}, {"a": 8, "b": 10}, 0)["planned"]["b"]
    {'weight': 2.0, 'rows': 10.0, 'share': 0.5}
    >>> mix_report({"a": 1.0, "b": 2.0}, {"a": 10, "b": 5}, {"a": 8, "b": 10}, 0)["real"]["a"]
    {'rows': 8, 'share': 0.4444}
    """
    planned = {name: weights[name] * read.get(name, 0) for name in weights}
    total_planned = sum(planned.values())
    total_out = sum(out.get(name, 0) for name in weights)
    return {
        "seed": seed,
        "planned": {
            name: {"weight": weights[name], "rows": planned[name],
                   "share": round(planned[name] / total_planned, 4) if total_planned else 0.0}
            for name in weights
        },
        "real": {
            name: {"rows": out.get(name, 0),
                   "share": round(out.get(name, 0) / total_out, 4) if total_out else 0.0}
            for name in weights
        },
    }


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


def report_digest(report: Mapping) -> str:
    """SHA-256 of the report's every key but the seal, in one canonical JSON form (sorted keys, no
    spaces): what ``seal`` records and ``seal_problem`` recomputes.

    >>> report_digest({"a": 1, "b": [2]}) == report_digest({"b": [2], "a": 1, SEAL_KEY: {"report": "x"}})
    True
    """
    import hashlib

    body = {k: v for k, v in report.items() if k != SEAL_KEY}
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# Keys written after a verification ran (its own sections, prepare's verify timing and kept-aside
# mark) or that are the seal: left out of ``content_digest``.
AFTER_VERIFY = (SEAL_KEY, "verify", "verify_sample", "timing", "kept_aside")


def content_digest(report: Mapping) -> str:
    """SHA-256 of what a verification checked the folder against: every key but ``AFTER_VERIFY``.
    Verify records it (``verify.verified_report``); train refuses a report whose content changed
    since, even when whoever changed it sealed it again."""
    return report_digest({k: v for k, v in report.items() if k not in AFTER_VERIFY})


def seal(report: Mapping) -> dict:
    """The report with its seal: ``integrity: {"algorithm": "sha256", "report": report_digest}``.

    The seal makes report.json's own edits visible: a count lowered by hand, a key deleted, a
    verification result turned to true. It is no signature (whoever edits the file can compute it
    again), which is why verify also checks every count against the rows and rejects it holds."""
    body = json.loads(dump_json({k: v for k, v in report.items() if k != SEAL_KEY}))  # the form read back
    return {**body, SEAL_KEY: {"algorithm": "sha256", "report": report_digest(body)}}


def seal_problem(report: Mapping) -> str | None:
    """Why the report's seal does not hold (None when it does).

    >>> seal_problem(seal({"a": 1})) is None, seal_problem({**seal({"a": 1}), "a": 2})
    (True, 'report.json was changed after beam-sft wrote it (its integrity digest differs)')
    """
    entry = report.get(SEAL_KEY)
    if not isinstance(entry, dict) or not isinstance(entry.get("report"), str):
        return (f"report.json has no {SEAL_KEY} digest (the key was removed, or an older beam-sft wrote it: "
                "prepare again)")
    if entry.get("algorithm") != "sha256":
        return f"report.json's {SEAL_KEY}.algorithm is {entry.get('algorithm')!r}, not 'sha256'"
    if entry["report"] != report_digest(report):
        return f"report.json was changed after beam-sft wrote it (its {SEAL_KEY} digest differs)"
    return None


def write_report(directory: str | Path, report: Mapping) -> Path:
    """Write DIR/report.json, sealed (``seal``), atomically (a reader sees the old file or the new
    one, never half)."""
    path = Path(directory) / REPORT_FILE
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(dump_json(seal(report)), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:  # read-only, full: one line naming the folder, and no temporary file left
        from beam_sft.dataset_folder.oserrors import unwritable

        with contextlib.suppress(OSError):
            tmp.unlink()
        error = unwritable(Path(directory), exc)
        if error is exc:
            raise
        raise error from exc
    return path


def update_report(directory: str | Path, key: str, section: Any) -> Path:
    """Set one top-level section of DIR/report.json, keeping the others (atomically). The report's
    seal must hold first: sealing an edited report again would bless the edit."""
    report = require_report(directory)
    problem = seal_problem(report)
    if problem is not None:
        raise PreparedError(Path(directory) / REPORT_FILE, problem)
    report[key] = section
    return write_report(directory, report)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def count_problems(report: Mapping) -> list[str]:
    """Every way the report's counts disagree with each other (each a line naming its key): per
    source ``read == kept + rejected``, ``formats`` summing to ``read``, ``selected`` and
    ``rows_out`` within what the weight allows, ``empty``; the run's ``rejects`` totals, the length
    policy's ``dropped_too_long``, the ``mix`` section (recomputed from the sources), ``tokens.rows``.
    Counts against the folder's rows and rejects are verify's (``beam_sft.verify.counts``); this
    needs the report alone, so ``merge-shards`` and ``train`` check it too.

    >>> count_problems({"version": REPORT_VERSION, "sources": {}})
    ['sources: no source is listed']
    """
    out: list[str] = []
    if report.get("version") != REPORT_VERSION:
        out.append(f"version is {report.get('version')!r}, this beam-sft writes {REPORT_VERSION}: prepare again")
    sources = report.get("sources")
    if not isinstance(sources, dict) or not sources:
        return out + ["sources: no source is listed"]
    by_code: Counter = Counter()
    rows_out = 0
    weights, read, outs = {}, {}, {}
    for name, entry in sources.items():
        where = f"sources[{name!r}]"
        if not isinstance(entry, dict):
            out.append(f"{where} is not an object")
            continue
        bad = [k for k in SOURCE_COUNTERS if not _count(entry.get(k))]
        rejected = entry.get("rejected")
        if not isinstance(rejected, dict) or not all(_count(n) for n in rejected.values()):
            bad.append("rejected")
        weight = entry.get("weight")
        if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not weight >= 0 \
                or weight == float("inf"):
            bad.append("weight")
        if bad:
            out.append(f"{where}: {', '.join(bad)} missing or not a count")
            continue
        n_rejected = sum(rejected.values())
        if entry["read"] != entry["kept"] + n_rejected:
            out.append(f"{where}: read {entry['read']} != kept {entry['kept']} + rejected {n_rejected}")
        formats = entry.get("formats")
        if not isinstance(formats, dict) or sum(v for v in formats.values() if _count(v)) != entry["read"] \
                or not all(_count(v) for v in formats.values()):
            out.append(f"{where}: formats {formats!r} do not sum to read {entry['read']}")
        if entry.get("empty") is not (entry["read"] == 0):
            out.append(f"{where}: empty is {entry.get('empty')!r} with read {entry['read']}")
        low, high = math.floor(weight), math.ceil(weight)
        if entry["selected"] > entry["kept"] or (low >= 1 and entry["selected"] != entry["kept"]):
            out.append(f"{where}: selected {entry['selected']} with kept {entry['kept']} at weight {weight}")
        if not max(low, 1) * entry["selected"] <= entry["rows_out"] <= high * entry["selected"]:
            out.append(f"{where}: rows_out {entry['rows_out']} is not what weight {weight} gives "
                       f"{entry['selected']} selected rows")
        by_code.update(rejected)
        rows_out += entry["rows_out"]
        weights[name], read[name], outs[name] = weight, entry["read"], entry["rows_out"]
    rejects = report.get("rejects")
    if not isinstance(rejects, dict) or rejects.get("by_code") != dict(sorted(by_code.items())) \
            or rejects.get("total") != sum(by_code.values()):
        out.append(f"rejects: {rejects!r} is not the sum of the sources' rejected counts "
                   f"(total {sum(by_code.values())}, by_code {dict(sorted(by_code.items()))})")
    policy = report.get("length_policy")
    if not isinstance(policy, dict) or policy.get("dropped_too_long") != by_code.get("too_long", 0) \
            or not all(_count(policy.get(k)) for k in ("trimmed_rows", "trimmed_messages")):
        out.append(f"length_policy: dropped_too_long must be the sources' too_long rejections "
                   f"({by_code.get('too_long', 0)}), trimmed_rows and trimmed_messages counts; got {policy!r}")
    mix = report.get("mix")
    if len(weights) == len(sources):
        seed = mix.get("seed") if isinstance(mix, dict) else None
        if not isinstance(mix, dict) or mix != mix_report(weights, read, outs, seed):
            out.append("mix: planned and real rows are not what the sources' weights, read and rows_out give")
    tokens = report.get("tokens")
    if not isinstance(tokens, dict) or tokens.get("rows") != rows_out:
        out.append(f"tokens.rows is {tokens.get('rows') if isinstance(tokens, dict) else None!r}, "
                   f"the sources' rows_out sum to {rows_out}")
    encoder = report.get("encoder")
    if not isinstance(encoder, dict) or not _count(encoder.get("fallback_rows")):
        out.append("encoder.fallback_rows missing or not a count")
    return out + _shard_problems(report, mix)


def _shard_problems(report: Mapping, mix: Any) -> list[str]:
    """The shard (or merge) and the mix seed against the options the fingerprint was taken over."""
    out = []
    parts = report.get("fingerprint_parts")
    options = parts.get("options") if isinstance(parts, dict) else None
    if not isinstance(options, dict):
        return ["fingerprint_parts.options missing"]
    shard = report.get("shard")
    if not isinstance(shard, dict) or not _count(shard.get("count")) or shard["count"] < 1 \
            or shard["count"] != options.get("num_shards"):
        out.append(f"shard {shard!r} does not match the run's num_shards {options.get('num_shards')!r}")
    elif "merged" in shard:
        if shard.get("merged") != shard["count"]:
            out.append(f"shard: merged {shard.get('merged')!r} of {shard['count']} shards")
    elif not _count(shard.get("index")) or shard["index"] >= shard["count"] or shard["index"] != parts.get("shard_index"):
        out.append(f"shard.index {shard.get('index')!r} is not the run's shard_index {parts.get('shard_index')!r} "
                   f"of {shard['count']}")
    if isinstance(mix, dict) and mix.get("seed") != options.get("seed"):
        out.append(f"mix.seed {mix.get('seed')!r} is not the run's seed {options.get('seed')!r}")
    return out


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
        self.reasoning: Counter = Counter()  # trained turns of kept rows by reasoning source
        self.teacher_refused: Counter = Counter()  # teacher codes: turns of kept rows + rows dropped with one
        self.judge_verdicts: Counter = Counter()  # --judge: verdicts on the turns of kept rows

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
        self.reasoning.update(other.reasoning)
        self.teacher_refused.update(other.teacher_refused)
        self.judge_verdicts.update(other.judge_verdicts)
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
        counts.totals["native_rows"] += report["encoder"].get("native_rows", 0)
        section = report.get("reasoning") or {}
        counts.reasoning.update(section.get("turns") or {})
        counts.teacher_refused.update(section.get("teacher_refused") or {})
        counts.judge_verdicts.update(section.get("judge_verdicts") or {})
        return counts

    def reasoning_section(self) -> dict:
        """Trained turns by where their reasoning came from (``data``, ``inline_tags``,
        ``text_before_calls``, ``teacher``; ``unrecorded``: rows converted without provenance) and
        teacher refusals by code (turns left in kept rows, plus rows the policy dropped for one);
        with ``--judge``, ``judge_verdicts`` on the turns of kept rows (absent when nothing was judged)."""
        section = {"turns": dict(sorted(self.reasoning.items())),
                   "teacher_refused": dict(sorted(self.teacher_refused.items()))}
        if self.judge_verdicts:
            section["judge_verdicts"] = dict(sorted(self.judge_verdicts.items()))
        return section

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
        # (arrow_arrays.numbers: to_numpy imports pandas to look at the type first)
        self.add(np.array(batch.column("source").to_pylist(), dtype=object),
                 numbers(batch.column("num_tokens")).astype(np.int64),
                 numbers(batch.column("num_trained")).astype(np.int64))

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
        "encoder": {**encoder, "fallback_rows": counts.totals["fallback_rows"],
                    "native_rows": counts.totals["native_rows"]},
        "sources": sources,
        "mix": mix_report({n: s["weight"] for n, s in sources.items()}, {n: s["read"] for n, s in sources.items()},
                          {n: s["rows_out"] for n, s in sources.items()}, seed),
        "length_policy": {
            "max_length": max_length, "policy": length_policy,
            "dropped_too_long": sum(codes.get("too_long", 0) for codes in counts.rejected.values()),
            "trimmed_rows": counts.totals["trimmed_rows"], "trimmed_messages": counts.totals["trimmed_messages"],
        },
        "rejects": rejects_section(counts),
        "reasoning": counts.reasoning_section(),
        "tokens": tokens.to_json(),
        "timing": dict(timing),
        "files": dict(files),
    }
