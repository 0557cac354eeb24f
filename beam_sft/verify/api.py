"""``verify_prepared``: check every row (or a sample) of a prepared dataset, in parallel, and report."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from beam_sft.errors import VerificationError
from beam_sft.verify import report as report_io
from beam_sft.verify.context import CheckEnv, Violation, build_context
from beam_sft.verify.invariants import RULE_CODES, check_row
from beam_sft.verify.stats import STATS_VERSION, Aggregator, RowStats, rejections, row_stats

COLUMNS = ("input_ids", "assistant_masks", "row", "source", "row_index", "num_tokens", "num_trained")
REQUIRED_COLUMNS = ("input_ids", "assistant_masks", "row")
REJECTS_FILE = "rejects.jsonl"
CHUNK_ROWS = 256
MAX_KEPT_VIOLATIONS = 10_000


@dataclass(frozen=True)
class VerifyResult:
    """``ok`` is True when no row breaks any rule; ``stats`` is the report's "verify" section.

    ``violations`` holds the first MAX_KEPT_VIOLATIONS; all of them are in verify_violations.jsonl
    and counted in ``stats["violations"]``.
    """

    ok: bool
    violations: list[Violation]
    stats: dict
    directory: Path


def load_tokenizer(directory: str | Path):
    """The tokenizer saved beside the dataset (DIR/tokenizer)."""
    path = Path(directory) / "tokenizer"
    if not path.is_dir():
        raise VerificationError(f"{path}: no tokenizer saved with the prepared dataset")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def load_dataset(directory: str | Path):
    """The prepared dataset, checked for the columns verify needs."""
    from datasets import load_from_disk

    path = Path(directory)
    try:
        dataset = load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as exc:
        raise VerificationError(f"{path}: not a prepared dataset ({exc})") from exc
    except IndexError as exc:  # datasets saves 0 rows as 0 shards, then cannot load them
        raise VerificationError(f"{path}: the prepared dataset has no rows") from exc
    missing = [c for c in REQUIRED_COLUMNS if c not in dataset.column_names]
    if missing:
        raise VerificationError(f"{path}: prepared dataset lacks columns {missing}")
    return dataset


def select_positions(num_rows: int, sample: int | None, seed: int = 0) -> list[int]:
    """All positions, or a reproducible random sample of ``sample`` of them, in order.

    >>> select_positions(5, None)
    [0, 1, 2, 3, 4]
    >>> len(select_positions(100, 7)), select_positions(100, 7) == select_positions(100, 7)
    (7, True)
    """
    if sample is None or sample >= num_rows:
        return list(range(num_rows))
    if sample < 1:
        raise VerificationError(f"--sample must be at least 1, got {sample}")
    return sorted(random.Random(seed).sample(range(num_rows), sample))


def read_records(dataset, positions: Sequence[int]) -> Iterable[tuple[int, dict]]:
    """(position, record) for each position, reading columns in batches."""
    columns = [c for c in COLUMNS if c in dataset.column_names]
    for begin in range(0, len(positions), 256):
        chunk = list(positions[begin:begin + 256])
        batch = dataset.select_columns(columns)[chunk]
        for k, position in enumerate(chunk):
            yield position, {c: batch[c][k] for c in columns}


def check_records(records: Iterable[tuple[int, dict]], env: CheckEnv) -> tuple[list[Violation], list[RowStats]]:
    """Run every rule and collect statistics over ``records``."""
    violations: list[Violation] = []
    stats: list[RowStats] = []
    for position, record in records:
        ctx = build_context(position, record, env)
        violations.extend(check_row(ctx, env))
        stats.append(row_stats(ctx))
    return violations, stats


# Worker processes load the dataset and tokenizer once, in the initializer (not passed per task).
_WORKER: dict = {}


def _init_worker(directory: str, max_length: int | None) -> None:
    _WORKER["dataset"] = load_dataset(directory)
    _WORKER["env"] = CheckEnv.create(load_tokenizer(directory), max_length=max_length)


def _check_chunk(positions: list[int]) -> tuple[list[Violation], list[RowStats]]:
    return check_records(read_records(_WORKER["dataset"], positions), _WORKER["env"])


def _iter_checks(directory: Path, positions: list[int], num_proc: int, max_length: int | None,
                 env: CheckEnv) -> Iterator[tuple[list[Violation], list[RowStats]]]:
    """(violations, row stats) chunk by chunk, in row order, from this process or a pool."""
    if num_proc <= 1 or len(positions) < 2:
        dataset = load_dataset(directory)
        for begin in range(0, len(positions), CHUNK_ROWS):
            yield check_records(read_records(dataset, positions[begin:begin + CHUNK_ROWS]), env)
        return
    import multiprocessing

    size = max(1, min(CHUNK_ROWS, math.ceil(len(positions) / (num_proc * 8))))
    chunks = [positions[i:i + size] for i in range(0, len(positions), size)]
    # fork starts workers in milliseconds with everything imported (spawn re-imports transformers
    # in each, seconds). Workers only tokenize and decode; each loads its own tokenizer.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    with context.Pool(num_proc, initializer=_init_worker, initargs=(str(directory), max_length)) as pool:
        yield from pool.imap(_check_chunk, chunks)


def _read_rejects(directory: Path) -> list[dict]:
    path = directory / REJECTS_FILE
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append({"code": "unreadable_reject_line"})
    return out


def configured_max_length(report: dict) -> int | None:
    """max_length from report.json's length policy, when prepare recorded one.

    >>> configured_max_length({"length_policy": {"max_length": 2048}})
    2048
    """
    policy = report.get("length_policy")
    value = policy.get("max_length") if isinstance(policy, dict) else None
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def verify_prepared(directory: str | Path, *, num_proc: int = 1, sample: int | None = None, seed: int = 0,
                    max_length: int | None = None, write: bool = True, histogram: bool = True) -> VerifyResult:
    """Check every row of a prepared dataset (or ``sample`` rows) against every rule.

    Writes report.json's "verify" section (other sections kept), DIR/verify_violations.jsonl and
    DIR/report_lengths.png unless ``write``/``histogram`` are False. ``max_length`` defaults to the
    one report.json's length policy records.
    """
    directory = Path(directory)
    dataset = load_dataset(directory)
    report = report_io.read_report(directory)
    max_length = max_length if max_length is not None else configured_max_length(report)
    env = CheckEnv.create(load_tokenizer(directory), max_length=max_length)
    positions = select_positions(len(dataset), sample, seed)
    totals = Aggregator()
    by_rule: Counter = Counter()
    rows_with: set[int] = set()
    kept: list[Violation] = []
    # Violations stream to the file, so a dataset broken on every row does not fill memory.
    with report_io.ViolationWriter(directory if write else None) as out:
        for found, counted in _iter_checks(directory, positions, num_proc, max_length, env):
            for violation in found:
                by_rule[violation.rule] += 1
                rows_with.add(violation.row)
                out.write(violation)
                if len(kept) < MAX_KEPT_VIOLATIONS:
                    kept.append(violation)
            for row in counted:
                totals.add(row)
    total = sum(by_rule.values())
    section = {
        "version": STATS_VERSION,
        "ok": total == 0,
        "rows": len(dataset),
        "sample": sample,
        **totals.result(),
        "max_length": max_length,
        "rejections": rejections(report, _read_rejects(directory)),
        "violations": {"total": total, "rows": len(rows_with),
                       "by_rule": {code: by_rule[code] for code in RULE_CODES if by_rule[code]}},
        "parser": env.parser_name,
    }
    if write:
        report_io.merge_verify_section(directory, section)
        if histogram and len(totals.lengths):
            report_io.write_histogram(directory, totals.lengths, totals.trained_fractions)
    return VerifyResult(total == 0, kept, section, directory)


def load_row(directory: str | Path, position: int):
    """(RowContext, CheckEnv) for the row at ``position``, for inspection."""
    dataset = load_dataset(directory)
    if not 0 <= position < len(dataset):
        raise VerificationError(f"row {position} is out of range: the dataset has {len(dataset)} rows")
    env = CheckEnv.create(load_tokenizer(directory))
    [(_, record)] = list(read_records(dataset, [position]))
    return build_context(position, record, env), env


def inspect_row(directory: str | Path, position: int, *, color: bool = True,
                html: bool = False) -> tuple[str, str | None]:
    """The terminal view of one row, and its HTML page when ``html``."""
    from beam_sft.verify.tokens import token_texts
    from beam_sft.verify.view_terminal import render_terminal

    ctx, env = load_row(directory, position)
    env.max_length = configured_max_length(report_io.read_report(Path(directory)))
    violations = check_row(ctx, env)
    texts = token_texts(ctx.ids, env.decode)
    page = None
    if html:
        from beam_sft.verify.view_html import render_html

        page = render_html(ctx, texts, env.tokenizer.convert_ids_to_tokens(ctx.ids), violations)
    return render_terminal(ctx, texts, color=color, violations=violations), page
