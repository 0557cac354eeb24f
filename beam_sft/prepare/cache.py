"""The prepared-dataset cache: a folder is reused when its report carries the same fingerprint and
its files are still what the report recorded (``beam_sft.dataset_folder.check_integrity``)."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from beam_sft.data import fingerprint as fp
from beam_sft.dataset_folder.layout import DATASET_INFO_FILE, TOKENIZER_DIR
from beam_sft.dataset_folder.report_json import read_report
from beam_sft.prepare.resolved import ResolvedPrepare
from beam_sft.reason.config import TeacherConfig

logger = logging.getLogger("beam_sft.prepare")

# Bump when the prepared layout or the encoding rules change in a way the code digests miss.
ENCODER_VERSION = 2
DEFAULT_ROOT = Path("out") / "prepared"


def default_output(fingerprint: str, root: Path = DEFAULT_ROOT) -> Path:
    """Where a run without an explicit output goes: one directory per fingerprint."""
    return root / fingerprint[:16]


def fingerprint_parts(plan: ResolvedPrepare, tokenizer) -> dict[str, Any]:
    """Everything the output depends on (see ``beam_sft.data.fingerprint``), read from the run's
    resolved config (``resolved.resolve``: the options the converter gets are the ones digested)."""
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else repr(tokenizer.chat_template)
    return {
        "encoder_version": ENCODER_VERSION,
        "code": plan.code_digest,
        "template": fp.digest_bytes((template or "").encode()),
        "tokenizer": fp.tokenizer_digest(tokenizer),
        # The tokens every source's text may not hold (convert.validate.forbidden_tokens), digested once
        # here rather than spelled out in every source's options below.
        "forbidden_tokens": fp.digest_json(list(plan.forbidden_tokens)),
        "response_template": fp.digest_json(getattr(tokenizer, "response_template", None)),
        "libraries": fp.library_versions(),
        "sources": [
            {"path": s.spec.path, "label": s.spec.label, "format": s.spec.format, "weight": s.spec.weight,
             "column_map": s.spec.column_map, "convert": s.spec.convert, "data": s.data_digest,
             # the options the converter gets, however they were spelled (recipe, flags, deprecated names)
             "options": {**dataclasses.asdict(s.options), "forbidden_tokens": "see forbidden_tokens"}}
            for s in plan.sources
        ],
        "options": {
            "max_length": plan.max_length, "length_policy": plan.length_policy,
            "missing_reasoning": plan.missing_reasoning, "seed": plan.seed, "encoder": plan.encoder,
            "num_shards": plan.num_shards,
        },
        "shard_index": plan.shard_index,
        "reasoning": _teacher_part(plan.teacher),
    }


def _teacher_part(t: TeacherConfig | None) -> dict | None:
    """What the teacher's answers depend on: the model, the prompt's text, the generation parameters
    and the checks (not where it is served, the key, the cache folder, the concurrency or the budget);
    and the code of the step. A folder whose teacher pass left turns unasked is never a hit
    (``teacher_incomplete``): the next run asks for those turns only."""
    if t is None:
        return None
    from beam_sft.reason.prompt import Prompt

    part = {"model": t.model, "prompt": Prompt.load(t.prompt).digest, "params": t.params,
            "max_reasoning_chars": t.max_reasoning_chars}
    if t.judge is not None:  # the judge decides which answers are kept: its model, prompt and parameters too
        from beam_sft.reason.judge import Judge

        part["judge"] = {"model": t.judge.model or t.model, "prompt": Judge.load_prompt(t.judge.prompt).digest,
                         "params": t.judge.params}
    return part


# Teacher refusals that another run may not repeat: a failed request, a spent budget.
RETRYABLE_TEACHER_CODES = ("teacher_failed", "teacher_budget_exhausted")


def teacher_incomplete(report: dict) -> bool:
    """Whether a prepared folder's teacher pass left turns that a rerun could still fill.

    >>> teacher_incomplete({"reasoning": {"teacher_refused": {"teacher_failed": 2}}}), teacher_incomplete({})
    (True, False)
    """
    refused = (report.get("reasoning") or {}).get("teacher_refused") or {}
    return any(refused.get(code) for code in RETRYABLE_TEACHER_CODES)


def fingerprints(plan: ResolvedPrepare, tokenizer) -> tuple[str, str, dict]:
    """(fingerprint, the fingerprint shared by all shards of the run, the parts)."""
    parts = fingerprint_parts(plan, tokenizer)
    return (*combined(parts), parts)


def combined(parts: dict) -> tuple[str, str]:
    """(fingerprint, the fingerprint shared by all shards) of a run's fingerprint parts."""
    base = {k: v for k, v in parts.items() if k != "shard_index"}
    return fp.combine(parts), fp.combine(base)


def unsharded_parts(parts: dict) -> dict:
    """The fingerprint parts of the one-process run that a shard's run is part of: merged shards
    are that run's folder (contiguous shard ranges, ``shard_plan``), so they carry its fingerprint
    and a later unsharded prepare of the same config finds them as its own."""
    return {**parts, "options": {**parts["options"], "num_shards": 1}, "shard_index": 0}


def is_cached(directory: str | Path, fingerprint: str) -> bool:
    """True when ``directory`` holds a complete prepared dataset with this fingerprint (its files
    are checked separately, by ``check_integrity``, so that a changed file is an error, not a miss)."""
    directory = Path(directory)
    report = read_report(directory)
    return (
        report is not None
        and report.get("fingerprint") == fingerprint
        and not teacher_incomplete(report)
        and (directory / DATASET_INFO_FILE).is_file()
        and (directory / TOKENIZER_DIR).is_dir()
    )
