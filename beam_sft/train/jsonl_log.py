"""The one way a run's appended JSON-lines logs (``losses.jsonl``, ``metrics.jsonl``,
``format_health.jsonl``) are written and read.

A run killed (or out of disk) while it appended a record leaves half a line. The reader leaves a cut
last line out (the resume, the model card and the demo read on); the writer drops it before its first
append, since a record written after it would join it on one line, a bad line in the middle that no
reader may skip. A bad line before the last is no such accident, and still raises.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def append_record(path: str | Path, record: dict[str, Any], **dumps: Any) -> None:
    """Append ``record`` as one line of ``path`` (made with its folder when missing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as fh:
        _drop_cut_line(fh)
        fh.write((json.dumps(record, **dumps) + "\n").encode("utf-8"))


def _drop_cut_line(fh) -> None:
    end = fh.seek(0, os.SEEK_END)
    if not end:
        return
    fh.seek(end - 1)
    if fh.read(1) == b"\n":
        return
    fh.seek(0)
    data = fh.read()
    fh.truncate(data.rfind(b"\n") + 1)  # a+b writes at the end whatever the position: the cut line is gone


def read_records(path: str | Path) -> list[dict]:
    """The records of ``path`` in order; a cut last line left out, ``[]`` when there is no file."""
    path = Path(path)
    if not path.is_file():
        return []
    lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    out = [json.loads(line) for line in lines[:-1]]
    if lines:
        try:
            out.append(json.loads(lines[-1]))
        except ValueError:
            pass
    return out
