"""The ``datasets.map`` step: raw records in, encoded rows out, one batch at a time, in every process.

Each batch is converted (``beam_sft.convert``), mixed (``beam_sft.data.mix``), encoded, and cut to the
length policy in one pass; labels need no second pass because the masks are the labels. A row that
fails any step is written to this process's rejects file and counted, never raised: one bad row must
not stop a long run. Per-process state (tokenizer, encoder and its piece cache) lives in ``_STATE``,
filled by the parent before it forks the workers, so the workers inherit it instead of loading the
tokenizer again.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from beam_sft.errors import RowError

# job key -> WorkerState, per process
_STATE: dict[str, WorkerState] = {}


@dataclass(frozen=True)
class SourceJob:
    label: str
    format: str
    weight: float
    options: Any  # beam_sft.convert.options.ConvertOptions


@dataclass(frozen=True)
class EncodeJob:
    """Everything a worker needs; small and picklable (the tokenizer travels by directory)."""

    key: str
    tokenizer_dir: str
    encoder: str  # "fast" or "template"
    sources: tuple[SourceJob, ...]
    seed: int
    max_length: int | None
    length_policy: str
    work_dir: str


@dataclass
class WorkerState:
    tokenizer: Any
    encoder: Any


@dataclass
class BatchStats:
    """Per-source counts of one batch (summed over batches and processes by the pipeline)."""

    read: Counter = field(default_factory=Counter)
    kept: Counter = field(default_factory=Counter)
    selected: Counter = field(default_factory=Counter)
    rows_out: Counter = field(default_factory=Counter)
    trimmed: Counter = field(default_factory=Counter)
    trimmed_messages: Counter = field(default_factory=Counter)
    fallback_rows: Counter = field(default_factory=Counter)  # rows the fast encoder handed to the template
    rejected: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))

    def to_json(self) -> dict:
        return {
            "read": dict(self.read), "kept": dict(self.kept), "selected": dict(self.selected),
            "rows_out": dict(self.rows_out), "trimmed": dict(self.trimmed),
            "trimmed_messages": dict(self.trimmed_messages), "fallback_rows": dict(self.fallback_rows),
            "rejected": {source: dict(codes) for source, codes in self.rejected.items()},
        }


def make_encoder(kind: str, tokenizer):
    if kind == "fast":
        from beam_sft.encode.fast import FastEncoder

        return FastEncoder(tokenizer)
    from beam_sft.encode.template_encode import TemplateEncoder

    return TemplateEncoder(tokenizer)


def install_state(job: EncodeJob, tokenizer, encoder=None) -> WorkerState:
    """Put the tokenizer (and a warmed encoder) where forked workers will find them."""
    state = WorkerState(tokenizer, encoder or make_encoder(job.encoder, tokenizer))
    _STATE[job.key] = state
    return state


def _state(job: EncodeJob) -> WorkerState:
    state = _STATE.get(job.key)
    if state is None:  # a spawned (not forked) worker: load from disk
        from transformers import AutoTokenizer

        state = install_state(job, AutoTokenizer.from_pretrained(job.tokenizer_dir))
    return state


def _decode(text: str, error: str):
    from beam_sft.data.sources import BadRecord

    if error:
        return BadRecord(text, error)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:  # the message beam_sft.data.sources gives
        return BadRecord(text, f"not valid JSON: {exc}")


def _reject(out: list[str], source: str, row: int, code: str, message: str, raw: Any) -> None:
    record = {"source": source, "row": row, "code": code, "message": message, "raw": raw}
    out.append(json.dumps(record, ensure_ascii=False, default=repr))


def _apply_length_policy(job: EncodeJob, encoder, row: dict, encoded):
    """``(row, encoded, trimmed_messages)`` within max_length, or RowError."""
    from beam_sft.encode.length import fit_by_trimming, too_long

    length = len(encoded.input_ids)
    if job.max_length is None or length <= job.max_length:
        return row, encoded, 0
    if job.length_policy == "drop":
        raise too_long(length, job.max_length)
    trimmed, encoded = fit_by_trimming(row, length, job.max_length, encoder.encode)
    return trimmed, encoded, len(row["messages"]) - len(trimmed["messages"])


def process_batch(batch, rank: int | None, *, job: EncodeJob):
    """Convert, mix, encode and length-check one batch of raw records (the ``datasets.map`` function).

    Takes and returns Arrow tables (the dataset is in ``arrow`` format): the token columns are built
    as one flat array each, with no Python object per token.
    """
    from beam_sft.convert.pipeline import convert_row
    from beam_sft.convert.rows import Rejection
    from beam_sft.data.mix import copies

    state = _state(job)
    stats = BatchStats()
    rejects: list[str] = []
    pending: list[tuple[dict, SourceJob, int, int]] = []  # (row, source, row index, copies)
    columns_in = [batch.column(name).to_pylist() for name in ("raw", "error", "source_id", "row_index")]
    for text, error, source_id, row_index in zip(*columns_in, strict=True):
        source = job.sources[source_id]
        stats.read[source.label] += 1
        result = convert_row(_decode(text, error), format=source.format, options=source.options,
                             source=source.label, row=row_index)
        if isinstance(result, Rejection):
            stats.rejected[source.label][result.code] += 1
            rejects.append(json.dumps(result.to_json(), ensure_ascii=False, default=repr))
            continue
        n = copies(source.weight, seed=job.seed, source=source.label, row=row_index)
        if n == 0:  # mixed out: valid, not encoded
            stats.kept[source.label] += 1
            continue
        pending.append((result, source, row_index, n))

    out = _Columns()
    before = state.encoder.stats.get("fallback_rows", 0)
    encoded_rows = state.encoder.encode_batch([p[0] for p in pending], plain=True)
    if state.encoder.stats.get("fallback_rows", 0) > before:
        stats.fallback_rows["all"] += state.encoder.stats["fallback_rows"] - before
    for (row, source, row_index, n), encoded in zip(pending, encoded_rows, strict=True):
        try:
            if isinstance(encoded, RowError):
                raise encoded
            row, encoded, dropped = _apply_length_policy(job, state.encoder, row, encoded)
            trained = int(np.count_nonzero(encoded.assistant_masks))
            if not trained:
                raise RowError("no_trained_tokens", "no token is left in the loss after weights")
        except RowError as exc:
            stats.rejected[source.label][exc.code] += 1
            _reject(rejects, source.label, row_index, exc.code, exc.detail, row)
            continue
        stats.kept[source.label] += 1
        stats.selected[source.label] += 1
        stats.rows_out[source.label] += n
        if dropped:
            stats.trimmed[source.label] += 1
            stats.trimmed_messages[source.label] += dropped
        out.add(encoded, json.dumps(row, ensure_ascii=False), source.label, row_index, trained, n)

    work = Path(job.work_dir)
    rank = rank or 0
    if rejects:
        with open(work / f"rejects-{rank:05d}.jsonl", "a", encoding="utf-8") as fh:
            fh.write("\n".join(rejects) + "\n")
    with open(work / f"stats-{rank:05d}.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(stats.to_json()) + "\n")
    return out.table()


class _Columns:
    """The output batch, built column by column; token lists become one flat Arrow array each."""

    def __init__(self):
        self.ids: list[np.ndarray] = []
        self.masks: list[np.ndarray] = []
        self.rows: list[str] = []
        self.sources: list[str] = []
        self.indices: list[int] = []
        self.trained: list[int] = []

    def add(self, encoded, row_json: str, source: str, row_index: int, trained: int, copies: int) -> None:
        for _ in range(copies):
            self.ids.append(encoded.input_ids)
            self.masks.append(encoded.assistant_masks)
            self.rows.append(row_json)
            self.sources.append(source)
            self.indices.append(row_index)
            self.trained.append(trained)

    def table(self):
        import pyarrow as pa

        lengths = np.fromiter((len(a) for a in self.ids), dtype=np.int64, count=len(self.ids))
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
        flat_ids = np.concatenate(self.ids) if self.ids else np.zeros(0, np.int32)
        flat_masks = np.concatenate(self.masks) if self.masks else np.zeros(0, np.int8)
        return pa.table({
            "input_ids": pa.ListArray.from_arrays(offsets, pa.array(flat_ids.astype(np.int32, copy=False))),
            "assistant_masks": pa.ListArray.from_arrays(offsets, pa.array(flat_masks.astype(np.int8, copy=False))),
            "row": pa.array(self.rows, pa.string()),
            "source": pa.array(self.sources, pa.string()),
            "row_index": pa.array(self.indices, pa.int64()),
            "num_tokens": pa.array(lengths.astype(np.int32)),
            "num_trained": pa.array(self.trained, pa.int32()),
        })


def output_features():
    from datasets import Features, List, Value

    return Features({
        "input_ids": List(Value("int32")),
        "assistant_masks": List(Value("int8")),
        "row": Value("string"),
        "source": Value("string"),
        "row_index": Value("int64"),
        "num_tokens": Value("int32"),
        "num_trained": Value("int32"),
    })
