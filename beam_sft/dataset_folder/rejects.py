"""DIR/rejects.jsonl: one JSON object per row left out, ``{"source", "row", "code", "message", "raw"}``
(and ``file`` and ``index``, in a line of a source of several files: ``placed``).

The one writer of a rejects line, for ``prepare`` and ``convert --rejects`` alike.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from beam_sft.visible import json_visible

# The keys every rejects line of ours holds (``reject_line``); what tells our file from a user's.
REJECT_KEYS = frozenset({"source", "row", "code", "message"})


def reject_json(record: Mapping[str, Any]) -> str:
    """One rejects.jsonl line (no newline), its text as ``visible.json_visible`` writes it: people read
    this file in a terminal, so a C1 control, a bidi override or a zero-width space in a row is a JSON
    escape (still exact JSON, the same row read back); so is a lone surrogate from bad bytes, which
    UTF-8 could not even write.

    >>> reject_json({"raw": "x\\udcffy\\u202e\\x9b"}) == '{"raw": "x\\\\udcffy\\\\u202e\\\\u009b"}'
    True
    """
    return json_visible(record, default=repr)


def reject_line(source: str, row: int, code: str, message: str, raw: Any, file: str | None = None,
                index: int | None = None) -> str:
    """One line of rejects.jsonl (``raw`` is the input as read, or the converted row).

    >>> reject_line("a.jsonl", 3, "too_long", "12 > 8 tokens", {"messages": []})
    '{"source": "a.jsonl", "row": 3, "code": "too_long", "message": "12 > 8 tokens", "raw": {"messages": []}}'
    """
    return reject_json(placed({"source": source, "row": row, "code": code, "message": message, "raw": raw},
                              source, file, index))


def placed(record: Mapping[str, Any], source: str, file: str | None, index: int | None = None) -> dict[str, Any]:
    """A rejects record of ``prepare`` (and of ``convert``, for a source of several files): ``source`` is the
    source's label, as report.json (convert's summary) counts it (and verify's ``rejects_count`` reads
    it); the line of a source of several files (a folder, a Batch API pair, a dataset folder's split)
    also names its ``file``, in which
    ``row`` is the row, and a line whose ``row`` is not the record's number in the whole source (a
    folder's, a Batch API pair's) its ``index``, that number (the dataset's ``row_index``: verify holds
    every index of a source to be kept or rejected, once).

    >>> placed({"source": "data/a.jsonl", "row": 1, "code": "c"}, "data", "data/a.jsonl", 7)
    {'source': 'data', 'file': 'data/a.jsonl', 'index': 7, 'row': 1, 'code': 'c'}
    """
    out: dict[str, Any] = {"source": source}
    if file is not None and file != source:
        out["file"] = file
    if index is not None and ("file" in out or record.get("row") != index):  # (a Batch API pair's row is a line)
        out["index"] = index
    out.update((k, v) for k, v in record.items() if k != "source")
    return out


def is_rejects_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a plain file a run of ours wrote as rejects: empty, or every line a rejects
    record (``REJECT_KEYS``). An unnamed default rejects path (``rows.jsonl`` -> ``rows.rejects.jsonl``)
    is replaced only where this holds; anything else there (a user's notes, a link, unreadable bytes)
    is the user's and stays.
    """
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        with Path(path).open("rb") as handle:
            for line in handle:
                if not line.strip():
                    continue
                record = json.loads(line)
                if not isinstance(record, dict) or not REJECT_KEYS <= record.keys():
                    return False
    except (OSError, ValueError):
        return False
    return True
