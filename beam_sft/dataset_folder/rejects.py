"""DIR/rejects.jsonl: one JSON object per row left out, ``{"source", "row", "code", "message", "raw"}``.

The one writer of a rejects line, for ``prepare`` and ``convert --rejects`` alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def reject_json(record: Mapping[str, Any]) -> str:
    """One rejects.jsonl line (no newline). Text that is not valid Unicode (lone surrogates from
    bad bytes) cannot be written as UTF-8: such a record is written with ASCII escapes, still exact JSON.

    >>> reject_json({"raw": "x\\udcffy"}) == '{"raw": "x\\\\udcffy"}'
    True
    """
    line = json.dumps(record, ensure_ascii=False, default=repr)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(record, ensure_ascii=True, default=repr)
    return line


def reject_line(source: str, row: int, code: str, message: str, raw: Any) -> str:
    """One line of rejects.jsonl (``raw`` is the input as read, or the converted row).

    >>> reject_line("a.jsonl", 3, "too_long", "12 > 8 tokens", {"messages": []})
    '{"source": "a.jsonl", "row": 3, "code": "too_long", "message": "12 > 8 tokens", "raw": {"messages": []}}'
    """
    return reject_json({"source": source, "row": row, "code": code, "message": message, "raw": raw})
