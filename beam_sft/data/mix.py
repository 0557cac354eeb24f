"""Mixing several sources with weights: how many copies of each row go into the prepared dataset.

A source's ``weight`` repeats its rows: ``1`` keeps each row once, ``0.5`` keeps a seeded half,
``2.5`` keeps every row twice plus a seeded half of them a third time. The decision for a row
depends only on ``(seed, source, row index, weight)``, so it is the same whichever process or
shard encodes the row, needs no pass over the data first, and costs no memory. The counts are
therefore exact in expectation (``weight * rows``), not to the row; the report gives both the
planned and the real mix.
"""

from __future__ import annotations

import hashlib
import math

# re-exported: the report section is built where the report is (beam_sft.dataset_folder.report_json)
from beam_sft.dataset_folder.report_json import mix_report  # noqa: F401


def row_fraction(seed: int, source: str, row: int) -> float:
    """A uniform number in [0, 1) fixed by ``(seed, source, row)``.

    >>> row_fraction(0, "a.jsonl", 3) == row_fraction(0, "a.jsonl", 3)
    True
    >>> row_fraction(0, "a.jsonl", 3) != row_fraction(1, "a.jsonl", 3)
    True
    """
    digest = hashlib.blake2b(f"{seed}\0{source}\0{row}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def copies(weight: float, *, seed: int, source: str, row: int) -> int:
    """How many times row ``row`` of ``source`` appears: ``floor(weight)``, plus one with
    probability ``weight - floor(weight)``.

    >>> copies(2.0, seed=0, source="a", row=5), copies(0.0, seed=0, source="a", row=5)
    (2, 0)
    >>> sum(copies(0.25, seed=0, source="a", row=r) for r in range(4000)) in range(900, 1100)
    True
    """
    whole = math.floor(weight)
    part = weight - whole
    if part and row_fraction(seed, source, row) < part:
        return whole + 1
    return whole
