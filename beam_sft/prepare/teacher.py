"""The prepare config's ``reasoning:`` block: the teacher pass before encoding.

``prepare`` reads its records as always; then, when the block is set, this process converts every
record once with an asking teacher (``beam_sft.reason``: bounded concurrency, retries, budget),
which fills the answer cache. The encode workers then convert with a teacher that only reads that
cache (``ask=False``), so the forked workers send no request and share no budget, and the rows
they encode are exactly the rows ``beam-sft reason`` would write. A turn with no cached answer
(its request failed, or the budget ran out) falls back to the missing-reasoning policy with its
code, as in ``beam-sft reason``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

logger = logging.getLogger("beam_sft.prepare")

# per process: (job key, source id) -> the cache-reading Teacher of that source
_READERS: dict[tuple[str, int], Any] = {}


def ask_teacher(config, records: Iterable[tuple[Any, Any, str, int]], jobs, refusals_path, *, quiet: bool = True):
    """Convert every record (``batch.iter_records``: source job, decoded record, label, row) with an
    asking teacher (the answers land in the cache; the requests that failed, with their codes, in
    ``refusals_path`` for the workers); the counts."""
    import json

    from beam_sft.convert.pipeline import convert_row, ordered_map, resolve_format
    from beam_sft.reason.run import share_teacher, teacher_session

    teachers = {}

    def one(item) -> None:
        source, raw, label, row = item
        teacher = teachers.get(source.label)
        fmt = resolve_format(raw, source.options, source.default_format) if source.format == "auto" else source.format
        convert_row(raw, format=fmt, options=source.options, source=label, row=row, fill=teacher)

    jobs = list(jobs)
    if not jobs:
        return None
    first = None
    try:
        with teacher_session(config, jobs[0].options, quiet=quiet) as first:
            for index, source in enumerate(jobs):  # one teacher per source (its own options), one client for all
                teachers[source.label] = first if index == 0 else share_teacher(first, config, source.options)
            for _ in ordered_map(one, records, config.concurrency):
                first.stats.add(rows=1)
    finally:
        if first is not None:  # the workers read the refusals, after the session closed the clients
            refusals_path.write_text(json.dumps(first.refusals), encoding="utf-8")
    stats, budget = first.stats, first.client.budget
    logger.info("teacher: %d turn(s) without reasoning, %d filled, refused %s; %d request(s), %d token(s) "
                "(%d counted at max_tokens for want of a usable usage), %d from cache", stats.asked, stats.filled,
                dict(stats.rejected) or "none", budget.requests, budget.tokens, budget.estimated, stats.cached)
    return stats


def cache_reader(job_key: str, source_id: int, source):
    """The cache-reading teacher of a source, built once per process (a forked worker builds its own)."""
    import json

    from beam_sft.reason.run import build_teacher

    key = (job_key, source_id)
    if key not in _READERS:
        teacher = build_teacher(source.reasoning, source.options, ask=False)
        with open(source.reasoning_refusals, encoding="utf-8") as fh:
            teacher.refusals = {k: tuple(v) for k, v in json.load(fh).items()}
        _READERS[key] = teacher
    return _READERS[key]
