"""The encode step: raw records in, one output row per record (or per copy) out.

Each record is decoded once, converted (``beam_sft.convert``), mixed (``beam_sft.data.mix``),
encoded (``beam_sft.encode``) and cut to the length policy, in one pass; labels need no second pass
because the masks are the labels. A row that fails any step is never raised (one bad row must not
stop a long run): it comes back as an output row whose ``status`` is its reason code and whose
``reject`` holds its rejects.jsonl line. The pipeline then counts the status column and keeps only
the rows whose status is ``kept`` (``STATUS_COLUMNS`` go): nothing leaves a worker but its output
table (``encode_pool``).

Per-process state (tokenizer, encoder and its piece cache) lives in ``_STATE``, filled by the parent
before it forks the workers, so the workers inherit it instead of loading the tokenizer again.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from beam_sft import arrow_arrays as arrays
from beam_sft.convert import pipeline as conversion
from beam_sft.data import jsontext
from beam_sft.data.mix import copies
from beam_sft.data.sources import BadRecord, bad_line
from beam_sft.dataset_folder.layout import COLUMNS, arrow_schema
from beam_sft.dataset_folder.rejects import placed, reject_json, reject_line
from beam_sft.dataset_folder.tokenizer import load_tokenizer
from beam_sft.encode.length import fit_by_trimming, too_long
from beam_sft.encode.select import make_encoder
from beam_sft.errors import Rejection
from beam_sft.reject_codes import codes

KEPT = "kept"
MIXED_OUT = "mixed_out"  # valid by every rule (encoded and length-checked), but the mix gave it 0 copies: kept
TEACHER_CODES = frozenset(codes("reason"))  # the teacher's refusals (teacher_*, judge_failed)
# column -> kind (COLUMNS' notation) of what the encode pass adds to each row; dropped before saving
STATUS_COLUMNS = {"status": "string", "copy": "int32", "trimmed_messages": "int32", "fallback": "int8",
                  "native": "int8", "reject": "large_string", "format": "string", "reasoning": "string"}
# The records file (records.py): JSON text, "" or a BadRecord as JSON, the line's byte (JSON Lines),
# the source, the running index in the source (shards, mix), the row's own file (None: the source
# itself) and its row there (meta, rejects).
RECORD_COLUMNS = ("raw", "error", "byte", "source_id", "row_index", "file", "file_row")

# job key -> WorkerState, per process (see the module docstring)
_STATE: dict[str, WorkerState] = {}


@dataclass(frozen=True)
class SourceJob:
    label: str
    format: str  # "auto": each row by the format its own shape shows (convert.pipeline.resolve_format)
    weight: float
    options: Any  # beam_sft.convert.options.ConvertOptions
    default_format: str = "openai"  # the source's main format (from its first rows), for rows that show none
    reasoning: Any = None  # beam_sft.reason.config.TeacherConfig: the cache-reading teacher fills (prepare/teacher.py)
    reasoning_refusals: str | None = None  # the teacher pass's failed requests and their codes (JSON)


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
    max_chars: int | None = None  # rendered text longer than this is too_long untokenized (length.char_bound)


@dataclass
class WorkerState:
    tokenizer: Any
    encoder: Any
    counter: Any = None  # beam_sft.prepare.progress.Counter, inherited by forked workers
    ahead: Any = None  # beam_sft.prepare.convert_ahead.Ahead: batches converted while the tokenizer loaded


@dataclass(frozen=True)
class Pending:
    """A converted row waiting to be encoded."""

    row: dict
    source: str
    row_index: int
    copies: int
    chars: int = 0  # length of the record as read (JSON text)
    format: str = ""  # the format that read it
    row_json: str | None = None  # the row column: ``row`` as JSON (``row_column``), made once


@dataclass(frozen=True)
class Done:
    """A record with its verdict and no row to write: rejected, or valid and mixed out."""

    source: str
    row_index: int
    status: str
    reject: str | None = None
    format: str = ""


def install_state(job: EncodeJob, tokenizer, encoder, counter=None, ahead=None) -> WorkerState:
    """Put the tokenizer, a warmed encoder (a progress counter, the batches converted ahead) where
    forked workers find them."""
    state = WorkerState(tokenizer, encoder, counter, ahead)
    _STATE[job.key] = state
    return state


def _state(job: EncodeJob) -> WorkerState:
    state = _STATE.get(job.key)
    if state is None:  # a spawned (not forked) worker: load from disk
        tokenizer = load_tokenizer(job.tokenizer_dir)
        state = install_state(job, tokenizer, make_encoder(job.encoder, tokenizer))
    return state


def decode(text: str, error: str, byte: int | None = None):
    """The record as read: decoded JSON, or a BadRecord the converter rejects with its reason
    (worded as convert's reader words it: ``sources.bad_line``)."""
    if error:
        return BadRecord(text, **json.loads(error))
    try:
        return jsontext.loads(text)
    except (ValueError, RecursionError) as exc:
        return (bad_line(text, byte, exc) if byte is not None
                else BadRecord(text, f"not valid JSON: {exc}", code=jsontext.reason(exc)))


def iter_records(records_file, jobs):
    """``(source job, decoded record, label, row)`` for every record of the records file, in order
    (the teacher pass before encoding reads them so: ``prepare/teacher.py``)."""
    for index in range(records_file.num_batches):
        batch = records_file.batch(index)
        columns = tuple(batch.column(name).to_pylist() for name in RECORD_COLUMNS)
        for text, error, byte, source_id, row_index, file, file_row in zip(*columns, strict=True):
            source = jobs[source_id]
            yield source, decode(text, error, byte), file or source.label, row_index if file_row is None else file_row


def convert_records(columns: tuple[list, ...], job: EncodeJob) -> list[Pending | Done]:
    """Decode, convert and mix records given as ``RECORD_COLUMNS`` columns; ``--format auto`` reads
    each row by the format its own shape shows, as ``beam-sft convert`` does."""
    out: list[Pending | Done] = []
    for text, error, byte, source_id, row_index, file, file_row in zip(*columns, strict=True):
        source = job.sources[source_id]
        raw = decode(text, error, byte)
        fmt = (conversion.resolve_format(raw, source.options, source.default_format) if source.format == "auto"
               else source.format)
        fill = None
        if source.reasoning is not None:
            from beam_sft.prepare.teacher import cache_reader

            fill = cache_reader(job.key, source_id, source)
        label, row = file or source.label, row_index if file_row is None else file_row
        # (the kept row's number check is made where it is serialized for the row column: ``row_column``)
        result = conversion.convert_row(raw, format=fmt, options=source.options, source=label, row=row, fill=fill,
                                        text=None if isinstance(raw, BadRecord) else text, late_check=False)
        row_text = None
        if not isinstance(result, Rejection):
            row_text = row_column(result)
            if isinstance(row_text, Rejection):
                result = row_text.at(source=label, row=row, raw=raw)
        if isinstance(result, Rejection):
            line = reject_json(placed(result.to_json(), source.label, label, row_index))
            out.append(Done(source.label, row_index, result.code, line, fmt))
            continue
        # A row the mix gives no copy is still encoded and length-checked: its verdict (kept, too_long,
        # no_trained_tokens) must not depend on its source's weight.
        n = copies(source.weight, seed=job.seed, source=source.label, row=row_index)
        out.append(Pending(result, source.label, row_index, n, len(text), fmt, row_text))
    return out


def row_column(row: dict) -> str | Rejection:
    """The row column's text for a converted row (``json.dumps(row, ensure_ascii=False)``), or the
    rejection ``convert_row``'s own number check (``late_rejection``) gives it: one serialization
    does both, strict (no NaN or Infinity) and encoded once to UTF-8 (no lone surrogate), and only a
    row that fails it is looked at again, by the check itself, which names the place: a message by
    its source entry, ``meta.places`` (``convert_row(late_check=False)`` leaves them there; they are
    taken off ``row`` here, never written)."""
    places = conversion.take_places(row)
    try:
        text = json.dumps(row, ensure_ascii=False, allow_nan=False)
        if not text.isascii():
            text.encode("utf-8")
        return text
    except (ValueError, UnicodeEncodeError, TypeError, RecursionError):
        late = conversion.late_rejection(row, places)
        # (what the check does not refuse, e.g. a surrogate in meta, is serialized as it always was)
        return late if late is not None else json.dumps(row, ensure_ascii=False)


def _apply_length_policy(job: EncodeJob, encoder, row: dict, encoded):
    """``(row, encoded, trimmed_messages)`` within max_length, or Rejection."""
    length = len(encoded.input_ids)
    if job.max_length is None or length <= job.max_length:
        return row, encoded, 0
    if job.length_policy == "drop":
        raise too_long(length, job.max_length)
    trimmed, encoded = fit_by_trimming(row, length, job.max_length, encoder.encode)
    return trimmed, encoded, len(row["messages"]) - len(trimmed["messages"])


def encode_items(items: list[Pending | Done], job: EncodeJob, encoder):
    """The output table of converted items: encoded, length-checked, one row per copy or per reject."""
    out = _Columns()
    pending = [item for item in items if isinstance(item, Pending)]
    encoded_rows = iter(encoder.encode_batch([p.row for p in pending], plain=True, max_chars=job.max_chars))
    for item in items:
        if isinstance(item, Done):
            out.done(item)
            continue
        encoded = next(encoded_rows)
        fallback = bool(getattr(encoded, "fallback", False))
        try:
            if isinstance(encoded, Rejection):
                raise encoded
            row, encoded, dropped = _apply_length_policy(job, encoder, item.row, encoded)
            trained = int(np.count_nonzero(encoded.assistant_masks))
            if not trained:
                raise Rejection("no_trained_tokens", "no token is left in the loss after weights")
        except Rejection as exc:
            out.done(Done(item.source, item.row_index, exc.code, _reject(item, exc), item.format), fallback)
            continue
        if not item.copies:  # valid by every rule, and the mix gave it no copy
            out.done(Done(item.source, item.row_index, MIXED_OUT, format=item.format), fallback)
            continue
        row_text = item.row_json if row is item.row and item.row_json is not None else json.dumps(row, ensure_ascii=False)
        out.kept(encoded, row_text, item, trained, dropped, fallback,
                 _reasoning_status(row), native=bool(getattr(encoded, "native", False)))
    return out.table()


def _reasoning_status(row: dict) -> str:
    """The kept row's trained turns by reasoning source and its teacher refusals (the report's
    ``reasoning`` section), as the ``reasoning`` status column holds them."""
    from beam_sft.convert.rows import judge_counts, reasoning_counts

    sources, refused = reasoning_counts(row)
    verdicts = judge_counts(row)
    return json.dumps([sources, refused, verdicts] if verdicts else [sources, refused], separators=(",", ":"))


def _reject(item: Pending, exc: Rejection) -> str:
    """The rejects.jsonl line of a converted row: named by its own file and row (its ``meta``)."""
    meta = item.row.get("meta") or {}
    return reject_line(item.source, meta.get("row", item.row_index), exc.code, exc.detail, item.row,
                       file=meta.get("source"), index=item.row_index)


def process_batch(batch, *, job: EncodeJob, index: int | None = None, skip: int = 0):
    """Convert, mix, encode and length-check one batch of raw records (one ``encode_pool`` task):
    record batch ``index`` of the records file, less its first ``skip`` records.

    Takes an Arrow record batch or table and returns an Arrow table: the token columns are built
    as one flat array each, with no Python object per token. Where the batch was converted ahead
    (``convert_ahead``: the same columns, the same job) its items are read back instead.
    """
    state = _state(job)
    columns = tuple(batch.column(name).to_pylist() for name in RECORD_COLUMNS)
    items = state.ahead.take(index, columns) if state.ahead is not None else None
    if skip:
        columns = tuple(column[skip:] for column in columns)
        items = items[skip:] if items is not None else None
    table = encode_items(items if items is not None else convert_records(columns, job), job, state.encoder)
    if state.counter is not None:
        state.counter.add(len(columns[0]))
    return table


class _Columns:
    """The output batch, built column by column; token lists become one flat Arrow array each."""

    def __init__(self):
        self.ids: list[np.ndarray] = []
        self.masks: list[np.ndarray] = []
        self.rows: list[str] = []
        self.sources: list[str] = []
        self.indices: list[int] = []
        self.trained: list[int] = []
        self.status: list[str] = []
        self.copy: list[int] = []
        self.trimmed: list[int] = []
        self.fallback: list[int] = []
        self.native: list[int] = []
        self.reject: list[str | None] = []
        self.format: list[str] = []
        self.reasoning: list[str] = []

    def _append(self, ids, masks, row: str, source: str, row_index: int, trained: int, status: str, copy: int,
                trimmed: int, fallback: bool, reject: str | None, format: str, reasoning: str = "",
                native: bool = False) -> None:
        self.reasoning.append(reasoning)
        self.native.append(int(native))
        self.ids.append(ids)
        self.masks.append(masks)
        self.rows.append(row)
        self.sources.append(source)
        self.indices.append(row_index)
        self.trained.append(trained)
        self.status.append(status)
        self.copy.append(copy)
        self.trimmed.append(trimmed)
        self.fallback.append(int(fallback))
        self.reject.append(reject)
        self.format.append(format)

    def kept(self, encoded, row_json: str, item: Pending, trained: int, trimmed: int, fallback: bool,
             reasoning: str = "", native: bool = False) -> None:
        for copy in range(item.copies):
            self._append(encoded.input_ids, encoded.assistant_masks, row_json, item.source, item.row_index, trained,
                         KEPT, copy, trimmed, fallback and copy == 0, None, item.format, reasoning, native)

    def done(self, item: Done, fallback: bool = False) -> None:
        self._append(_NO_IDS, _NO_MASK, "", item.source, item.row_index, 0, item.status, 0, 0, fallback, item.reject,
                     item.format)

    def table(self):
        import pyarrow as pa

        # (arrow_arrays: pyarrow.array's arrays without the pandas import pyarrow.array makes)
        lengths = np.fromiter((len(a) for a in self.ids), dtype=np.int64, count=len(self.ids))
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        flat_ids = np.concatenate(self.ids) if self.ids else np.zeros(0, np.int32)
        flat_masks = np.concatenate(self.masks) if self.masks else np.zeros(0, np.int8)
        return pa.table({
            "input_ids": arrays.int_lists(offsets, flat_ids.astype(np.int32, copy=False), pa.list_(pa.int32())),
            "assistant_masks": arrays.int_lists(offsets, flat_masks.astype(np.int8, copy=False), pa.list_(pa.int8())),
            "row": arrays.strings(self.rows),
            "source": arrays.strings(self.sources),
            "row_index": arrays.integers(self.indices, pa.int64()),
            "num_tokens": arrays.integers(lengths.astype(np.int32), pa.int32()),
            "num_trained": arrays.integers(self.trained, pa.int32()),
            "status": arrays.strings(self.status),
            "copy": arrays.integers(self.copy, pa.int32()),
            "trimmed_messages": arrays.integers(self.trimmed, pa.int32()),
            "fallback": arrays.integers(self.fallback, pa.int8()),
            "native": arrays.integers(self.native, pa.int8()),
            "reject": arrays.strings(self.reject, pa.large_string()),
            "format": arrays.strings(self.format),
            "reasoning": arrays.strings(self.reasoning),
        })


_NO_IDS = np.zeros(0, np.int32)
_NO_MASK = np.zeros(0, np.int8)


OUTPUT_COLUMNS = {**COLUMNS, **STATUS_COLUMNS}  # the encode pass's output tables


def output_schema():
    """The Arrow schema of the encode pass's output tables (``OUTPUT_COLUMNS``)."""
    return arrow_schema(OUTPUT_COLUMNS)


@functools.cache
def _kept_scalar():
    """``KEPT`` as an Arrow scalar (a Python str there is converted through ``pyarrow.array``, which
    imports pandas: ``arrow_arrays``)."""
    return arrays.strings([KEPT])[0]


def count_table(table, counts, tokens) -> None:
    """Add an output table's rows to ``counts`` (``beam_sft.dataset_folder.report_json.Counts``) and the kept
    rows' lengths to ``tokens`` (``TokenStats``): one table of the encode pass at a time."""
    import pyarrow.compute as pc

    reasoning = table.column("reasoning").to_pylist()
    native = table.column("native").to_pylist()
    table = table.select(["source", "status", "copy", "trimmed_messages", "fallback", "format", "num_tokens",
                          "num_trained"])
    tokens.add_batch(table.filter(pc.equal(table.column(1), _kept_scalar())))
    sources, status, copy, trimmed, fallback, formats = (c.to_pylist() for c in table.columns[:6])
    for source, state, n, cut, fell, fmt, why, nat in zip(sources, status, copy, trimmed, fallback, formats,
                                                         reasoning, native, strict=True):
        entry = counts.sources[source]
        if state == KEPT:
            entry["rows_out"] += 1
            counts.totals["native_rows"] += nat  # rows of the dataset, copies included, as rows_out
        if n:
            continue
        entry["read"] += 1
        if fmt:
            counts.formats[source][fmt] += 1
        counts.totals["fallback_rows"] += fell
        if state == KEPT:
            entry["kept"] += 1
            entry["selected"] += 1
            if why:
                turns, refused, *verdicts = json.loads(why)
                counts.reasoning.update(turns)
                counts.teacher_refused.update(refused)
                counts.judge_verdicts.update(verdicts[0] if verdicts else {})
            if cut:
                counts.totals["trimmed_rows"] += 1
                counts.totals["trimmed_messages"] += cut
        elif state == MIXED_OUT:
            entry["kept"] += 1
        else:
            counts.rejected[source][state] += 1
            if state in TEACHER_CODES:  # a row the policy dropped: its first refused turn's code
                counts.teacher_refused[state] += 1


def reject_lines(table) -> list[str]:
    """The rejects.jsonl lines of an output table, in row order."""
    return [line for line in table.column("reject").to_pylist() if line is not None]


def kept_rows(table):
    """The table's ``kept`` rows, without ``STATUS_COLUMNS``: what the prepared dataset holds."""
    import pyarrow.compute as pc

    keep = pc.equal(table.column("status"), _kept_scalar())
    kept = table if pc.all(keep, skip_nulls=False).as_py() else table.filter(keep)  # (all kept: no copy)
    return kept.drop_columns(list(STATUS_COLUMNS))
