"""The prepare config, interpreted once: ``resolve(config, tokenizer) -> ResolvedPrepare``.

Everything ``prepare`` derives from its config and tokenizer before it reads a record is worked
out here, once per run, and read by the three that need it: the cache fingerprint
(``cache.fingerprint_parts``), the records writer (``records.write_records``: each source's options
go into its ``SourceJob``) and through those jobs the encode batches (``batch.py``). So the options
the fingerprint holds are the options the converter runs with, by construction, and a deprecated
spelling is reported once (here), not once per reader.

The plan holds the values, not the config: past ``resolve`` no module gets the ``PrepareConfig``
(``tests/prepare/test_config_read_once.py`` follows it through a run), so what a stage reads is
what its plan field says, and the teacher pass (``prepare/teacher.py`` -> ``beam_sft.reason``) gets
the ``reasoning:`` block alone.

Not the training plan (``beam_sft.train.plan``): this one is about a prepare run.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from beam_sft import compat
from beam_sft.convert.options import (
    COLUMN_MAP_DEPRECATED,
    ConvertOptions,
    MissingReasoning,
    options_from_dict,
)
from beam_sft.convert.validate import forbidden_tokens
from beam_sft.data import fingerprint as fp
from beam_sft.data.hub import dataset_source, source_digest
from beam_sft.prepare.config import EncoderChoice, LengthPolicy, PrepareConfig, SourceSpec
from beam_sft.reason.config import TeacherConfig
from beam_sft.redact import redact_strings


@dataclass(frozen=True)
class Head:
    """What ``head_start``'s child worked out while the tokenizer loaded: the code digest, and each
    source's data digest by its index (absent: ``resolve`` computes it)."""

    code: str | None = None
    data: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ResolvedSource:
    """One source as the run reads it: its spec, the converter options it gets and its data's digest."""

    index: int
    spec: SourceSpec
    options: ConvertOptions
    data_digest: str  # file bytes, or the dataset and its resolved revision (data.hub.source_digest)


@dataclass(frozen=True)
class ResolvedPrepare:
    """A prepare run's config with everything derived from it (see the module docstring)."""

    sources: tuple[ResolvedSource, ...]
    forbidden_tokens: tuple[str, ...]  # sorted; every source's options carry them
    code_digest: str  # the code that decides the output: beam_sft's (results_code_digest) and the libraries'
    # what the encoded rows depend on besides the sources (the fingerprint's "options")
    max_length: int | None
    length_policy: LengthPolicy
    missing_reasoning: MissingReasoning
    seed: int
    encoder: EncoderChoice
    # this run's part of the record stream (shard_plan) and how it reads it
    num_shards: int
    shard_index: int
    batch_size: int
    num_proc: int  # resolved: the config's, else every core this process may use
    # where it comes from and goes, and what it checks
    tokenizer: str | None
    output: str | None
    verify: bool
    cache: bool
    teacher: TeacherConfig | None  # the config's reasoning: block (the teacher pass, prepare/teacher.py)
    report_config: dict[str, Any]  # the config as report.json shows it (secrets redacted)


def convert_options(spec: SourceSpec, config: PrepareConfig, index: int, forbidden: tuple[str, ...] = ()):
    """The converter options of one source: its ``convert`` mapping (``options_from_dict``: the
    column mapping is ``columns``; the source's deprecated ``column_map`` is read with a message),
    the run's ``missing_reasoning`` unless the source sets its own, and ``forbidden`` (the
    tokenizer's added and special tokens, ``convert.validate.forbidden_tokens``)."""
    return source_options(spec, config.missing_reasoning, index, forbidden)


def source_options(spec: SourceSpec, missing_reasoning: MissingReasoning, index: int,
                   forbidden: tuple[str, ...] = ()):
    """``convert_options`` from the one value of the config it reads (``AheadPlan`` holds it)."""
    raw = {"missing_reasoning": missing_reasoning, **spec.convert}
    if spec.columns:
        raw["columns"] = {**(raw.get("columns") or {}), **spec.columns}
    if spec.column_map:
        raw[COLUMN_MAP_DEPRECATED] = {**(raw.get(COLUMN_MAP_DEPRECATED) or {}), **spec.column_map}
    if forbidden:
        raw["forbidden_tokens"] = tuple(forbidden)
    return options_from_dict(raw, f"sources[{index}].convert")


