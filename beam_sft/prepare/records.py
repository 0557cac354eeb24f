"""The one serial step of ``prepare``: put every raw record of this shard into one Arrow file.

Records are stored as JSON text, undecoded where the source is JSON Lines (reading lines is all the
main process does; decoding, converting and encoding happen in the ``datasets.map`` workers).
Other shapes (JSON arrays, Parquet, ``save_to_disk`` folders) go through ``beam_sft.data.sources``.
Memory stays flat: records go to disk a batch at a time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from beam_sft.config_utils import from_dict
from beam_sft.data.hub import dataset_source
from beam_sft.prepare.batch import SourceJob
from beam_sft.prepare.config import PrepareConfig, SourceSpec
from beam_sft.prepared.report import SourceInfo

LINE_SUFFIXES = (".jsonl", ".ndjson")
_BATCH = 1024


def convert_options(spec: SourceSpec, config: PrepareConfig, index: int):
    """The converter options of one source: its ``convert`` mapping, ``column_map`` as ``columns``,
    and the run's ``missing_reasoning`` unless the source sets its own."""
    from beam_sft.convert.options import ConvertOptions

    raw = {"missing_reasoning": config.missing_reasoning, **spec.convert}
    if spec.column_map:
        raw["columns"] = {**raw.get("columns", {}), **spec.column_map}
    return from_dict(ConvertOptions, raw, f"sources[{index}].convert")


def iter_raw(path: str | Path) -> Iterator[tuple[int, str, str]]:
    """``(row index, JSON text, error)`` for every record; ``error`` is set for undecodable ones.

    JSON Lines files are read line by line without decoding, with the same rules as
    ``beam_sft.data.sources`` (blank lines are not records).
    """
    from beam_sft.data.sources import BadRecord, iter_records

    if isinstance(path, (str, Path)) and Path(path).is_file() and Path(path).suffix.lower() in LINE_SUFFIXES:
        index = 0
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    continue
                yield index, line.rstrip("\n"), ""
                index += 1
        return
    for index, record in iter_records(path):
        if isinstance(record, BadRecord):
            yield index, record.text, record.error
        else:
            yield index, json.dumps(record, ensure_ascii=False), ""


def write_records(config: PrepareConfig, out_file: Path) -> tuple[list[SourceJob], list[SourceInfo], int]:
    """Write this shard's raw records of every source to ``out_file`` (an Arrow stream)."""
    import pyarrow as pa

    from beam_sft.convert.pipeline import SourceConversion

    schema = pa.schema([("raw", pa.large_string()), ("error", pa.string()), ("source_id", pa.int32()),
                        ("row_index", pa.int64())])
    jobs, infos = [], []
    total = 0
    out_file.parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(out_file), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        for source_id, spec in enumerate(config.sources):
            options = convert_options(spec, config, source_id)
            location = dataset_source(spec)  # a local path, or a datasets dataset (issue 15)
            detected = SourceConversion(location, format=spec.format, options=options, source=spec.label)
            jobs.append(SourceJob(spec.label, detected.format, spec.weight, options))
            infos.append(SourceInfo(spec.label, spec.path, detected.format, detected.detection, spec.weight))
            batch: dict[str, list] = {"raw": [], "error": [], "row_index": []}

            def flush(batch=batch, source_id=source_id) -> None:
                if batch["raw"]:
                    n = len(batch["raw"])
                    writer.write_batch(pa.record_batch(
                        [pa.array(batch["raw"], pa.large_string()), pa.array(batch["error"], pa.string()),
                         pa.array([source_id] * n, pa.int32()), pa.array(batch["row_index"], pa.int64())],
                        schema=schema))
                    for column in batch.values():
                        column.clear()

            for index, text, error in iter_raw(location):
                if index % config.num_shards != config.shard_index:
                    continue
                batch["raw"].append(text)
                batch["error"].append(error)
                batch["row_index"].append(index)
                total += 1
                if len(batch["raw"]) >= _BATCH:
                    flush()
            flush()
    return jobs, infos, total
