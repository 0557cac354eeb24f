"""Streaming readers for local sources: ``(row index, raw record)`` pairs, one at a time.

Shapes read (by content, not only by extension):

- JSON Lines (``.jsonl``/``.ndjson``, or a ``.json`` whose first line is a whole JSON value):
  one record per non-blank line; a line that is not JSON becomes a ``BadRecord`` with its byte
  offset (the run goes on).
- A JSON array (``[...]``): its items, decoded incrementally from 1 MiB reads, so memory holds one
  item at a time. An array whose first item looks like a chat message (a ``role`` key, or a
  LangChain message as ``messages_to_dict``/``dumpd`` write it) is one conversation: the whole
  array is yielded as a single record. A syntax error inside an array cannot be resynchronised:
  the rest of the file becomes one ``BadRecord`` with ``rest`` set, the byte where reading
  stopped and an estimate of the records left (from the mean size of those read), so the
  accounting can say "unreadable from byte N (about M more records)".
- Text: UTF-8, with or without a byte-order mark (``utf-8-sig``). Bytes that are not UTF-8 are
  kept as lone surrogates (``surrogateescape``), never replaced: the converter rejects those
  rows as ``invalid_text``, like a ``"\\ud800"`` escape in valid JSON.
- A single JSON object spread over lines (a one-conversation file): one record.
- JSON under one rule (``beam_sft.data.jsontext``): NaN/Infinity, a number too large for a float
  and a key twice in one object make that record a ``BadRecord`` with its own code
  (``non_standard_number``, ``duplicate_key``); inside an array only that item is lost.
- Compression and encoding are read from the first bytes, not the name: a gzip file (``.jsonl.gz``,
  ``.json.gz``, or gzip named ``.jsonl``) is read through ``gzip`` transparently, and byte offsets
  (``BadRecord.byte``, "unreadable from byte N") then count *decompressed* bytes. UTF-16/UTF-32
  text (with or without a byte-order mark) and other compressions (bzip2, xz, zstd, zip) raise one
  ``BeamError`` that names the encoding, never a rejection per line.
- A Harmony transcript (``.txt`` given as a source; in a directory a ``.txt`` is skipped): the
  whole file is one record (a string), one final line break left out.
- Parquet (``.parquet``): record batches through pyarrow. Arrow gives every struct the union of
  all keys and fills the missing ones with null, so null-valued keys are dropped from Parquet
  and ``datasets`` records (a genuine null argument cannot be told apart there). Values JSON has
  no type for become JSON in the same walk, so ``convert`` and ``prepare`` read the same record:
  dates and times as ISO 8601 text, decimals as numbers, bytes as ``{"$binary": N}`` (N bytes;
  never text: a binary column is not a message), any other object as ``{"$unsupported": TYPE}``, so an unused binary or timestamp column
  changes nothing and a used one is rejected by its converter in both.
- A directory: a ``datasets.save_to_disk`` directory (one split), else its data files in sorted
  order (``expand_source``): hidden files and folders are skipped, and files of other types are
  listed as skipped, not passed over in silence. ``iter_located`` names each record's own file
  and its row number in that file; ``iter_records`` on a directory keeps one running index.
- A ``datasets`` dataset (a hub id ``org/name[:config][@split]``, or a folder laid out as a hub
  dataset repository): a hub id is streamed through ``load_dataset`` (``beam_sft.data.hub``); a
  local repository's split is its card's files, each read here by its own type
  (``hub.local_data_files``), so Parquet beside JSON Lines, or files whose columns differ, read
  as they are; a card only ``datasets`` understands goes through ``load_dataset``. A folder with
  no card whose files are named by split (``test.jsonl``, ``test/``) is refused unless a split is
  named (``hub.refuse_split_named``): read whole, its test rows would be trained on.
- A file that is not readable as its type (a fake or corrupt ``.parquet``) raises ``BeamError``
  naming the file.

Row indices count records from 0 (blank lines are not records).

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "a.json").write_text('[{"x": 1},\\n {"x": 2}]')
>>> list(iter_records(d / "a.json"))
[(0, {'x': 1}), (1, {'x': 2})]
"""

from __future__ import annotations

import datetime
import decimal
import gzip
import io
import json
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from beam_sft.data import hub, jsontext
from beam_sft.data.file_kinds import DATA_SUFFIXES, LINE_KINDS, reader_of, unsupported
from beam_sft.errors import BeamError
from beam_sft.paths import place
from beam_sft.redact import redact_url

