"""The one place that knows how ``datasets`` lays a saved dataset out on disk (its ``save_to_disk``
folder), so that prepare and merge-shards can write one, and verify and the statistics can read one,
batch by batch with plain reads instead of memory maps.

Why not ``Dataset.save_to_disk`` / ``load_from_disk``: both go through memory-mapped Arrow files,
and every page of a mapping a process has touched counts in its resident set until the mapping
goes; saving a dataset reads every page of it in one process, so that process's RSS grows with the
data. Reading and writing through file descriptors (``pyarrow.OSFile``) leaves the pages in the
page cache, where they count against nobody.

The layout (datasets 5.x), which ``tests/dataset_folder/test_arrow_dataset.py`` compares with what
``save_to_disk`` writes, field by field, so that a change in ``datasets`` fails a test here:

    DIR/data-00000-of-0000N.arrow   Arrow IPC *stream* files, the schema carrying ``huggingface``
                                    metadata (the features), batches of BATCH_ROWS rows: what
                                    ``datasets``' ArrowWriter writes, byte for byte
    DIR/state.json                  the data files, the fingerprint, the format (none), the split (none)
    DIR/dataset_info.json           ``DatasetInfo(features=...)`` as a dict, top-level keys sorted
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

from beam_sft.arrow_arrays import integers
from beam_sft.dataset_folder.layout import COLUMNS, STATE_FILE, arrow_schema, features_dict
from beam_sft.dataset_folder.layout import DATASET_INFO_FILE as INFO_FILE

# save_to_disk's defaults: shards of at most this many bytes, record batches of at most this many
# rows, and (for long rows) of about this many bytes
MAX_SHARD_BYTES = 500 << 20
BATCH_ROWS = 1000
MAX_BATCH_BYTES = 100 << 20


def _shard_name(index: int, count: int) -> str:
    return f"data-{index:05d}-of-{count:05d}.arrow"


class DatasetWriter:
    """Write a dataset folder of ``columns`` (COLUMNS' notation) a table at a time (rows in the order
    written); ``close()`` finishes it. Only pyarrow: ``datasets`` is not imported (a CLI start pays
    half a second for it); the tests compare the files with what ``save_to_disk`` writes.

    Tables are buffered up to BATCH_ROWS rows (so that the files hold batches of the size
    ``save_to_disk`` writes), or MAX_BATCH_BYTES when rows are long; a new shard starts once the
    current one reaches ``max_shard_bytes``. Memory: one buffered batch (at most about
    MAX_BATCH_BYTES and one table). On an error the caller removes the folder (it is a staging one).
    """

    def __init__(self, directory: str | Path, columns: dict[str, str] | None = None, *, fingerprint: str,
                 max_shard_bytes: int = MAX_SHARD_BYTES):
        self.directory = Path(directory)
        self.columns = dict(COLUMNS if columns is None else columns)
        self.schema = arrow_schema(self.columns)
        self.fingerprint = fingerprint
        self.max_shard_bytes = max_shard_bytes
        self.rows = 0
        self._pending: list = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self._writer = None
        self._sink = None
        self._shards: list[Path] = []
        self._shard_bytes = 0

    def write(self, table) -> None:
        """Append the rows of ``table`` (an Arrow table or record batch; cast to the features' schema,
        columns in its order)."""
        import pyarrow as pa

        if not table.num_rows:
            return
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        table = table.select(self.schema.names)
        if not table.schema.equals(self.schema, check_metadata=False):
            table = table.cast(self.schema)
        self._pending.append(table)
        self._pending_rows += table.num_rows
        self._pending_bytes += table.nbytes
        if self._pending_bytes >= MAX_BATCH_BYTES:
            self._flush()
        elif self._pending_rows >= BATCH_ROWS:
            self._flush(whole=True)

    def _flush(self, whole: bool = False) -> None:
        """Write what is buffered (``whole``: only whole batches of BATCH_ROWS; the rest stays)."""
        import pyarrow as pa

        if not self._pending:
            return
        table = pa.concat_tables(self._pending)
        cut = table.num_rows - table.num_rows % BATCH_ROWS if whole else table.num_rows
        rest = table.slice(cut)
        table = table.slice(0, cut)
        self._pending, self._pending_rows = ([rest], rest.num_rows) if rest.num_rows else ([], 0)
        self._pending_bytes = rest.nbytes if rest.num_rows else 0
        if not table.num_rows:
            return
        if self._writer is None:
            path = self.directory / f".shard-{len(self._shards):05d}.arrow"
            self._shards.append(path)
            self._sink = pa.OSFile(str(path), "wb")
            self._writer = pa.ipc.new_stream(self._sink, self.schema)
            self._shard_bytes = 0
        # as ArrowWriter.write_table: one chunk, then batches of BATCH_ROWS
        self._writer.write_table(table.combine_chunks(), BATCH_ROWS)
        self.rows += table.num_rows
        self._shard_bytes += table.nbytes
        if self._shard_bytes >= self.max_shard_bytes:
            self._finish_shard()

    def _finish_shard(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            finally:
                self._sink.close()
                self._writer = self._sink = None

    def close(self) -> int:
        """Write what is buffered, name the shards, write state.json and dataset_info.json; returns rows."""
        self._flush()
        self._finish_shard()
        names = []  # (no rows: no shard, as save_to_disk writes)
        for index, path in enumerate(self._shards):
            name = _shard_name(index, len(self._shards))
            os.replace(path, self.directory / name)
            names.append(name)
        _write_state(self.directory, names, self.fingerprint, list(self.schema.names))
        _write_info(self.directory, self.columns)
        return self.rows

    def abort(self) -> None:
        """Close an unfinished shard (the caller removes the folder)."""
        if self._writer is not None:
            try:
                self._writer.close()
            finally:
                self._sink.close()
                self._writer = self._sink = None


def _write_state(directory: Path, names: list[str], fingerprint: str, columns: list[str]) -> None:
    # What save_to_disk records for a dataset with its columns selected and no format set.
    state = {
        "_data_files": [{"filename": name} for name in names],
        "_fingerprint": fingerprint,
        "_format_columns": sorted(columns),
        "_format_kwargs": {},
        "_format_type": None,
        "_output_all_columns": False,
        "_split": None,
    }
    with open(directory / STATE_FILE, "w", encoding="utf-8") as fh:
        json.dump(state, fh, indent=2, sort_keys=True)


def _write_info(directory: Path, columns: dict[str, str]) -> None:
    # asdict(DatasetInfo(features=...)): the empty strings and the features (None fields are left out)
    info = {"description": "", "citation": "", "homepage": "", "license": "", "features": features_dict(columns)}
    with open(directory / INFO_FILE, "w", encoding="utf-8") as fh:
        # save_to_disk sorts the first level only (sorting deeper would reorder the features)
        json.dump({key: info[key] for key in sorted(info)}, fh, indent=2)


def data_files(directory: str | Path) -> list[Path]:
    """The dataset's Arrow files, in row order (from state.json)."""
    directory = Path(directory)
    with open(directory / STATE_FILE, encoding="utf-8") as fh:
        state = json.load(fh)
    return [directory / entry["filename"] for entry in state["_data_files"]]


