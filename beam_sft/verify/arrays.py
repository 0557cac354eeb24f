"""A batch of prepared rows as flat numpy arrays, straight from the Arrow buffers of the list columns.

``input_ids`` and ``assistant_masks`` are ``ListArray`` columns: one flat values buffer and one
offsets buffer each. The checks that need every token (shape, ids outside the vocabulary,
forbidden added tokens, trained-token counts) run on those flat arrays for the whole batch at
once; rows are then views into them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from beam_sft.arrow_arrays import numbers

# Columns the checks read (``row`` is required by the contract; the rest are used when present).
COLUMNS = ("input_ids", "assistant_masks", "row", "source", "row_index", "num_tokens", "num_trained")
BAD_MASK = 2  # what a null mask value reads as: neither 0 nor 1


def _flat(column, fill: int) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets) of a list column, offsets starting at 0; nulls read as ``fill``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        raise TypeError(f"expected a list column, got {array.type}")
    offsets = numbers(array.offsets).astype(np.int64)
    values = array.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    if values.null_count:
        values = pc.fill_null(values, fill)
    return numbers(values).astype(np.int64), offsets - offsets[0]


@dataclass
class TokenBatch:
    """Rows ``positions`` of a prepared dataset: flat token arrays and the other columns as lists."""

    positions: list[int]
    ids: np.ndarray
    id_offsets: np.ndarray
    mask: np.ndarray
    mask_offsets: np.ndarray
    columns: dict[str, list]

    @classmethod
    def from_table(cls, table, positions: Iterable[int]) -> TokenBatch:
        ids, id_offsets = _flat(table.column("input_ids"), -1)
        mask, mask_offsets = _flat(table.column("assistant_masks"), BAD_MASK)
        columns = {name: table.column(name).to_pylist() for name in COLUMNS[2:] if name in table.column_names}
        return cls(list(positions), ids, id_offsets, mask, mask_offsets, columns)

    @classmethod
    def from_records(cls, records: list[dict], positions: Iterable[int]) -> TokenBatch:
        """From rows given as dicts of Python values (tests and small inputs)."""
        import pyarrow as pa

        data = {name: [r.get(name) for r in records] for name in COLUMNS if any(name in r for r in records)}
        types = {"input_ids": pa.list_(pa.int64()), "assistant_masks": pa.list_(pa.int64())}
        table = pa.table({name: pa.array(values, type=types.get(name)) for name, values in data.items()})
        return cls.from_table(table, positions)

    def __len__(self) -> int:
        return len(self.positions)

    def row(self, k: int) -> tuple[np.ndarray, np.ndarray, dict]:
        ids = self.ids[self.id_offsets[k]:self.id_offsets[k + 1]]
        mask = self.mask[self.mask_offsets[k]:self.mask_offsets[k + 1]]
        return ids, mask, {name: values[k] for name, values in self.columns.items()}

    def bad_id_rows(self, vocab_size: int, holes: frozenset[int]) -> dict[int, np.ndarray]:
        """Per batch row with ids outside the vocabulary (negative, too large, or no token): their positions."""
        bad = (self.ids < 0) | (self.ids >= vocab_size)
        if holes:
            bad |= np.isin(self.ids, np.fromiter(holes, dtype=np.int64))
        return self._positions_by_row(bad)

    def rows_where(self, table: np.ndarray, safe_ids: np.ndarray) -> dict[int, np.ndarray]:
        """Per batch row holding ids with ``table[id]`` set: their positions in the row."""
        return self._positions_by_row(table[safe_ids])

    def split_by_row(self, table: np.ndarray, safe_ids: np.ndarray, letter_of=None):
        """For every batch row, the positions in the row of its ids with ``table[id]`` set; with
        ``letter_of`` (ids -> one letter per id, ``MarkerIds.letter_of``) also each row's letters,
        as ``(positions, letters)``, the letters found for the whole batch at once."""
        hits = np.flatnonzero(table[safe_ids])
        bounds = np.searchsorted(hits, self.id_offsets)
        local = (hits - np.repeat(self.id_offsets[:-1], np.diff(bounds))).tolist()
        cut = bounds.tolist()
        positions = [local[cut[k]:cut[k + 1]] for k in range(len(self))]
        if letter_of is None:
            return positions
        letters = letter_of(safe_ids[hits])
        return positions, [letters[cut[k]:cut[k + 1]] for k in range(len(self))]

    def row_counts(self) -> tuple[list[int], list[bool]]:
        """Per batch row: its trained (non-zero) mask values, and whether every mask value is 0 or 1."""
        on = self.mask != 0
        odd = on & (self.mask != 1)
        counts = np.zeros((2, len(on) + 1), dtype=np.int64)
        np.cumsum(on, out=counts[0, 1:])
        np.cumsum(odd, out=counts[1, 1:])
        a, b = self.mask_offsets[:-1], self.mask_offsets[1:]
        per_row = counts[:, b] - counts[:, a]
        return per_row[0].tolist(), (per_row[1] == 0).tolist()

    def mask_runs_by_row(self) -> list[list[tuple[int, int]]]:
        """For every batch row, ``mask_runs`` of its mask (the runs of non-zero values), found for the
        whole batch at once: a run starts where a value is non-zero and the one before it (in the same
        row) is not, and ends likewise."""
        on = self.mask != 0
        n = len(on)
        rows = len(self)
        if not n:
            return [[] for _ in range(rows)]
        first = np.zeros(n + 1, dtype=bool)
        first[self.mask_offsets[:-1]] = True  # the first value of each row (empty rows mark the next one)
        before = np.zeros(n, dtype=bool)
        before[1:] = on[:-1]
        before &= ~first[:n]
        after = np.zeros(n, dtype=bool)
        after[:-1] = on[1:]
        after &= ~first[1:]
        starts = np.flatnonzero(on & ~before)
        ends = np.flatnonzero(on & ~after) + 1
        bounds = np.searchsorted(starts, self.mask_offsets)
        base = np.repeat(self.mask_offsets[:-1], np.diff(bounds))
        pairs = list(zip((starts - base).tolist(), (ends - base).tolist(), strict=True))
        cut = bounds.tolist()
        return [pairs[cut[k]:cut[k + 1]] for k in range(rows)]

    def _positions_by_row(self, hits: np.ndarray) -> dict[int, np.ndarray]:
        where = np.flatnonzero(hits)
        if not len(where):
            return {}
        rows = np.searchsorted(self.id_offsets, where, side="right") - 1
        out: dict[int, np.ndarray] = {}
        for k in np.unique(rows).tolist():
            out[k] = where[rows == k] - self.id_offsets[k]
        return out
