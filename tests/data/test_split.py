"""The eval split: a partition of the rows, disjoint by content, seeded, the size asked for."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_sft.data.split import eval_target, row_fingerprint, split_by_fingerprint

fingerprint_lists = st.lists(st.sampled_from([f"f{i}" for i in range(30)]) | st.text(min_size=1, max_size=4),
                             max_size=80)
fractions = st.floats(min_value=0.01, max_value=0.99)


@settings(max_examples=300, deadline=None)
@given(fingerprint_lists, fractions, st.integers(0, 1000))
def test_split_is_a_partition_disjoint_by_fingerprint(fps, fraction, seed):
    split = split_by_fingerprint(fps, fraction, seed)
    assert sorted(split.train + split.eval) == list(range(len(fps)))
    assert split.train == sorted(split.train) and split.eval == sorted(split.eval)
    assert not {fps[i] for i in split.train} & {fps[i] for i in split.eval}
    target = eval_target(len(fps), fraction)
    assert len(split.eval) <= target
    if len(set(fps)) == len(fps):  # no duplicates: exactly the size asked for
        assert len(split.eval) == target
    assert split_by_fingerprint(fps, fraction, seed) == split


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=6), min_size=2, max_size=60, unique=True), fractions,
       st.integers(0, 100), st.randoms())
def test_held_out_rows_do_not_depend_on_row_order(fps, fraction, seed, rnd):
    shuffled = list(fps)
    rnd.shuffle(shuffled)
    held = {fps[i] for i in split_by_fingerprint(fps, fraction, seed).eval}
    again = {shuffled[i] for i in split_by_fingerprint(shuffled, fraction, seed).eval}
    assert held == again


def test_seed_changes_the_selection():
    fps = [f"row{i}" for i in range(200)]
    picks = {tuple(split_by_fingerprint(fps, 0.1, seed).eval) for seed in range(5)}
    assert len(picks) == 5


def test_duplicates_stay_together():
    fps = ["x"] * 5 + [f"u{i}" for i in range(20)]
    for seed in range(20):
        split = split_by_fingerprint(fps, 0.3, seed)
        held = set(split.eval)
        assert all(i in held for i in range(5)) or not any(i in held for i in range(5))


def test_row_fingerprint_ignores_meta_and_key_order():
    a = {"messages": [{"role": "user", "content": "hi"}], "meta": {"source": "a", "row": 1}}
    b = {"meta": {"source": "b", "row": 9}, "messages": [{"content": "hi", "role": "user"}]}
    assert row_fingerprint(a) == row_fingerprint(b)
    assert row_fingerprint(a) != row_fingerprint({"messages": [{"role": "user", "content": "hi!"}]})


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5])
def test_fraction_out_of_range(fraction):
    with pytest.raises(ValueError):
        split_by_fingerprint(["a", "b"], fraction)


@pytest.mark.parametrize("module", ["beam_sft.data.split", "beam_sft.data.hub"])
def test_doctests(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
