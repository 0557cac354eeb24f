"""Streaming readers for local sources: ``(row index, raw record)`` pairs, one at a time.

Shapes read (by content, not only by extension):

- JSON Lines (``.jsonl``/``.ndjson``, or a ``.json`` whose first line is a whole JSON value):
  one record per non-blank line; a line that is not JSON becomes a ``BadRecord`` (the run goes on).
- A JSON array (``[...]``): its items, decoded incrementally from 1 MiB reads, so memory holds one
  item at a time. An array whose first item looks like a chat message (a ``role`` key) is one
  conversation: the whole array is yielded as a single record. A syntax error inside an array
  cannot be resynchronised: the rest of the file becomes one ``BadRecord``.
- A single JSON object spread over lines (a one-conversation file): one record.
- Parquet (``.parquet``): record batches through pyarrow. Arrow gives every struct the union of
  all keys and fills the missing ones with null, so null-valued keys are dropped from Parquet
  and ``datasets`` records (a genuine null argument cannot be told apart there).
- A directory: a ``datasets.save_to_disk`` directory (one split), else its data files in sorted
  order as one source with a running row index.
- A ``datasets`` dataset (a hub id ``org/name[:config][@split]``, or a folder laid out as a hub
  dataset repository): streamed through ``load_dataset`` (``beam_sft.data.hub``).

Row indices count records from 0 (blank lines are not records).

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "a.json").write_text('[{"x": 1},\\n {"x": 2}]')
>>> list(iter_records(d / "a.json"))
[(0, {'x': 1}), (1, {'x': 2})]
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from beam_sft.data import hub
from beam_sft.errors import BeamError

CHUNK = 1 << 20
DATA_SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet")


@dataclass(frozen=True)
class BadRecord:
    """A record that could not be decoded: its text and the decoder's complaint."""

    text: str
    error: str


def iter_records(path: str | Path | hub.DatasetRef) -> Iterator[tuple[int, Any]]:
    """``(row index, record)`` for every record of a local file or directory, or of a ``datasets``
    dataset (a hub id or a dataset repository folder: ``beam_sft.data.hub`` tells them apart)."""
    source = path if isinstance(path, hub.DatasetRef) else hub.parse_data_arg(path)
    if isinstance(source, hub.DatasetRef):
        for index, record in hub.iter_dataset(source):
            yield index, _drop_nulls(record)
        return
    path = Path(path)
    if path.is_dir():
        yield from _iter_dir(path)
        return
    if not path.is_file():
        raise BeamError(f"{path}: no such file or directory")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        yield from enumerate(_iter_parquet(path))
    elif suffix in (".jsonl", ".ndjson"):
        yield from enumerate(_iter_lines(path))
    else:
        yield from enumerate(_iter_json(path))


def _iter_dir(path: Path) -> Iterator[tuple[int, Any]]:
    if (path / "dataset_info.json").is_file() or (path / "state.json").is_file():
        yield from enumerate(_iter_saved_dataset(path))
        return
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in DATA_SUFFIXES)
    if not files:
        raise BeamError(f"{path}: no data files ({', '.join(DATA_SUFFIXES)}) in the directory")
    index = 0
    for file in files:
        for _, record in iter_records(file):
            yield index, record
            index += 1


def _iter_lines(path: Path) -> Iterator[Any]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except (ValueError, RecursionError) as exc:
                yield BadRecord(line.rstrip("\n"), f"not valid JSON: {exc}")


def _first_char(fh: IO[str]) -> str:
    while True:
        ch = fh.read(1)
        if not ch or not ch.isspace():
            return ch


def _iter_json(path: Path) -> Iterator[Any]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        first = _first_char(fh)
        if first == "[":
            yield from _iter_array(fh)
            return
    if not first:
        return
    with open(path, encoding="utf-8", errors="replace") as fh:
        first_line = next((line for line in fh if line.strip()), "")
    try:
        json.loads(first_line)
        whole_line = True
    except (ValueError, RecursionError):
        whole_line = False
    if whole_line:
        yield from _iter_lines(path)
        return
    text = path.read_text(encoding="utf-8", errors="replace")
    yield from _iter_concatenated(text)