CHUNK = 1 << 20
ENCODING = "utf-8-sig"  # a byte-order mark is not part of the first record
# The whitespace JSON allows between values (RFC 8259): a line of any other (a form feed, a no-break
# space) is not blank but a record json.loads refuses, counted as one.
JSON_SPACE = " \t\r\n"
ERRORS = "surrogateescape"  # bad bytes survive as lone surrogates, for the converter to reject
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class BadRecord:
    """A record that could not be decoded: its text and the decoder's complaint.

    ``byte``: where it starts in the file. ``rest``: the decoder could not go on, so this stands
    for the rest of the file; ``more`` then estimates how many records that rest holds (None
    when nothing was read before it to estimate from).
    """

    text: str
    error: str
    byte: int | None = None
    rest: bool = False
    more: int | None = None
    code: str = jsontext.INVALID_CODE  # jsontext.reason: invalid_json, non_standard_number, duplicate_key

    def describe(self) -> str:
        if not self.rest:
            return self.error
        about = f"about {self.more} more records" if self.more is not None else "record count unknown"
        return f"unreadable from byte {self.byte} ({about}): {self.error}"


@dataclass(frozen=True)
class SkippedFile:
    path: Path
    reason: str


def iter_records(path: str | Path | hub.DatasetRef) -> Iterator[tuple[int, Any]]:
    """``(row index, record)`` for every record of a local file or directory (one running index
    over a directory's files; ``iter_located`` gives each file's own), or of a ``datasets``
    dataset (a hub id or a dataset repository folder: ``beam_sft.data.hub`` tells them apart)."""
    for index, (_, _, record) in enumerate(iter_located(path)):
        yield index, record


def iter_located(path: str | Path | hub.DatasetRef) -> Iterator[tuple[str, int, Any]]:
    """``(file, row index in that file, record)``; for a plain file or a streamed dataset, ``file`` is its
    name; the files of a folder or of a local dataset repository's split each by their own path (the
    folder as given, joined with the file's path in it), so two files' rows are never told apart by
    a running number alone."""
    source = path if isinstance(path, hub.DatasetRef) else hub.parse_data_arg(path)
    if isinstance(source, hub.DatasetRef):
        name = source.label
        own = hub.local_data_files(source)
        if own is not None:  # a local repository: each file by its own reader, named by its own path
            for file in own:
                yield from ((_under(source.path, file), i, r) for i, r in _iter_file(file))
            return
        for index, record in hub.iter_dataset(source):
            yield name, index, _drop_nulls(record)
        return
    named, path = path, _local(path)
    if path.is_dir():
        files, _ = expand_source(path)
        for file in files:
            if file.is_dir():
                yield from ((str(file), i, r) for i, r in enumerate(_iter_saved_dataset(file)))
            else:
                yield from ((str(file), i, r) for i, r in _iter_file(file))
        return
    if not path.is_file():
        raise BeamError(f"{_shown(named)}: " + ("not a regular file (a pipe, a device or a socket: a source is "
                                                "read more than once, so save it to a file first)"
                                                if path.exists() else "no such file or directory"))
    yield from ((str(path), i, r) for i, r in _iter_file(path))


def _under(folder: str, file: Path) -> str:
    """A file of ``folder`` named as the folder was given, joined with the file's path in it
    (``datasets`` resolves a repository's patterns to absolute paths).

    >>> _under("repo", Path.cwd() / "repo" / "data" / "train-0.jsonl")
    'repo/data/train-0.jsonl'
    """
    for root in (Path(folder).absolute(), Path(folder).resolve()):
        try:
            return str(Path(folder) / file.relative_to(root))
        except ValueError:
            continue
    return str(file)


def _local(path: str | Path) -> Path:
    """A local source's path; an empty one is refused: ``Path("")`` is the working folder, which a
    source walked recursively would read whole (earlier outputs, a tokenizer.json) as data."""
    if not str(path).strip():
        raise BeamError("a source path is empty (it would read the working folder): name a file or a folder")
    return Path(path)


def _shown(path: str | Path) -> str:
    """A source as the user wrote it, for a message: its URL credentials masked (``Path`` would fold a
    URL's ``//``, hiding it from the redaction of every message)."""
    return redact_url(str(path))


def kind(path: Path) -> str:
    """A file's type from its name, a trailing ``.gz`` left out: ``.jsonl``, ``.json``, ..."""
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return Path(name).suffix


def _refuse_unsupported(path: Path) -> None:
    name = unsupported(kind(path))
    if name is not None:
        raise BeamError(f"{path}: a {name} file is not read here (JSON Lines, JSON, Parquet, a Harmony .txt "
                        "transcript, or a datasets folder): convert it to JSON Lines first")