def dataset_file_names(directory: str | Path) -> list[str]:
    """Every file the saved dataset is made of, relative to ``directory``: state.json,
    dataset_info.json, then its Arrow files in row order (what a view of the dataset links to)."""
    directory = Path(directory)
    return [STATE_FILE, INFO_FILE] + [path.relative_to(directory).as_posix() for path in data_files(directory)]


def features_of(directory: str | Path):
    """The dataset's ``datasets.Features`` (from dataset_info.json)."""
    from datasets import Features

    with open(Path(directory) / INFO_FILE, encoding="utf-8") as fh:
        return Features.from_dict(json.load(fh)["features"])


def iter_batches(directory: str | Path, columns: list[str] | tuple[str, ...] | None = None) -> Iterator:
    """The dataset's record batches in row order (only ``columns``, when given), read with plain
    reads: a batch is in this process's memory while it is used, and nothing stays mapped."""
    import pyarrow as pa

    for path in data_files(directory):
        with pa.OSFile(str(path), "rb") as source:
            reader = pa.ipc.open_stream(source)
            for batch in reader:
                yield batch.select(list(columns)) if columns is not None else batch


def small_columns(directory: str | Path, columns: list[str] | tuple[str, ...]) -> Iterator:
    """Tables of a few small ``columns`` of the dataset, record batch by record batch, in row order.

    Each data file is memory-mapped while it is read (only the pages of these columns are touched,
    not the token columns beside them), and its batches are copied out, so the mapping goes with
    the file: what stays resident does not grow with the files read."""
    import numpy as np
    import pyarrow as pa

    for path in data_files(directory):
        with pa.memory_map(str(path)) as source:
            for batch in pa.ipc.open_stream(source):
                small = batch.select(list(columns))
                yield pa.Table.from_batches([small]).take(integers(np.arange(small.num_rows)))  # a copy


