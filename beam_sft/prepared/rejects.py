"""DIR/rejects.jsonl: one JSON object per row left out, ``{"source", "row", "code", "message", "raw"}``."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def reject_line(source: str, row: int, code: str, message: str, raw: Any) -> str:
    """One line of rejects.jsonl (``raw`` is the input as read, or the converted row).

    >>> reject_line("a.jsonl", 3, "too_long", "12 > 8 tokens", {"messages": []})
    '{"source": "a.jsonl", "row": 3, "code": "too_long", "message": "12 > 8 tokens", "raw": {"messages": []}}'
    """
    record = {"source": source, "row": row, "code": code, "message": message, "raw": raw}
    return json.dumps(record, ensure_ascii=False, default=repr)


def write_rejects(path: str | Path, lines: Iterable[str | None]) -> int:
    """Write the lines (None entries skipped) to ``path``; returns how many."""
    count = 0
    with open(path, "w", encoding="utf-8") as sink:
        for line in lines:
            if line is None:
                continue
            sink.write(line + "\n")
            count += 1
    return count
