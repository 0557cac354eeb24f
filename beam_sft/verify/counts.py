"""Folder rules: the dataset's rows and rejects.jsonl against the counts report.json gives for them.

- ``row_count``: per source, the dataset holds the rows report.json says it kept (``rows_out``), every
  record it read is kept or rejected once and nothing else is (``FolderCounts._accounting``),
  in all the rows ``tokens.rows`` says; a row kept with fewer copies than the mix planned.
- ``duplicate_row``: no (source, row_index) appears more often than the mix planned for it
  (``copies(weight, seed, source, row)``: floor(weight), plus one for a seeded share of rows).
- ``rejects_count``: rejects.jsonl has exactly the rejections report.json counts, per source and
  code, and every line of it is readable.
- ``report_count``: report.json's counts agree with each other (``dataset_folder.report_json.count_problems``:
  read = kept + rejected per source, the totals, the mix, ...) and its token statistics are the
  rows' (every figure of ``tokens``, recomputed from the ``num_tokens``/``num_trained`` columns);
  the values other commands read are of their type (the mix seed, the ``reasoning`` counts).

These run over every row even with ``--sample`` (they read only the small ``source`` and
``row_index`` columns). Memory: the row indices of each source, 16 bytes a row; nothing else
grows with rows.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np

from beam_sft.arrow_arrays import numbers
from beam_sft.verify.context import Violation

MAX_KEY_VIOLATIONS = 1000  # per rule; the count of all of them is in the message of the last one


def planned_copies(weight: float, seed: int, source: str, rows: np.ndarray) -> np.ndarray:
    """How many copies the mix plans for each row index of ``source`` (the mix's own rule)."""
    from beam_sft.data.mix import copies

    if float(weight).is_integer():
        return np.full(len(rows), int(weight), dtype=np.int64)
    return np.fromiter((copies(weight, seed=seed, source=source, row=int(r)) for r in rows),
                       dtype=np.int64, count=len(rows))


class FolderCounts:
    """Collects each row's (source, row_index) with its position, then checks them against the report."""

    def __init__(self) -> None:
        self._index: dict[str, list[np.ndarray]] = {}
        self._position: dict[str, list[np.ndarray]] = {}
        self.rows = 0
        from beam_sft.dataset_folder.report_json import TokenStats

        self.tokens: TokenStats | None = TokenStats()  # None once a table lacks the columns

    def add_table(self, table, first_position: int) -> None:
        """Rows ``first_position...`` of the dataset, as an Arrow table with ``source`` and ``row_index``."""
        n = table.num_rows
        positions = np.arange(first_position, first_position + n, dtype=np.int64)
        self.rows += n
        sources = table.column("source").to_pylist() if "source" in table.column_names else [""] * n
        if "row_index" in table.column_names:
            index = numbers(table.column("row_index"))
            index = np.where(np.isnan(index), -1, index).astype(np.int64) if index.dtype.kind == "f" else \
                index.astype(np.int64)
        else:
            index = np.full(n, -1, dtype=np.int64)
        names = np.array([s if s is not None else "" for s in sources], dtype=object)
        if self.tokens is not None and {"num_tokens", "num_trained"} <= set(table.column_names):
            self.tokens.add(names.astype(str), *(np.nan_to_num(numbers(table.column(c)))
                                                 .astype(np.int64) for c in ("num_tokens", "num_trained")))
        else:
            self.tokens = None
        for name in set(names.tolist()):
            pick = names == name
            self._index.setdefault(name, []).append(index[pick])
            self._position.setdefault(name, []).append(positions[pick])

    def check(self, report: dict, rejects: Path) -> tuple[list[Violation], dict]:
        """Violations of the folder rules, and report.json's ``rejections`` summary."""
        sources = report.get("sources") if isinstance(report.get("sources"), dict) else {}
        out = self._row_counts(report, sources) + self._duplicates(report, sources) + self._report_counts(report)
        found, section, rejected = check_rejects(sources, rejects)
        # A corruption the counts already name is said once, by them: the accounting holds the rest
        # (each source's records kept or rejected once) where every count agrees.
        named = {v.source for v in out + found if v.rule in ("row_count", "duplicate_row", "rejects_count")}
        if "" in named:  # a count of the whole folder (rejects.jsonl's, tokens.rows) is off
            return out + found, section
        return out + found + self._accounting(report, {k: v for k, v in sources.items() if k not in named},
                                              rejected), section

    def _accounting(self, report: dict, sources: dict, rejected: dict[str, list[int] | None]) -> list[Violation]:
        """Every record a source read is kept (its ``row_index`` in the dataset) or rejected (its index in
        rejects.jsonl), once, and nothing else: counts alone let a kept row be relabelled as a rejected
        one, or a rejects line point at a row that does not exist. A row of a source of fractional
        weight that is neither is one the mix planned no copy of."""
        mix = report.get("mix") if isinstance(report.get("mix"), dict) else {}
        config = report.get("config") if isinstance(report.get("config"), dict) else {}
        seed = mix.get("seed", config.get("seed", 0))
        out: list[Violation] = []
        for name, entry in sorted(sources.items()):
            read, weight = (entry.get("read"), entry.get("weight", 1.0)) if isinstance(entry, dict) else (None, None)
            refused = rejected.get(name, [])
            if not _is_int(read) or refused is None or not isinstance(weight, (int, float)) or isinstance(weight, bool) \
                    or not math.isfinite(weight) or (not float(weight).is_integer() and not _is_int(seed)):
                continue  # nothing to hold the rows to (row_count, rejects_count and report_count say why)
            kept = np.unique(np.concatenate(self._index[name])) if name in self._index else np.zeros(0, np.int64)
            refused_at = np.asarray(refused, dtype=np.int64)
            # A shard holds a contiguous range of each source's records (shard_plan), which its report
            # does not record: held from the first index it holds; a merged or whole run from 0.
            shard = report.get("shard") if isinstance(report.get("shard"), dict) else {}
            one_shard = _is_int(shard.get("count")) and shard["count"] > 1 and "merged" not in shard
            held = np.concatenate([kept, refused_at])
            first = int(held.min()) if one_shard and len(held) else 0
            # (a shard's first record of a fractional-weight source may be one the mix planned no copy
            # of: there only doubles are held, not the range)
            bounded = not (one_shard and not float(weight).is_integer())
            problems = _accounting_problems(name, int(read), float(weight), seed if _is_int(seed) else 0, kept - first,
                                            refused_at - first, first, bounded=bounded)
            out += [Violation("row_count", None, name, None, p) for p in problems[:MAX_KEY_VIOLATIONS]]
            if len(problems) > MAX_KEY_VIOLATIONS:
                out.append(Violation("row_count", None, name, None, f"... {len(problems)} such problems in all"))
        return out

    def _report_counts(self, report: dict) -> list[Violation]:
        from beam_sft.dataset_folder.report_json import count_problems

        if not report:
            return []  # no report.json: report_seal says so
        out = [Violation("report_count", None, "", None, f"report.json {problem}")
               for problem in count_problems(report) + reasoning_problems(report)]
        if self.tokens is None:
            return out + [Violation("report_count", None, "", None, "the dataset lacks num_tokens/num_trained: "
                                    "report.json's token statistics cannot be checked")]
        held, recorded = self.tokens.to_json(), report.get("tokens")
        recorded = recorded if isinstance(recorded, dict) else {}
        for key in sorted(set(held) | set(recorded)):
            if key != "rows" and held.get(key) != recorded.get(key):  # rows: row_count's
                out.append(Violation("report_count", None, "", None, f"report.json's tokens.{key} is "
                                     f"{_short(recorded.get(key))}, the rows give {_short(held.get(key))}"))
        return out

    def _row_counts(self, report: dict, sources: dict) -> list[Violation]:
        out = []
        held = {name: int(sum(len(a) for a in arrays)) for name, arrays in self._index.items()}
        tokens = report.get("tokens") if isinstance(report.get("tokens"), dict) else {}
        if isinstance(tokens.get("rows"), int) and tokens["rows"] != self.rows:
            out.append(Violation("row_count", None, "", None, f"report.json's tokens.rows is {tokens['rows']}, the "
                                 f"dataset holds {self.rows} rows"))
        planned = {name: entry["rows_out"] for name, entry in sources.items()
                   if isinstance(entry, dict) and isinstance(entry.get("rows_out"), int)}
        if not planned:
            return out
        for name in sorted(set(planned) | set(held)):
            want, got = planned.get(name), held.get(name, 0)
            if want is None:
                out.append(Violation("row_count", None, name, None, f"{got} rows of a source report.json does not list"))
            elif want != got:
                out.append(Violation("row_count", None, name, None, f"report.json says {want} rows of this source "
                                     f"were written, the dataset holds {got}"))
        return out

    def _duplicates(self, report: dict, sources: dict) -> list[Violation]:
        mix = report.get("mix") if isinstance(report.get("mix"), dict) else {}
        config = report.get("config") if isinstance(report.get("config"), dict) else {}
        seed = mix.get("seed", config.get("seed", 0))
        out: list[Violation] = []
        if not _is_int(seed):  # a sealed report written by other code: said, never a traceback
            out.append(Violation("report_count", None, "", None, f"report.json's mix.seed is {_short(seed)}, not an "
                                 "integer: the copies planned for a source of fractional weight are not checked"))
            seed = None
        extra_found = short_found = 0
        for name, arrays in sorted(self._index.items()):
            entry = sources.get(name)
            weight = entry.get("weight", 1.0) if isinstance(entry, dict) else None
            if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not math.isfinite(weight):
                continue  # no plan to hold the rows to: row_count already says the source is unknown
            if seed is None and not float(weight).is_integer():
                continue  # its plan needs the seed (said above)
            index = np.concatenate(arrays)
            position = np.concatenate(self._position[name])
            known = index >= 0
            index, position = index[known], position[known]
            order = np.argsort(index, kind="stable")
            keys, first, counts = np.unique(index[order], return_index=True, return_counts=True)
            expected = planned_copies(float(weight), seed or 0, name, keys)  # (an integer weight needs no seed)
            for k in np.flatnonzero(counts > expected).tolist():
                extra_found += 1
                if extra_found <= MAX_KEY_VIOLATIONS:
                    where = position[order[first[k] + counts[k] - 1]]
                    out.append(Violation("duplicate_row", int(where), name, int(keys[k]), f"row {int(keys[k])} of "
                                         f"{name} appears {int(counts[k])} times; the mix planned {int(expected[k])}"))
            for k in np.flatnonzero((counts < expected) & (counts > 0)).tolist():
                short_found += 1
                if short_found <= MAX_KEY_VIOLATIONS:
                    where = position[order[first[k]]]
                    out.append(Violation("row_count", int(where), name, int(keys[k]), f"row {int(keys[k])} of {name} "
                                         f"appears {int(counts[k])} times; the mix planned {int(expected[k])}"))
        return out


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


REASONING_COUNTS = ("turns", "teacher_refused", "judge_verdicts")


def reasoning_problems(report: dict) -> list[str]:
    """What in report.json's ``reasoning`` section is not counts by name (``inspect`` prints them).

    >>> reasoning_problems({"reasoning": {"turns": {"data": 3}, "teacher_refused": {}}})
    []
    >>> reasoning_problems({"reasoning": {"turns": 5, "teacher_refused": 1.5}})
    ['reasoning.turns is 5, not counts by name', 'reasoning.teacher_refused is 1.5, not counts by name']
    """
    section = report.get("reasoning")
    if section is None:
        return []
    if not isinstance(section, dict):
        return [f"reasoning is {_short(section)}, not an object"]
    return [f"reasoning.{key} is {_short(section[key])}, not counts by name" for key in REASONING_COUNTS
            if section.get(key) is not None and not (
                isinstance(section[key], dict) and all(_is_int(n) and n >= 0 for n in section[key].values()))]


def _short(value, limit: int = 200) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


def _accounting_problems(name: str, read: int, weight: float, seed: int, kept: np.ndarray,
                         refused: np.ndarray, first: int = 0, *, bounded: bool = True) -> list[str]:
    """``FolderCounts._accounting`` for one source: what is wrong with its kept and rejected indices
    (given less ``first``, the source's first record in this folder); ``bounded=False``: only rows
    rejected twice or both kept and rejected."""
    out = []
    for what, values in (("kept", kept), ("rejected", refused)) if bounded else ():
        outside = values[(values < 0) | (values >= read)]
        if len(outside):
            out.append(f"{len(outside)} {what} row(s) of {name} are not records it read ({first}..{first + read - 1}): "
                       f"{(outside[:5] + first).tolist()}")
    keys, counts = np.unique(refused, return_counts=True)
    if (counts > 1).any():
        out.append(f"rejects.jsonl rejects row(s) {(keys[counts > 1][:5] + first).tolist()} of {name} more than once")
    both = np.intersect1d(kept, keys)
    if len(both):
        out.append(f"row(s) {(both[:5] + first).tolist()} of {name} are both kept and rejected")
    if not bounded:
        return out
    seen = np.zeros(read, dtype=bool)
    for values in (kept, keys):
        inside = values[(values >= 0) & (values < read)]
        seen[inside] = True
    missing = np.flatnonzero(~seen) + first
    if len(missing) and not float(weight).is_integer():  # the mix may have planned none of them
        missing = missing[planned_copies(weight, seed, name, missing) > 0]
    elif len(missing) and weight == 0:
        missing = missing[:0]
    if len(missing):
        out.append(f"{len(missing)} row(s) of {name} are neither kept nor rejected: {missing[:5].tolist()}")
    return out


def _reject_index(record: dict):
    """The record number in its source a rejects line names: its ``index`` where it has one (a folder
    source's line, whose ``row`` is the row in its ``file``; a Batch API pair's, whose ``row`` is a
    line of one of its two files), else ``row``; None when the line does not say."""
    value = record["index"] if "index" in record else None if "file" in record else record.get("row")
    return value if _is_int(value) else None


def check_rejects(sources: dict, path: Path) -> tuple[list[Violation], dict, dict[str, list[int] | None]]:
    """rejects.jsonl (streamed line by line) against report.json's per-source rejection counts; also
    the record indices rejected per source (a line that names none is a rejects_count violation)."""
    indices: dict[str, list[int] | None] = {}
    unplaced: list[str] = []
    by_source_code: Counter = Counter()
    unreadable = 0
    lines = 0
    if path.is_file():
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    continue
                lines += 1
                try:
                    record = json.loads(line)
                    if not isinstance(record, dict):
                        raise ValueError("not an object")
                except ValueError:
                    unreadable += 1
                    continue
                source = str(record.get("source", ""))
                by_source_code[(source, str(record.get("code", "unknown")))] += 1
                index = _reject_index(record)
                if index is None:  # a line that names no record could stand for any: said, not skipped
                    unplaced.append(f"line {lines} ({source})")
                else:
                    indices.setdefault(source, []).append(index)
    by_code: Counter = Counter()
    for (_, code), n in by_source_code.items():
        by_code[code] += n
    reported: dict[str, dict[str, int]] = {}
    for name, entry in sorted(sources.items()):
        rejected = entry.get("rejected") if isinstance(entry, dict) else None
        if isinstance(rejected, dict):
            reported[name] = {code: int(n) for code, n in sorted(rejected.items())}
    from_report = Counter({(name, code): n for name, codes in reported.items() for code, n in codes.items() if n})
    out = []
    if unreadable:
        out.append(Violation("rejects_count", None, "", None, f"{unreadable} of {lines} lines of {path.name} are not "
                             "JSON objects"))
    if unplaced:
        out.append(Violation("rejects_count", None, "", None, f"{len(unplaced)} lines of {path.name} name no record "
                             f"of their source (a file's line needs its whole-number index, any other a whole-number "
                             f"row): {', '.join(unplaced[:3])}"))
    consistent = not reported or (from_report == by_source_code and not unreadable and not unplaced)
    if reported and from_report != by_source_code:
        missing = from_report - by_source_code
        extra = by_source_code - from_report
        detail = "; ".join([f"{n} fewer {code} of {name}" for (name, code), n in sorted(missing.items())][:3]
                           + [f"{n} more {code} of {name}" for (name, code), n in sorted(extra.items())][:3])
        out.append(Violation("rejects_count", None, "", None, f"{path.name} holds {sum(by_source_code.values())} "
                             f"rejections, report.json counts {sum(from_report.values())}: {detail}"))
    section = {
        "total": sum(by_code.values()) + unreadable,
        "by_code": dict(sorted(by_code.items())) | ({"unreadable_reject_line": unreadable} if unreadable else {}),
        "by_source": reported,
        "consistent": consistent,
    }
    return out, section, indices
