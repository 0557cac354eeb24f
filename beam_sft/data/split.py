"""Hold an eval set out of converted rows: pure, seeded, and disjoint by content.

Rows are grouped by their fingerprint (the canonical BeamRow without ``meta``, so the same
conversation from two sources, or repeated by a source weight, is one group). Groups are ranked by
a seeded hash of the fingerprint and the lowest-ranked ones go to the eval set until it holds
``round(fraction * rows)`` rows (fewer only when a group would overshoot). A group is never split,
so no conversation is in both sets; which groups are held out depends only on the seed and the
fingerprints, not on the row order.

>>> fps = ["a", "b", "c", "d", "a"]
>>> split = split_by_fingerprint(fps, 0.4, seed=0)
>>> sorted(split.train + split.eval) == list(range(5))
True
>>> {fps[i] for i in split.train} & {fps[i] for i in split.eval}
set()
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Split:
    """Row indices (ascending) of each side."""

    train: list[int]
    eval: list[int]


def row_fingerprint(row: dict[str, Any] | str) -> str:
    """Digest of a canonical BeamRow's content (``meta``, i.e. where it came from, left out).

    >>> row_fingerprint({"messages": [], "meta": {"row": 1}}) == row_fingerprint('{"messages": []}')
    True
    """
    value = json.loads(row) if isinstance(row, str) else row
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k != "meta"}
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _rank(seed: int, fingerprint: str) -> str:
    return hashlib.sha256(f"{seed}\0{fingerprint}".encode()).hexdigest()


def eval_target(rows: int, fraction: float) -> int:
    """Rows the eval set aims at: ``round(fraction * rows)``, at least 1 and leaving at least 1 to train.

    >>> eval_target(38, 0.1), eval_target(5, 0.01), eval_target(2, 0.99), eval_target(1, 0.5)
    (4, 1, 1, 0)
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    if rows < 2:
        return 0
    return min(max(1, round(fraction * rows)), rows - 1)


def split_by_fingerprint(fingerprints: Sequence[str], fraction: float, seed: int = 0) -> Split:
    """Split row indices into train and eval (module docstring). Pure: same inputs, same split."""
    groups: dict[str, list[int]] = {}
    for index, fingerprint in enumerate(fingerprints):
        groups.setdefault(fingerprint, []).append(index)
    target = eval_target(len(fingerprints), fraction)
    held: list[int] = []
    for fingerprint in sorted(groups, key=lambda f: _rank(seed, f)):
        if len(held) >= target:
            break
        members = groups[fingerprint]
        if len(held) + len(members) <= target:
            held.extend(members)
    held_set = set(held)
    return Split(train=[i for i in range(len(fingerprints)) if i not in held_set], eval=sorted(held))