def _reader(path: Path) -> str:
    """The reader of a file: its kind's (data/file_kinds.py's table), except that a JSON Lines file
    whose first line is not a whole value but opens one (a pretty-printed array or object saved as
    ``.jsonl``) is read as JSON: line by line, each of its lines would be one invalid_json record."""
    reader = reader_of(kind(path))
    if reader == "lines" and _opens_a_document(path):  # (one line read: the fast path keeps its speed)
        return "json"
    return reader


def _opens_a_document(path: Path) -> bool:
    """The file's first line is nothing but opening brackets ("[", "{", "[{": how pretty printers
    start) and its second is not a whole JSON value: a line of JSON Lines cut or broken is that line's
    record, and a stray "[" above whole lines of JSON Lines is one bad line, never a reason to read the
    rest as one value."""
    sniff(path)
    lines: list[str] = []
    with _corrupt_stream(path), _open_text(path) as fh:
        for line in fh:
            if line.strip(JSON_SPACE):
                lines.append(line.strip(JSON_SPACE))
                if len(lines) == 2:
                    break
    if not lines or lines[0].strip("[{" + JSON_SPACE):
        return False
    if len(lines) < 2:
        return True
    try:
        jsontext.loads(lines[1])
    except (ValueError, RecursionError) as exc:
        return not jsontext.semantic(exc)  # JSON syntax breaking the rule is still a whole line
    return False


def _iter_file(path: Path) -> Iterator[tuple[int, Any]]:
    _refuse_unsupported(path)
    reader = _reader(path)
    if reader == "parquet":
        yield from enumerate(_iter_parquet(path))
        return
    sniff(path)
    with _corrupt_stream(path):
        if reader == "lines":
            yield from enumerate(_iter_lines(path))
        elif reader == "transcript":
            with _open_text(path) as fh:
                text = fh.read()
            # The editor's final line break is not part of the transcript (nothing follows <|return|>).
            yield 0, text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text
        else:
            yield from enumerate(_iter_json(path))


_GZIP = b"\x1f\x8b"
_UNREAD = ((b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"),
           (b"PK\x03\x04", "zip"), (b"7z\xbc\xaf\x27\x1c", "7z"))
_WIDE_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32-LE"), (b"\x00\x00\xfe\xff", "UTF-32-BE"),
              (b"\xff\xfe", "UTF-16-LE"), (b"\xfe\xff", "UTF-16-BE"))


def check_readable(path: Path) -> str:
    """``sniff`` for a file of a type that is text (JSON, JSON Lines, .txt); Parquet is its own check."""
    _refuse_unsupported(path)
    return "" if reader_of(kind(path)) == "parquet" else sniff(path)


def compressed(path: Path) -> bool:
    """True when the file is gzip (by its first bytes, whatever its name)."""
    with open(path, "rb") as fh:
        return fh.read(2) == _GZIP


def sniff(path: Path) -> str:
    """How a text file is stored: ``"gzip"`` or ``""`` (plain). Raises ``BeamError`` naming the
    encoding or compression of a file no reader here can read: UTF-16/UTF-32 (by byte-order mark,
    or by the NUL bytes every other byte of ASCII text has there) and bzip2/xz/zstd/zip/7z."""
    with open(path, "rb") as fh:
        head = fh.read(4096)
    how = ""
    if head[:2] == _GZIP:
        how = "gzip"
        try:
            with gzip.open(path, "rb") as fh:
                head = fh.read(4096)
        except (OSError, EOFError, zlib.error) as exc:
            raise BeamError(f"{path}: a gzip file that cannot be decompressed ({exc})") from None
    for magic, name in _UNREAD:
        if head.startswith(magic):
            raise BeamError(f"{path}: {name}-compressed data; decompress it first (only gzip is read directly)")
    for bom, name in _WIDE_BOMS:
        if head.startswith(bom):
            raise BeamError(f"{path}: {name} text (byte-order mark); re-encode it as UTF-8, "
                            f"e.g. iconv -f {name} -t UTF-8")
    evens, odds = head[0::2], head[1::2]
    if len(head) >= 8:
        lanes = [head[k::4] for k in range(4)]  # UTF-32: three NUL bytes beside each ASCII byte
        for name, chars, zeros in (("UTF-32-LE", lanes[0], lanes[1] + lanes[2] + lanes[3]),
                                   ("UTF-32-BE", lanes[3], lanes[0] + lanes[1] + lanes[2])):
            if zeros.count(0) >= 0.9 * len(zeros) and chars.count(0) <= 0.1 * len(chars):
                raise BeamError(f"{path}: looks like {name} text without a byte-order mark (three of every "
                                f"four bytes are NUL); re-encode it as UTF-8, e.g. iconv -f {name} -t UTF-8")
        for name, zeros, chars in (("UTF-16-LE", odds, evens), ("UTF-16-BE", evens, odds)):
            if zeros.count(0) >= 0.9 * len(zeros) and chars.count(0) <= 0.1 * len(chars):
                raise BeamError(f"{path}: looks like {name} text without a byte-order mark (every other "
                                f"byte is NUL); re-encode it as UTF-8, e.g. iconv -f {name} -t UTF-8")
    return how