class RowReader:
    """Rows of a saved dataset by position, each record batch read with one ``pread`` when needed.

    The index (file, byte range and rows of every record batch) is built once, from the messages'
    framing alone (a memory map that touches only the small message headers, then closed). Reads
    go through ``pyarrow.OSFile`` (opened per process: a forked reader opens its own), so nothing
    stays mapped and a process's resident set does not grow with the rows it reads."""

    def __init__(self, directory: str | Path):
        import numpy as np

        self.files = [str(p) for p in data_files(directory)]
        self.schema = None
        where: list[tuple[int, int, int]] = []  # (file, offset, length) per batch
        rows: list[int] = []
        for number, path in enumerate(self.files):
            schema, batches = _index_stream(path)
            self.schema = self.schema or schema
            for offset, length, n in batches:
                where.append((number, offset, length))
                rows.append(n)
        self._where = where
        self._starts = np.concatenate([[0], np.cumsum(rows, dtype=np.int64)]).astype(np.int64)
        self.num_rows = int(self._starts[-1])
        self._handles: dict[int, object] = {}
        self._pid = None
        self._last: tuple[int, object] | None = None  # (index, record batch) last read

    def _batch(self, k: int):
        import pyarrow as pa

        if self._pid != os.getpid():
            self._handles, self._pid, self._last = {}, os.getpid(), None
        if self._last is not None and self._last[0] == k:
            return self._last[1]
        number, offset, length = self._where[k]
        handle = self._handles.get(number)
        if handle is None:
            handle = self._handles[number] = pa.OSFile(self.files[number], "rb")
        batch = pa.ipc.read_record_batch(pa.ipc.read_message(handle.read_at(length, offset)), self.schema)
        # Kept until another is read: readers go through a record batch (a thousand rows, megabytes)
        # in slices of a hundred or so, and would otherwise read it again for each.
        self._last = (k, batch)
        return batch

    def slice(self, start: int, stop: int):
        """Rows ``start:stop`` as one Arrow table."""
        import numpy as np
        import pyarrow as pa

        stop = min(stop, self.num_rows)
        batches = []
        if start < stop:
            first = int(np.searchsorted(self._starts, start, side="right")) - 1
            last = int(np.searchsorted(self._starts, stop - 1, side="right")) - 1
            for k in range(first, last + 1):
                lo, hi = max(start, int(self._starts[k])), min(stop, int(self._starts[k + 1]))
                batches.append(self._batch(k).slice(lo - int(self._starts[k]), hi - lo))
        return pa.Table.from_batches(batches, schema=self.schema)

    def take(self, positions):
        """Rows at ``positions`` (in that order) as one Arrow table."""
        import numpy as np
        import pyarrow as pa

        positions = np.asarray(positions, dtype=np.int64)
        if len(positions) and (positions.min() < 0 or positions.max() >= self.num_rows):
            raise IndexError(f"row positions out of range 0..{self.num_rows - 1}")
        owner = np.searchsorted(self._starts, positions, side="right") - 1
        parts = []
        for k in np.unique(owner).tolist():
            picked = np.flatnonzero(owner == k)
            batch = self._batch(k).take(integers(positions[picked] - self._starts[k]))
            parts.append((picked, batch))
        if not parts:
            return pa.Table.from_batches([], schema=self.schema)
        table = pa.Table.from_batches([b for _, b in parts], schema=self.schema)
        order = np.argsort(np.concatenate([p for p, _ in parts]), kind="stable")
        return table.take(integers(order.astype(np.int64)))

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles, self._last = {}, None


def _index_stream(path: str):
    """``(schema, [(offset, length, rows)])`` of the record batches of an Arrow IPC stream file."""
    import pyarrow as pa

    out = []
    with pa.memory_map(path) as source:
        reader = pa.ipc.MessageReader.open_stream(source)
        schema = pa.ipc.read_schema(reader.read_next_message())
        while True:
            offset = source.tell()
            try:
                message = reader.read_next_message()
            except StopIteration:
                break
            if message.type != "record batch":  # (no dictionaries in these datasets)
                raise ValueError(f"{path}: unexpected Arrow message {message.type!r}")
            out.append((offset, source.tell() - offset, pa.ipc.read_record_batch(message, schema).num_rows))
    return schema, out


class SavedDataset:
    """A saved dataset opened for reading without ``datasets`` (whose import is half a second of every
    CLI start): its ``column_names`` and length from the files' own schema and record batches, rows by
    position through a ``RowReader``. ``open_saved`` raises what ``load_from_disk`` raises for a folder
    that is not one: FileNotFoundError (no state.json, or a data file missing), ValueError (state.json
    unreadable, or a dataset dictionary), IndexError (no data files: no rows)."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.reader = RowReader(self.directory)
        self.column_names = list(self.reader.schema.names)

    def __len__(self) -> int:
        return self.reader.num_rows

    def rows(self, start: int, stop: int, columns: list[str] | tuple[str, ...]):
        """Rows ``start:stop`` of ``columns`` as one Arrow table."""
        return self.reader.slice(start, stop).select(list(columns))


DICT_FILE = "dataset_dict.json"  # what save_to_disk writes for a DatasetDict instead of state.json


def open_saved(directory: str | Path) -> SavedDataset:
    """The saved dataset at ``directory`` (see ``SavedDataset`` for what is raised where it is not one)."""
    directory = Path(directory)
    if not (directory / STATE_FILE).is_file() or not (directory / INFO_FILE).is_file():
        if (directory / DICT_FILE).is_file():
            raise ValueError(f"{directory} is a dataset dictionary ({DICT_FILE}), not one dataset")
        raise FileNotFoundError(f"{directory} is not a saved dataset: no {STATE_FILE} and {INFO_FILE} there")
    try:
        files = data_files(directory)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{directory / STATE_FILE}: not the state of a saved dataset ({exc!r})") from exc
    if not files:
        raise IndexError(f"{directory}: no data files (a dataset of no rows)")
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"{path}: a data file state.json lists is not there")
    return SavedDataset(directory)
