"""The one serial step of ``prepare``: put every raw record of this shard into one Arrow file.

The file is an Arrow IPC *file* (random access by record batch) of batches of ``batch_size``
records, one encode task each (``encode_pool``); workers read their batch with plain reads
(``read_batch``), never a memory map, so that their resident set does not grow with the records.

Records are read by convert's reader (``beam_sft.data.sources.iter_raw_located``: the same files of a
directory, the same skips, BOM, bad-byte and unreadable-rest rules as ``beam-sft convert``), stored
as JSON text, undecoded where the source is JSON Lines (reading lines is all the main process does;
decoding, converting and encoding happen in the encode workers; ``convert_ahead`` reads the same
batches through ``record_batches`` in ``head_start``'s child). Each record keeps its
own file and its row in that file (a directory source names them in ``meta`` and rejects.jsonl).
Memory stays flat: records go to disk a batch at a time.
"""

from __future__ import annotations

import json
from pathlib import Path

from beam_sft import arrow_arrays
from beam_sft.data.hub import DatasetRef
from beam_sft.dataset_folder.report_json import SourceInfo
from beam_sft.prepare import shard_plan
from beam_sft.prepare.batch import RECORD_COLUMNS, SourceJob
from beam_sft.prepare.resolved import ResolvedPrepare, source_location


def bad_json(bad) -> str:
    """A BadRecord as the records file's ``error`` value (read back by ``batch.decode``)."""
    return json.dumps({"error": bad.error, "byte": bad.byte, "rest": bad.rest, "more": bad.more, "code": bad.code})


def _schema():
    import pyarrow as pa

    types = {"raw": pa.large_string(), "error": pa.string(), "byte": pa.int64(), "source_id": pa.int32(),
             "row_index": pa.int64(), "file": pa.string(), "file_row": pa.int64()}
    return pa.schema([(name, types[name]) for name in RECORD_COLUMNS])


def write_records(plan: ResolvedPrepare, out_file: Path) -> tuple[list[SourceJob], list[SourceInfo], int]:
    """Write this shard's raw records of every source to ``out_file`` (an Arrow IPC file of batches
    of at most ``plan.batch_size`` records; a source's last batch may be shorter).

    Each source's ``SourceJob`` carries the converter options ``plan`` resolved for it (``resolved.py``).
    """
    import pyarrow as pa

    jobs, infos = [], []
    total = 0
    out_file.parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(out_file), "wb") as sink, pa.ipc.new_file(sink, _schema()) as writer:
        for kind, value in record_batches(plan.sources, plan.batch_size, shard_rows(plan)):
            if kind == "job":
                jobs.append(value)
            elif kind == "info":
                infos.append(value)
            else:
                writer.write_batch(value)
                total += value.num_rows
    return jobs, infos, total


