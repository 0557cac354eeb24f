"""datasets' internals: whether a ``datasets.Dataset``'s rows are its Arrow table's rows, in order.

A ``select``/``shuffle``/``train_test_split`` leaves the table as it was and adds an index mapping
(``Dataset._indices``; no public accessor), and only without one may a caller read columns straight
from ``dataset.data`` (the pre-flight's vectorised reads, ``train/preflight.py``).
"""

from __future__ import annotations


def rows_are_table_rows(dataset) -> bool:
    """True when row ``i`` of ``dataset`` is row ``i`` of ``dataset.data`` (no index mapping)."""
    return getattr(dataset, "_indices", None) is None


def problems() -> list[str]:
    from datasets import Dataset

    dataset = Dataset.from_dict({"x": [1, 2]})
    if not rows_are_table_rows(dataset) or rows_are_table_rows(dataset.select([1, 0])):
        return ["datasets.Dataset._indices: no longer the index mapping of select([1, 0])"]
    return []