@dataclass(frozen=True)
class AheadPlan:
    """What converting records ahead of the tokenizer needs from the config (``prepare/convert_ahead.py``,
    in ``head_start``'s child): the sources, the run's ``missing_reasoning``, seed and batch size, the
    tokenizer folder the forbidden tokens are predicted from, and how many records the parent converts
    itself (the probe's head). Its values, not the config: ``resolve``'s module reads the config."""

    sources: tuple[SourceSpec, ...]
    missing_reasoning: MissingReasoning
    seed: int
    batch_size: int
    tokenizer_dir: str
    head_records: int

    def resolved_sources(self, forbidden: tuple[str, ...]) -> tuple[ResolvedSource, ...]:
        """The sources as ``resolve`` gives them for a tokenizer with these forbidden tokens (no data
        digest: the records reader does not read it)."""
        return tuple(ResolvedSource(i, spec, source_options(spec, self.missing_reasoning, i, forbidden), "")
                     for i, spec in enumerate(self.sources))


def ahead_plan(config: PrepareConfig, head_records: int) -> AheadPlan | None:
    """The ``AheadPlan`` of a run whose records can be converted before its tokenizer loads, else None:
    a tokenizer folder on disk (its files give the forbidden tokens), local files and folders only
    (a hub or ``datasets`` source would import ``datasets`` in the child, and a hub id is looked up
    online), one shard (a shard's range counts every source first), no teacher (its fills are read
    from the teacher pass's cache, written after the tokenizer loads), and a second core to do it on."""
    if config.reasoning is not None or config.num_shards != 1 or not config.tokenizer:
        return None
    if not Path(config.tokenizer).is_dir() or len(os.sched_getaffinity(0)) < 2:
        return None
    for spec in config.sources:
        try:  # (a source the run will refuse is refused by the run, where it always was)
            location = None if spec.batch_input is not None else dataset_source(spec)
        except Exception:  # noqa: BLE001
            return None
        # a regular file or a folder: a pipe or a device would give the child records the run never sees
        if not isinstance(location, str) or not (os.path.isfile(location) or os.path.isdir(location)):
            return None
    return AheadPlan(tuple(config.sources), config.missing_reasoning, config.seed, config.batch_size,
                     str(config.tokenizer), head_records)


def data_digest(spec: SourceSpec) -> str:
    """The source's data digest; a Batch API pair's holds both files (either one changed is new data)."""
    if spec.batch_input is None:
        return source_digest(spec)
    return fp.digest_json({"batch_output": source_digest(spec), "batch_input": fp.data_digest(spec.batch_input)})


def source_location(spec: SourceSpec):
    """What the records writer reads: the spec's path or dataset, or its Batch API pair."""
    from beam_sft.data.batch_api import BatchPair

    return BatchPair(spec.batch_input, spec.path) if spec.batch_input is not None else dataset_source(spec)


def resolve(config: PrepareConfig, tokenizer=None, head: Head | None = None) -> ResolvedPrepare:
    """Interpret ``config`` once. ``tokenizer``: text holding any of its added or special tokens is
    rejected in every source (None: no such rule, for callers that only read records). ``head``: the
    digests ``head_start`` worked out while the tokenizer loaded (by the same functions); what it
    lacks is computed here."""
    head = head or Head()
    forbidden = tuple(sorted(forbidden_tokens(tokenizer))) if tokenizer is not None else ()
    sources = tuple(ResolvedSource(i, spec, convert_options(spec, config, i, forbidden),
                                   head.data.get(i) or data_digest(spec))
                    for i, spec in enumerate(config.sources))
    code = fp.digest_json({"beam_sft": head.code or fp.results_code_digest(),
                           "libraries": compat.library_code_digest()})
    return ResolvedPrepare(
        sources, forbidden, code, max_length=config.max_length, length_policy=config.length_policy,
        missing_reasoning=config.missing_reasoning, seed=config.seed, encoder=config.encoder,
        num_shards=config.num_shards, shard_index=config.shard_index, batch_size=config.batch_size,
        num_proc=config.resolved_num_proc(), tokenizer=config.tokenizer, output=config.output, verify=config.verify,
        cache=config.cache, teacher=config.reasoning, report_config=redact_strings(asdict(config)))
