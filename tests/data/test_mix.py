"""Mixing: seeded, per-row copy counts whose totals follow the weights; the report's mix section."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from beam_sft.data.mix import copies, mix_report, row_fraction


def total(weight: float, rows: int, seed: int = 0, source: str = "s") -> int:
    return sum(copies(weight, seed=seed, source=source, row=r) for r in range(rows))


def test_whole_weights_are_exact():
    assert total(1.0, 100) == 100
    assert total(3.0, 100) == 300
    assert total(0.0, 100) == 0


@settings(max_examples=30, deadline=None)
@given(weight=st.floats(min_value=0.05, max_value=3.0), seed=st.integers(0, 1000))
def test_fractions_follow_the_weight(weight, seed):
    rows = 4000
    got = total(weight, rows, seed)
    expected = weight * rows
    assert abs(got - expected) < 5 * (rows * 0.25) ** 0.5 + 1  # five standard deviations


def test_seeded_and_per_source():
    a = [copies(0.5, seed=1, source="a", row=r) for r in range(200)]
    assert a == [copies(0.5, seed=1, source="a", row=r) for r in range(200)]
    assert a != [copies(0.5, seed=2, source="a", row=r) for r in range(200)]
    assert a != [copies(0.5, seed=1, source="b", row=r) for r in range(200)]


def test_fraction_is_uniform_in_unit_interval():
    values = [row_fraction(0, "s", r) for r in range(5000)]
    assert 0 <= min(values) and max(values) < 1
    assert abs(sum(values) / len(values) - 0.5) < 0.02


def test_report_planned_and_real():
    report = mix_report({"a": 1.0, "b": 0.5}, {"a": 100, "b": 100}, {"a": 90, "b": 30}, seed=3)
    assert report["seed"] == 3
    assert report["planned"]["a"] == {"weight": 1.0, "rows": 100.0, "share": 0.6667}
    assert report["planned"]["b"]["share"] == 0.3333
    assert report["real"] == {"a": {"rows": 90, "share": 0.75}, "b": {"rows": 30, "share": 0.25}}
    empty = mix_report({"a": 1.0}, {}, {}, seed=0)
    assert empty["planned"]["a"]["share"] == 0.0 and empty["real"]["a"] == {"rows": 0, "share": 0.0}
