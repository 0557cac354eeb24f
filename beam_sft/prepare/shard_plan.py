"""Which records a shard prepares: contiguous ranges of the run's record stream.

The stream is every source's records in config order (a source's own records in reading order:
the files of a folder, then their rows). Shard ``I`` of ``N`` takes positions
``[I * T // N, (I + 1) * T // N)`` of the ``T`` records. Contiguous ranges (not ``i % N``) make the
concatenation of the shards, in index order, the unsharded run's order: the dataset rows, the
rejects lines and the report's lists come out exactly as one process writes them, so a merged
folder is the same folder (``merge-shards``, ``--engine ray``).

The cost: a shard must know ``T`` before it starts, so each one counts the records first (reading
is the cheap step; see the README's sharding section for what it measured). The bounds depend on
the counts alone, so every process that plans the same data gets the same plan.
"""

from __future__ import annotations

from collections.abc import Sequence


def bounds(total: int, count: int) -> list[tuple[int, int]]:
    """The ``[start, end)`` record positions of each of ``count`` shards of ``total`` records: as even
    as whole records allow, in order, covering every position exactly once.

    >>> bounds(10, 3)
    [(0, 3), (3, 6), (6, 10)]
    >>> bounds(2, 3)
    [(0, 0), (0, 1), (1, 2)]
    """
    if count < 1 or total < 0:
        raise ValueError(f"bounds({total}, {count}): need total >= 0 and count >= 1")
    return [(i * total // count, (i + 1) * total // count) for i in range(count)]


def source_ranges(labels: Sequence[str], counts: Sequence[int], start: int, end: int) -> list[dict]:
    """The records ``[start, end)`` of the stream as ``{"source", "rows": [first, last + 1]}`` per
    source they touch (``rows`` are the source's own record indices, its ``row_index``).

    >>> source_ranges(["a", "b"], [4, 5], 2, 7)
    [{'source': 'a', 'rows': [2, 4]}, {'source': 'b', 'rows': [0, 3]}]
    >>> source_ranges(["a", "b"], [4, 5], 4, 4)
    []
    """
    out, offset = [], 0
    for label, n in zip(labels, counts, strict=True):
        lo, hi = max(start, offset), min(end, offset + n)
        if lo < hi:
            out.append({"source": label, "rows": [lo - offset, hi - offset]})
        offset += n
    return out


def plan(labels: Sequence[str], counts: Sequence[int], count: int) -> list[dict]:
    """The shard plan: for each shard id, its stream positions and its source row ranges.

    >>> plan(["a", "b"], [3, 1], 2)[1]
    {'shard': 1, 'records': [2, 4], 'sources': [{'source': 'a', 'rows': [2, 3]}, {'source': 'b', 'rows': [0, 1]}]}
    """
    total = sum(counts)
    return [{"shard": i, "records": [lo, hi], "sources": source_ranges(labels, counts, lo, hi)}
            for i, (lo, hi) in enumerate(bounds(total, count))]


def iter_source(location):
    """A source's raw records, as ``records.write_records`` reads them (a Batch API pair joined)."""
    from beam_sft.data.batch_api import BatchPair, iter_batch_raw
    from beam_sft.data.sources import iter_raw_located

    return iter_batch_raw(location) if isinstance(location, BatchPair) else iter_raw_located(location)


def count_records(location) -> int:
    """How many records a source holds, read exactly as ``records.write_records`` reads it."""
    return sum(1 for _ in iter_source(location))


def source_counts(resolved_plan) -> list[int]:
    """Every source's record count (a ``resolved.ResolvedPrepare``), in config order."""
    from beam_sft.prepare.resolved import source_location

    return [count_records(source_location(s.spec)) for s in resolved_plan.sources]