def _iter_concatenated(text: str) -> Iterator[Any]:
    """One pretty-printed object, or several one after another."""
    decoder = json.JSONDecoder()
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return
        try:
            value, pos = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError) as exc:
            yield BadRecord(text[pos:], f"not valid JSON: {exc}")
            return
        yield value


_EMPTY = object()


def _iter_array(fh: IO[str]) -> Iterator[Any]:
    """Items of a JSON array whose ``[`` was just read; whole-array conversations are merged."""
    items = _iter_array_items(fh)
    first = next(items, _EMPTY)
    if first is _EMPTY:
        return
    if _looks_like_message(first):
        conversation = [first]
        for item in items:
            if isinstance(item, BadRecord):
                yield BadRecord(json.dumps(conversation, ensure_ascii=False)[:1000] + item.text, item.error)
                return
            conversation.append(item)
        yield conversation
        return
    yield first
    yield from items


def _looks_like_message(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and isinstance(item.get("role"), str)
        and not ("messages" in item or "conversations" in item)
    )


def _iter_array_items(fh: IO[str]) -> Iterator[Any]:
    decoder = json.JSONDecoder()
    buf, pos, eof = "", 0, False
    need_comma = False
    read_size = CHUNK

    def refill(grow: bool = False) -> bool:
        # Reads double while one item does not fit (so a huge item is decoded O(log n) times,
        # not once per chunk) and fall back to CHUNK once it has been decoded.
        nonlocal buf, pos, eof, read_size
        if eof:
            return False
        read_size = read_size * 2 if grow else CHUNK
        chunk = fh.read(read_size)
        buf, pos = buf[pos:] + chunk, 0
        eof = not chunk
        return bool(chunk)

    refill()
    while True:
        while True:
            while pos < len(buf) and buf[pos].isspace():
                pos += 1
            if pos < len(buf) or not refill():
                break
        if pos >= len(buf):
            yield BadRecord("", "the JSON array is not closed")
            return
        if buf[pos] == "]":
            return
        if need_comma:
            if buf[pos] != ",":
                yield BadRecord(
                    buf[pos:] + fh.read(), f"expected ',' or ']' in the JSON array at {buf[pos : pos + 20]!r}"
                )
                return
            pos += 1
            need_comma = False
            continue
        grow = False
        while True:
            try:
                value, end = decoder.raw_decode(buf, pos)
            except (ValueError, RecursionError) as exc:
                if refill(grow):
                    grow = True
                    continue
                yield BadRecord(buf[pos:], f"not valid JSON: {exc}")
                return
            # A value is complete only when a delimiter follows: "-0" may be "-0.5" after the
            # next read, "tru" part of "true".
            after = end
            while after < len(buf) and buf[after].isspace():
                after += 1
            if (after == len(buf) or buf[after] not in ",]") and refill(grow):
                grow = True
                continue
            break
        yield value
        pos = end
        need_comma = True


def _drop_nulls(value: Any) -> Any:
    """Arrow's null-filled struct fields removed, at every depth (iterative: rows can be deep)."""
    root = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        item = parent[key]
        if isinstance(item, dict):
            item = {k: v for k, v in item.items() if v is not None}
            parent[key] = item
            stack.extend((item, k) for k in item)
        elif isinstance(item, list):
            item = list(item)
            parent[key] = item
            stack.extend((item, i) for i in range(len(item)))
    return root[0]


def _iter_parquet(path: Path) -> Iterator[Any]:
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(path).iter_batches(batch_size=256):
        for record in batch.to_pylist():
            yield _drop_nulls(record)


def _iter_saved_dataset(path: Path) -> Iterator[Any]:
    import datasets

    ds = datasets.load_from_disk(str(path))
    if isinstance(ds, datasets.DatasetDict):
        if len(ds) != 1:
            raise BeamError(f"{path}: a DatasetDict with splits {sorted(ds)}; point at one split's directory")
        ds = next(iter(ds.values()))
    for record in ds:
        yield _drop_nulls(record)
