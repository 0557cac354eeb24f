"""The file kinds a source is read as: ONE suffix table, the single place a new kind is added.

data/sources.py reads each file by its kind's ``reader`` (the name, a trailing ``.gz`` left out;
gzip itself is told by the first bytes, ``sources.sniff``), lists a directory's data files by
``in_directory``, and data/hub.py reads a local repository's files itself when they are all of these
kinds. A directory holding ``dataset_info.json``/``state.json`` is a ``datasets.save_to_disk``
folder, read whole (sources.expand_source). A leaf: sources imports hub, so hub cannot ask sources.

>>> DATA_SUFFIXES
('.jsonl', '.ndjson', '.json', '.parquet', '.jsonl.gz', '.ndjson.gz', '.json.gz')
>>> reader_of(".ndjson"), reader_of(".txt"), reader_of(".weird")
('lines', 'transcript', 'json')
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FileKind:
    suffix: str
    reader: str  # "lines" (JSON Lines), "json" (a value, an array, or concatenated), "parquet", "transcript"
    in_directory: bool  # listed among a directory's data files
    gzip_named: bool  # a directory also lists SUFFIX.gz (any text kind is read through gzip by content)


FILE_KINDS: tuple[FileKind, ...] = (
    FileKind(".jsonl", "lines", True, True),
    FileKind(".ndjson", "lines", True, True),
    FileKind(".json", "json", True, True),
    FileKind(".parquet", "parquet", True, False),
    # A .txt given on its own is a Harmony transcript; in a directory it is more likely a note (skipped).
    FileKind(".txt", "transcript", False, False),
)
DEFAULT_READER = "json"  # a file of another name is read as JSON (a .json whose first line is a value reads as lines)

# What a directory's files are read as: the plain suffixes, then the gzip-named ones.
DATA_SUFFIXES: tuple[str, ...] = (tuple(k.suffix for k in FILE_KINDS if k.in_directory)
                                  + tuple(k.suffix + ".gz" for k in FILE_KINDS if k.in_directory and k.gzip_named))
LINE_KINDS: tuple[str, ...] = tuple(k.suffix for k in FILE_KINDS if k.reader == "lines")


# Kinds of data file no reader here reads: named in a one-line error rather than read as JSON (which
# would give one unreadable_rest record, or binary bytes in the rejects file).
UNSUPPORTED: dict[str, str] = {".csv": "CSV", ".tsv": "TSV", ".arrow": "Arrow IPC", ".feather": "Feather",
                               ".xlsx": "Excel", ".xls": "Excel", ".avro": "Avro", ".orc": "ORC",
                               ".pkl": "pickle", ".pickle": "pickle", ".npy": "NumPy", ".h5": "HDF5"}


def unsupported(suffix: str) -> str | None:
    """The name of a kind of file no reader reads, else None.

    >>> unsupported(".csv"), unsupported(".jsonl")
    ('CSV', None)
    """
    return UNSUPPORTED.get(suffix)


def reader_of(suffix: str) -> str:
    """The reader of a kind (``kind(path)``'s suffix), ``DEFAULT_READER`` for a suffix not in the table."""
    return next((k.reader for k in FILE_KINDS if k.suffix == suffix), DEFAULT_READER)