def _open_binary(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if compressed(path) else open(path, "rb")


def _open_text(path: Path) -> IO[str]:
    # newline="": a CR or CRLF is read as it is (in a transcript it is content; in JSON, byte offsets
    # count it), never folded into "\n".
    return io.TextIOWrapper(_open_binary(path), encoding=ENCODING, errors=ERRORS, newline="")


class _corrupt_stream:
    """A gzip stream that breaks mid-file ends the source with one clear error."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)):
            raise BeamError(f"{self.path}: the gzip stream is corrupt or cut off ({exc})") from None
        return False


_saved_dataset = hub.saved_dataset  # (hub asks it too: a saved folder is never a repository's splits)


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def expand_source(path: str | Path | hub.DatasetRef) -> tuple[list, list[SkippedFile]]:
    """The files a source reads, and the files of a directory it does not read (with why).

    A file is itself; a ``datasets.save_to_disk`` directory is itself; another directory is its
    data files in sorted order, hidden files and folders left out (``.cache``, ``.git``, ...),
    other files listed as skipped. A ``save_to_disk`` folder inside it is one unit of that list (read
    by ``datasets``), never walked: its ``dataset_info.json`` and ``state.json`` are not rows, and its
    ``.arrow`` files hold them.
    """
    if isinstance(path, hub.DatasetRef) or isinstance(hub.parse_data_arg(path), hub.DatasetRef):
        return [path], []  # a datasets dataset is one source, named as the user gave it
    named, path = path, _local(path)
    if not path.is_dir():
        if not path.exists():
            raise BeamError(f"{_shown(named)}: no such file or directory")
        return [path], []
    if _saved_dataset(path):
        return [path], []
    files: list[Path] = []
    skipped: list[SkippedFile] = []
    entries = sorted(path.rglob("*"))  # one walk of the tree, for the saved folders and the files
    saved = [p for p in entries if p.is_dir() and not _hidden(p, path) and _saved_dataset(p)]
    saved = [p for p in saved if not any(outer in p.parents for outer in saved)]  # a DatasetDict's splits: its own
    for p in entries:
        if p in saved:
            files.append(p)
        if not p.is_file() or _hidden(p, path) or any(folder in p.parents for folder in saved):
            continue
        if p.name.lower().endswith(DATA_SUFFIXES):
            files.append(p)
        else:
            skipped.append(SkippedFile(p, f"not a data file ({', '.join(DATA_SUFFIXES)})"))
    if not files:
        raise BeamError(f"{path}: no data files ({', '.join(DATA_SUFFIXES)}) in the directory"
                        + (f"; skipped {len(skipped)} other file(s)" if skipped else ""))
    return files, skipped


def files_read(source: str | Path | hub.DatasetRef) -> list[Path]:
    """Every local file a source reads, by the readers' own listing: ``expand_source`` for a file or
    folder, ``hub.split_files`` for one split of a local repository. A folder in the list is read
    whole (a ``save_to_disk`` folder, a repository only ``datasets`` lists); a hub id reads no local
    file: ``[]``. Prepare asks this whether two sources read one file, so the two cannot drift."""
    if not isinstance(source, hub.DatasetRef):
        source = hub.parse_data_arg(source)
    if isinstance(source, hub.DatasetRef):
        if not source.is_local:
            return []
        listed = hub.split_files(source)
        return [Path(source.path)] if listed is None else listed[0]
    files, _ = expand_source(source)
    return files


def read_twice(groups: Sequence[Sequence[str | Path]]) -> tuple[int, int, str] | None:
    """The first file two sources both read: ``(earlier, later, real path)``, or None when every
    file is read once. ``groups``: what each source reads (``files_read``), in order. A file is
    known by what the file system says it is (``paths.place``: device and inode), not by its
    spelling, so ``./a.jsonl``, a symbolic link, ``..``, a hard link and a folder reached through a
    bind mount are all the one file; and a folder in a group is read whole, so anything inside it
    counts as read by it. Each path is placed once, and "inside" is a look-up of the folders above
    it, so a listing of many files costs one pass, not a comparison of every pair."""
    folders: dict[Path, tuple[int, int] | None] = {}  # paths.place's cache of folder identities
    read: dict[object, int] = {}  # a file or folder (its identity; its real path when missing) -> first source
    whole: dict[tuple[int, int], int] = {}  # a folder read whole -> the first source reading it
    under: dict[tuple[int, int], tuple[int, str]] = {}  # a folder -> the first source reading inside it, and what
    for later, group in enumerate(groups):
        placed = (place(p, folders) for p in group)
        places = sorted({p.real: p for p in placed if p is not None}.values(), key=lambda p: p.real)
        for where in places:
            key = where.identity or where.real
            earlier = read.get(key)
            if earlier is None:  # inside a folder an earlier source reads whole?
                earlier = next((whole[ident] for ident in where.above if ident in whole), None)
            if earlier is not None and earlier != later:
                return earlier, later, str(where.real)
            if where.folder and where.identity in under and under[where.identity][0] != later:
                return under[where.identity][0], later, under[where.identity][1]  # an earlier file inside it
        for where in places:
            read.setdefault(where.identity or where.real, later)
            for ident in where.above:
                if ident in under:  # (whoever put it there put every folder above it too)
                    break
                under[ident] = (later, str(where.real))
            if where.folder:
                whole.setdefault(where.identity, later)
    return None


def _byte_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """``(byte offset, raw line)`` for each line of a file, a leading UTF-8 BOM dropped."""
    offset = 0
    with _open_binary(path) as fh:
        for raw in fh:
            start = offset
            offset += len(raw)
            if start == 0 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
            yield start, raw


def _iter_lines(path: Path) -> Iterator[Any]:
    for start, raw in _byte_lines(path):
        line = raw.decode("utf-8", ERRORS)
        if not line.strip(JSON_SPACE):
            continue
        try:
            yield jsontext.loads(line)
        except (ValueError, RecursionError) as exc:
            yield bad_line(line, start, exc)


def bad_line(line: str, start: int, exc: Exception) -> BadRecord:
    """The BadRecord of a JSON Lines line that is not JSON, or breaks the JSON rule (one wording
    and one code, ``jsontext.reason``, for every reader)."""
    what = "not valid JSON" if not jsontext.semantic(exc) else "not standard JSON"
    return BadRecord(line.rstrip("\r\n"), f"{what} (line at byte {start}): {exc}", byte=start,
                     code=jsontext.reason(exc))


def iter_raw_lines(path: str | Path) -> Iterator[tuple[int, str, str]]:
    """``(row index, JSON text, error)`` for each non-blank line of a JSON Lines file, without
    decoding the JSON (for ``prepare``'s fast path), with the same rules as ``iter_records``: a
    BOM is dropped, and a line that is not UTF-8 is never replaced. Its text becomes
    ASCII-escaped JSON that decodes to the same lone surrogates, which the converter rejects as
    ``invalid_text``; such a line that is not JSON either comes with its error. The text is always
    valid UTF-8, so an Arrow string column can hold it.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.jsonl"
    >>> _ = p.write_bytes(b'\\xef\\xbb\\xbf{"a": 1}\\n\\n{"b": "\\xff"}\\n')
    >>> list(iter_raw_lines(p))
    [(0, '{"a": 1}', ''), (1, '{"b": "\\\\udcff"}', '')]
    """
    for index, text, bad, _ in _raw_lines(Path(path)):
        yield index, text, bad.error if bad else ""


def _raw_lines(path: Path) -> Iterator[tuple[int, str, BadRecord | None, int]]:
    """``iter_raw_lines`` with each line's byte offset, and its BadRecord (None: not decoded yet)."""
    index = 0
    sniff(path)
    with _corrupt_stream(path):
        for start, raw in _byte_lines(path):
            bad = None
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                line = raw.decode("utf-8", ERRORS)
                try:
                    text = json.dumps(jsontext.loads(line), ensure_ascii=True)
                except (ValueError, RecursionError) as exc:
                    text = raw.decode("utf-8", "backslashreplace").rstrip("\r\n")
                    bad = bad_line(line, start, exc)
                    bad = BadRecord(text, bad.error, byte=start, code=bad.code)
            if not text.strip(JSON_SPACE):
                continue
            yield index, text, bad, start
            index += 1


@dataclass(frozen=True)
class RawRecord:
    """One record as ``prepare`` stores it before decoding: its own file, its row in that file, its
    JSON text (always valid UTF-8), the byte where it starts (JSON Lines), and ``bad`` when it could
    not be read (the same BadRecord ``iter_located`` gives)."""

    file: str
    row: int
    text: str
    byte: int | None = None
    bad: BadRecord | None = None


def iter_raw_located(path: str | Path | hub.DatasetRef) -> Iterator[RawRecord]:
    """Every record of a source as ``iter_located`` reads it (the same files, skips, BOM, bad-byte
    and unreadable-rest rules), as JSON text: JSON Lines files are not decoded (``iter_raw_lines``;
    the worker decodes, and ``bad_line`` words its error), every other shape is decoded here and
    written back as JSON. Text that is not valid Unicode is written ASCII-escaped, so it decodes to
    the same lone surrogates and is rejected as ``invalid_text``, never replaced."""
    files, _ = expand_source(path)
    for file in files:
        if isinstance(file, Path) and file.is_file() and kind(file) in LINE_KINDS and _reader(file) == "lines":
            for index, text, bad, start in _raw_lines(file):
                yield RawRecord(str(file), index, text, start, bad)
            continue
        for name, index, record in iter_located(file):
            if isinstance(record, BadRecord):
                yield RawRecord(name, index, _utf8(record.text), record.byte, record)
                continue
            text = json.dumps(record, ensure_ascii=False)
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # lone surrogates (bytes that were not UTF-8): kept, escaped
                text = json.dumps(record, ensure_ascii=True)
            yield RawRecord(name, index, text)


def _utf8(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _first_char(fh: IO[str]) -> tuple[str, int]:
    """The first character that is not whitespace, and the bytes read up to and including it."""
    n = 0
    while True:
        ch = fh.read(1)
        n += _bytes(ch)
        if not ch or ch not in JSON_SPACE:
            return ch, n


def _iter_json(path: Path) -> Iterator[Any]:
    with _open_text(path) as fh:
        first, consumed = _first_char(fh)
        if first == "[":
            yield from _iter_array(fh, path, consumed)
            return
    if not first:
        return
    with _open_text(path) as fh:
        first_line = next((line for line in fh if line.strip(JSON_SPACE)), "")
    try:
        jsontext.loads(first_line)
        whole_line = True
    except (ValueError, RecursionError) as exc:
        whole_line = jsontext.semantic(exc)  # JSON syntax, breaking the rule: still a whole line
    if whole_line:
        yield from _iter_lines(path)
        return
    with _open_text(path) as fh:
        text = fh.read()
    yield from _iter_concatenated(text, path)


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", ERRORS))


def _rest(text: str, error: str, path: Path, byte: int, records: int) -> BadRecord:
    """The rest of a file from ``byte``: one BadRecord, with the records it likely holds."""
    size = _size(path)
    more = None
    if records:
        more = max(1, round((size - byte) / max(1, byte / records)))
    return BadRecord(text[:1000], error, byte=byte, rest=True, more=more)


def _size(path: Path) -> int:
    """The bytes a reader sees: a gzip file's decompressed size (its trailer, modulo 4 GiB)."""
    if compressed(path):
        with open(path, "rb") as fh:
            fh.seek(-4, 2)
            return int.from_bytes(fh.read(4), "little")
    return path.stat().st_size


_PERMISSIVE = json.JSONDecoder()


def _skip(text: str, pos: int, exc: Exception, byte: int) -> tuple[BadRecord, int]:
    """A value that is JSON syntax but breaks the rule: its BadRecord, and where it ends (the
    permissive decoder finds the end, so the reader goes on with the next value)."""
    _, end = _PERMISSIVE.raw_decode(text, pos)
    return BadRecord(text[pos:end][:1000], f"not standard JSON (value at byte {byte}): {exc}", byte=byte,
                     code=jsontext.reason(exc)), end


def _iter_concatenated(text: str, path: Path, start: int | None = None) -> Iterator[Any]:
    """One pretty-printed object, or several one after another; ``start``: the file byte ``text``
    begins at (default: after the BOM). A top-level array among them is read as ``_iter_array``
    reads a file's array (its items, or one conversation)."""
    decoder = jsontext.decoder()
    pos = 0
    records = 0
    bom = _bom_size(path) if start is None else start
    while True:
        while pos < len(text) and text[pos] in JSON_SPACE:
            pos += 1
        if pos >= len(text):
            return
        try:
            value, pos = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError) as exc:
            if jsontext.semantic(exc):
                bad, pos = _skip(text, pos, exc, bom + _bytes(text[:pos]))
                records += 1
                yield bad
                continue
            yield _rest(text[pos:], f"not valid JSON: {exc}", path, bom + _bytes(text[:pos]), records)
            return
        if isinstance(value, list) and not (value and _looks_like_message(value[0])):
            records += len(value)  # an array of records, as a file's own array is read
            yield from value
            continue
        records += 1
        yield value  # (a list of messages: one conversation, as a file's own array of them)


_EMPTY = object()


@dataclass(frozen=True)
class _Tail:
    """What follows a top-level array's closing ``]`` (not only whitespace), from file byte ``byte``."""

    text: str
    byte: int


def _iter_array(fh: IO[str], path: Path, consumed: int) -> Iterator[Any]:
    """Items of a JSON array whose ``[`` was just read (``consumed`` bytes after any BOM);
    whole-array conversations are merged. Values after the array (a file of arrays, one per line,
    or an array then objects) are read on as ``_iter_concatenated`` reads them, each array among
    them the same way; text that is not JSON there is one ``unreadable_rest``."""
    tail: list[_Tail] = []
    yield from _iter_one_array(_iter_array_items(fh, path, consumed), tail)
    if tail:
        yield from _iter_concatenated(tail[0].text, path, start=tail[0].byte)


def _untailed(raw: Iterator[Any], tail: list) -> Iterator[Any]:
    for item in raw:
        if isinstance(item, _Tail):
            tail.append(item)
            return
        yield item


def _iter_one_array(raw: Iterator[Any], tail: list) -> Iterator[Any]:
    """``_iter_array``'s items of one array; a ``_Tail`` after it is put in ``tail``."""
    items = _untailed(raw, tail)
    first = next(items, _EMPTY)
    if first is _EMPTY:
        return
    if _looks_like_message(first):
        conversation = [first]
        for item in items:
            if isinstance(item, BadRecord) and not item.rest:  # one message breaks the JSON rule
                yield BadRecord(json.dumps(conversation, ensure_ascii=False)[:1000] + item.text, item.error,
                                byte=item.byte, code=item.code)
                for _ in items:  # the rest belongs to the same (rejected) conversation
                    pass
                return
            if isinstance(item, BadRecord):  # the one conversation cannot be read: it is the whole file
                yield BadRecord(json.dumps(conversation, ensure_ascii=False)[:1000] + item.text, item.error,
                                byte=item.byte, rest=True, more=0)
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
    ) or _is_langchain_message(item)


def _is_langchain_message(item: Any) -> bool:
    """A message as LangChain serializes it (convert/langchain.py reads them): ``messages_to_dict``'s
    exactly ``{type, data}``, or ``dumpd``'s ``{lc: 1, type: "constructor", id, kwargs}``, its fields holding
    ``content`` (always written). Stricter than the reader's detector: here the item could be a row of
    another set (``{"type": "qa", "data": {...}}``), which must stay a row, not be merged into one."""
    if not isinstance(item, dict):
        return False
    if item.keys() == {"type", "data"}:
        fields = item["data"]
    elif item.get("lc") == 1 and item.get("type") == "constructor" and isinstance(item.get("id"), list):
        fields = item.get("kwargs")
    else:
        return False
    kind = item["type"] if "data" in item else item["id"][-1] if item["id"] else None
    return (isinstance(kind, str) and (kind in LANGCHAIN_TYPES or kind.endswith(("Message", "MessageChunk")))
            and isinstance(fields, dict) and "content" in fields)


# messages_to_dict's message types (convert/langchain.py's TYPES; a test holds the two equal), and
# chunks' ("AIMessageChunk"): ``{"type": "qa", "data": {"content": ...}}`` rows are a set's rows.
LANGCHAIN_TYPES = frozenset({"human", "ai", "system", "tool", "function", "chat"})


def _bom_size(path: Path) -> int:
    with _open_binary(path) as fh:
        return len(_BOM) if fh.read(len(_BOM)) == _BOM else 0


def _iter_array_items(fh: IO[str], path: Path, consumed: int) -> Iterator[Any]:
    decoder = jsontext.decoder()
    buf, pos, eof = "", 0, False
    need_comma = False
    read_size = CHUNK
    # Bytes of the file before buf[0]: the BOM, "[" and what was dropped (for error positions).
    dropped = [_bom_size(path) + consumed]
    seen = 0

    def refill(grow: bool = False) -> bool:
        # Reads double while one item does not fit (so a huge item is decoded O(log n) times,
        # not once per chunk) and fall back to CHUNK once it has been decoded.
        nonlocal buf, pos, eof, read_size
        if eof:
            return False
        read_size = read_size * 2 if grow else CHUNK
        chunk = fh.read(read_size)
        dropped[0] += _bytes(buf[:pos])
        buf, pos = buf[pos:] + chunk, 0
        eof = not chunk
        return bool(chunk)

    def rest(error: str) -> BadRecord:
        return _rest(buf[pos:], error, path, dropped[0] + _bytes(buf[:pos]), seen)

    refill()
    while True:
        while True:
            while pos < len(buf) and buf[pos] in JSON_SPACE:
                pos += 1
            if pos < len(buf) or not refill():
                break
        if pos >= len(buf):
            yield rest("the JSON array is not closed")
            return
        if buf[pos] == "]":
            tail = buf[pos + 1 :] + fh.read()
            if tail.strip(JSON_SPACE):  # more after the array: read on, never dropped unsaid
                yield _Tail(tail, dropped[0] + _bytes(buf[: pos + 1]))
            return
        if need_comma:
            if buf[pos] != ",":
                yield rest(f"expected ',' or ']' in the JSON array at {buf[pos : pos + 20]!r}")
                return
            pos += 1
            need_comma = False
            continue
        grow = False
        while True:
            try:
                value, end = decoder.raw_decode(buf, pos)
            except (ValueError, RecursionError) as exc:
                try:
                    if not jsontext.semantic(exc):
                        raise
                    # A whole value that breaks the rule: only it is lost (a BadRecord in its place).
                    value, end = _skip(buf, pos, exc, dropped[0] + _bytes(buf[:pos]))
                except (ValueError, RecursionError):  # not whole yet, or not JSON: read on
                    if refill(grow):
                        grow = True
                        continue
                    yield rest(f"not valid JSON: {exc}")
                    return
            # A value is complete only when a delimiter follows: "-0" may be "-0.5" after the
            # next read, "tru" part of "true".
            after = end
            while after < len(buf) and buf[after] in JSON_SPACE:
                after += 1
            if (after == len(buf) or buf[after] not in ",]") and refill(grow):
                grow = True
                continue
            break
        yield value
        seen += 1
        pos = end
        need_comma = True


def _jsonable(item: Any) -> Any:
    """A value of an Arrow column that JSON has no type for, as JSON (the module docstring)."""
    if isinstance(item, (datetime.datetime, datetime.date, datetime.time)):
        return item.isoformat()
    if isinstance(item, datetime.timedelta):
        return item.total_seconds()
    if isinstance(item, decimal.Decimal):  # a non-finite or huge one becomes a float the number rule rejects
        return int(item) if item.is_finite() and item == item.to_integral_value() else float(item)
    if isinstance(item, tuple):  # a map column's (key, value) pairs
        return list(item)
    if isinstance(item, (bytes, bytearray, memoryview)):
        return {"$binary": len(item)}
    if not isinstance(item, (dict, list, *_PLAIN)):  # a decoded image, ...: named, never repr'd into text
        return {"$unsupported": type(item).__name__}
    return item


_PLAIN = (str, int, float, bool, type(None))


def _drop_nulls(value: Any) -> Any:
    """Arrow's null-filled struct fields removed, at every depth (iterative: rows can be deep),
    and values JSON has no type for made JSON (``_jsonable``)."""
    root = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        item = parent[key]
        if not isinstance(item, (dict, list, *_PLAIN)):
            item = parent[key] = _jsonable(item)
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
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        batches = pq.ParquetFile(path).iter_batches(batch_size=256)
        for batch in batches:
            for record in batch.to_pylist():
                yield _drop_nulls(record)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise BeamError(f"{path}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None


def _iter_saved_dataset(path: Path) -> Iterator[Any]:
    import datasets

    try:
        ds = datasets.load_from_disk(str(path))
    except (OSError, ValueError, KeyError, TypeError) as exc:  # a broken or foreign folder
        raise BeamError(f"{path}: not a readable datasets folder ({type(exc).__name__}: {exc})") from None
    if isinstance(ds, datasets.DatasetDict):
        if len(ds) != 1:
            raise BeamError(f"{path}: a DatasetDict with splits {sorted(ds)}; point at one split's directory")
        ds = next(iter(ds.values()))
    for record in ds:
        yield _drop_nulls(record)
