"""The shard plan is pure and deterministic: contiguous ranges covering every record exactly once,
in order, so that the shards concatenated in index order are the unsharded record stream."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from beam_sft.prepare import shard_plan


@given(st.integers(0, 10_000), st.integers(1, 64))
def test_bounds_cover_every_record_once_in_order(total, count):
    bounds = shard_plan.bounds(total, count)
    assert len(bounds) == count
    assert [p for lo, hi in bounds for p in range(lo, hi)] == list(range(total))
    sizes = [hi - lo for lo, hi in bounds]
    assert max(sizes) - min(sizes) <= 1  # as even as whole records allow


@given(st.lists(st.integers(0, 50), min_size=1, max_size=6), st.integers(1, 9))
def test_plan_names_each_source_row_in_exactly_one_shard(counts, count):
    labels = [f"s{i}" for i in range(len(counts))]
    plan = shard_plan.plan(labels, counts, count)
    assert [entry["shard"] for entry in plan] == list(range(count))
    stream = [(entry["source"], row) for shard in plan for entry in shard["sources"]
              for row in range(*entry["rows"])]
    assert stream == [(label, row) for label, n in zip(labels, counts, strict=True) for row in range(n)]
    assert plan == shard_plan.plan(labels, counts, count)  # the same counts, the same plan


def test_plan_of_a_small_mix():
    assert shard_plan.plan(["a.jsonl", "b.jsonl"], [5, 2], 3) == [
        {"shard": 0, "records": [0, 2], "sources": [{"source": "a.jsonl", "rows": [0, 2]}]},
        {"shard": 1, "records": [2, 4], "sources": [{"source": "a.jsonl", "rows": [2, 4]}]},
        {"shard": 2, "records": [4, 7], "sources": [{"source": "a.jsonl", "rows": [4, 5]},
                                                   {"source": "b.jsonl", "rows": [0, 2]}]},
    ]
