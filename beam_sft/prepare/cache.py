"""The prepared-dataset cache: a folder is reused when its report carries the same fingerprint and
its files are still what the report recorded (``beam_sft.prepared.check_integrity``)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
from pathlib import Path
from typing import Any

from beam_sft.convert.validate import forbidden_tokens
from beam_sft.data import fingerprint as fp
from beam_sft.data.hub import source_digest
from beam_sft.prepare.config import PrepareConfig
from beam_sft.prepared.layout import DATASET_INFO_FILE, TOKENIZER_DIR
from beam_sft.prepared.report import read_report

logger = logging.getLogger("beam_sft.prepare")

# Bump when the prepared layout or the encoding rules change in a way the code digests miss.
ENCODER_VERSION = 2
DEFAULT_ROOT = Path("out") / "prepared"


def default_output(fingerprint: str, root: Path = DEFAULT_ROOT) -> Path:
    """Where a run without an explicit output goes: one directory per fingerprint."""
    return root / fingerprint[:16]


def convert_options(spec, config: PrepareConfig, index: int):
    """``records.convert_options`` without its deprecation message (said once, when the records are read)."""
    from beam_sft.prepare.records import convert_options as options

    with contextlib.redirect_stderr(io.StringIO()):
        return options(spec, config, index)


def fingerprint_parts(config: PrepareConfig, tokenizer) -> dict[str, Any]:
    """Everything the output depends on (see ``beam_sft.data.fingerprint``)."""
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else repr(tokenizer.chat_template)
    return {
        "encoder_version": ENCODER_VERSION,
        "encoder_code": fp.package_digest("beam_sft.encode"),
        "prepare_code": fp.package_digest("beam_sft.prepare"),
        "prepared_code": fp.package_digest("beam_sft.prepared"),
        "converter_code": fp.package_digest("beam_sft.convert"),
        "data_code": fp.package_digest("beam_sft.data"),
        "template": fp.digest_bytes((template or "").encode()),
        "tokenizer": fp.tokenizer_digest(tokenizer),
        # The tokens every source's text may not hold (convert.validate.forbidden_tokens): part of the
        # conversion options, so a change in them is a change of the output even if the digest above missed it.
        "forbidden_tokens": fp.digest_json(sorted(forbidden_tokens(tokenizer))),
        "response_template": fp.digest_json(getattr(tokenizer, "response_template", None)),
        "libraries": fp.library_versions(),
        "sources": [
            {"path": s.path, "label": s.label, "format": s.format, "weight": s.weight, "column_map": s.column_map,
             "convert": s.convert, "data": source_digest(s),
             # the options the converter gets, however they were spelled (recipe, flags, deprecated names)
             "options": dataclasses.asdict(convert_options(s, config, i))}
            for i, s in enumerate(config.sources)
        ],
        "options": {
            "max_length": config.max_length, "length_policy": config.length_policy,
            "missing_reasoning": config.missing_reasoning, "seed": config.seed, "encoder": config.encoder,
            "num_shards": config.num_shards,
        },
        "shard_index": config.shard_index,
        "reasoning": _teacher_part(config),
    }


def _teacher_part(config: PrepareConfig) -> dict | None:
    """What the teacher's answers depend on: the model, the prompt's text, the generation parameters
    and the checks (not where it is served, the key, the cache folder, the concurrency or the budget);
    and the code of the step. A folder whose teacher pass left turns unasked is never a hit
    (``teacher_incomplete``): the next run asks for those turns only."""
    t = config.reasoning
    if t is None:
        return None
    from beam_sft.reason.prompt import Prompt

    return {"model": t.model, "prompt": Prompt.load(t.prompt).digest, "params": t.params,
            "max_reasoning_chars": t.max_reasoning_chars, "code": fp.package_digest("beam_sft.reason")}


# Teacher refusals that another run may not repeat: a failed request, a spent budget.
RETRYABLE_TEACHER_CODES = ("teacher_failed", "teacher_budget_exhausted")


def teacher_incomplete(report: dict) -> bool:
    """Whether a prepared folder's teacher pass left turns that a rerun could still fill.

    >>> teacher_incomplete({"reasoning": {"teacher_refused": {"teacher_failed": 2}}}), teacher_incomplete({})
    (True, False)
    """
    refused = (report.get("reasoning") or {}).get("teacher_refused") or {}
    return any(refused.get(code) for code in RETRYABLE_TEACHER_CODES)


def fingerprints(config: PrepareConfig, tokenizer) -> tuple[str, str, dict]:
    """(fingerprint, the fingerprint shared by all shards of the run, the parts)."""
    parts = fingerprint_parts(config, tokenizer)
    base = {k: v for k, v in parts.items() if k != "shard_index"}
    return fp.combine(parts), fp.combine(base), parts


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
