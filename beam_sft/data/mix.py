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
from collections.abc import Mapping


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


def mix_report(weights: Mapping[str, float], read: Mapping[str, int], out: Mapping[str, int], seed: int) -> dict:
    """The report's ``mix`` section: planned rows (``weight * rows read``) and real rows (after
    rejections), each with its share of the total.

    >>> mix_report({"a": 1.0, "b": 2.0}, {"a": 10, "b": 5}, {"a": 8, "b": 10}, 0)["planned"]["b"]
    {'weight': 2.0, 'rows': 10.0, 'share': 0.5}
    >>> mix_report({"a": 1.0, "b": 2.0}, {"a": 10, "b": 5}, {"a": 8, "b": 10}, 0)["real"]["a"]
    {'rows': 8, 'share': 0.4444}
    """
    planned = {name: weights[name] * read.get(name, 0) for name in weights}
    total_planned = sum(planned.values())
    total_out = sum(out.get(name, 0) for name in weights)
    return {
        "seed": seed,
        "planned": {
            name: {"weight": weights[name], "rows": planned[name],
                   "share": round(planned[name] / total_planned, 4) if total_planned else 0.0}
            for name in weights
        },
        "real": {
            name: {"rows": out.get(name, 0),
                   "share": round(out.get(name, 0) / total_out, 4) if total_out else 0.0}
            for name in weights
        },
    }