def record_batches(sources, batch_size: int, ranges: list[tuple[int, int]] | None):
    """The records file's content, in order: for each source ``("job", SourceJob)``, then its record
    batches ``("batch", pyarrow.RecordBatch)``, then ``("info", SourceInfo)``. ``sources``: the
    plan's ``ResolvedSource``s (each with ``spec`` and ``options``); ``ranges``: ``shard_rows``.
    ``write_records`` writes it; ``convert_ahead`` converts the same batches before the tokenizer
    has loaded (one reader, so the two cannot disagree on what a batch holds)."""
    import pyarrow as pa

    from beam_sft.convert.pipeline import SourceConversion

    schema = _schema()
    for source_id, resolved in enumerate(sources):
        spec, options = resolved.spec, resolved.options
        location = source_location(spec)  # a local path, a datasets dataset, or a Batch API pair
        detected = SourceConversion(location, format=spec.format, options=options, source=spec.label)
        # detected.options: with infer_tools, the declarations its first pass made from the source
        yield "job", SourceJob(spec.label, spec.format, spec.weight, detected.options, detected.format)
        # A file read on its own (or a streamed dataset) is named by the source's label; the rows of a
        # source of several files (a directory, a dataset repository's split, a Batch API pair) name their file.
        own = location.label if isinstance(location, DatasetRef) else str(Path(location)) if isinstance(
            location, (str, Path)) else None
        unreadable: list[dict] = []
        batch: dict[str, list] = {name: [] for name in RECORD_COLUMNS}
        raws, errors, offsets, indices, files, rows = (batch[n] for n in (
            "raw", "error", "byte", "row_index", "file", "file_row"))

        def flush(batch=batch, source_id=source_id):
            batch["source_id"] = [source_id] * len(batch["raw"])
            out = pa.record_batch([_array(batch[n], schema.field(n).type) for n in RECORD_COLUMNS], schema=schema)
            for column in batch.values():
                column.clear()
            return out

        first, end = ranges[source_id] if ranges is not None else (0, None)
        for index, record in enumerate(shard_plan.iter_source(location)):
            if end is not None and index >= end:
                break  # past this shard's range: the rest of the source is another shard's
            if index < first:
                continue
            if record.bad is not None and record.bad.rest:
                unreadable.append({"file": record.file, "byte": record.bad.byte,
                                   "about_more_records": record.bad.more})
            raws.append(record.text)
            errors.append(bad_json(record.bad) if record.bad else "")
            offsets.append(record.byte)
            indices.append(index)
            files.append(None if record.file == own else record.file)
            rows.append(record.row)
            if len(raws) >= batch_size:
                yield "batch", flush()
        if raws:
            yield "batch", flush()
        yield "info", SourceInfo(spec.label, spec.path, detected.format, detected.detection, spec.weight,
                                 skipped=tuple({"path": str(f.path), "reason": f.reason} for f in detected.skipped),
                                 unreadable=tuple(unreadable))


def _array(values: list, type):
    """A records column (``arrow_arrays``: without the pandas import ``pyarrow.array`` makes)."""
    import pyarrow as pa

    return arrow_arrays.strings(values, type) if pa.types.is_string(type) or pa.types.is_large_string(type) \
        else arrow_arrays.integers(values, type)


def shard_rows(plan: ResolvedPrepare) -> list[tuple[int, int]] | None:
    """This shard's ``[first, end)`` row range of each source (``shard_plan``: contiguous ranges of
    the record stream, so the merged shards keep the unsharded order); None when not sharded."""
    if plan.num_shards == 1:
        return None
    counts = shard_plan.source_counts(plan)
    mine = shard_plan.plan([s.spec.label for s in plan.sources], counts, plan.num_shards)[plan.shard_index]
    rows = {entry["source"]: tuple(entry["rows"]) for entry in mine["sources"]}
    return [rows.get(s.spec.label, (0, 0)) for s in plan.sources]


class RecordsFile:
    """The records file opened for reading by batch (pread through ``pyarrow.OSFile``; no mmap).

    Opened once per process (a forked worker opens its own: a file position must not be shared)."""

    def __init__(self, path: str | Path):
        import pyarrow as pa

        self.path = str(path)
        self._source = pa.OSFile(self.path, "rb")
        self._reader = pa.ipc.open_file(self._source)

    @property
    def num_batches(self) -> int:
        return self._reader.num_record_batches

    def batch(self, index: int):
        return self._reader.get_batch(index)

    def head(self, n: int):
        """``(table, index, skip)``: the first ``n`` records as one table, and where the rest starts
        (the batch ``index`` holding record ``n``, and the records of it that are in the head)."""
        import pyarrow as pa

        batches, rows, index = [], 0, 0
        while index < self.num_batches and rows < n:
            batch = self._reader.get_batch(index)
            batches.append(batch.slice(0, n - rows))
            rows += batches[-1].num_rows
            if batches[-1].num_rows < batch.num_rows:
                return pa.Table.from_batches(batches, schema=self._reader.schema), index, batches[-1].num_rows
            index += 1
        return pa.Table.from_batches(batches, schema=self._reader.schema), index, 0

    def close(self) -> None:
        self._source.close()
