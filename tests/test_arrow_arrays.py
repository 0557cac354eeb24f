"""``beam_sft.arrow_arrays``: the arrays ``pyarrow.array`` builds (same type, values, nulls, errors),
without importing pandas."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_sft.arrow_arrays import int_lists, integers, strings

TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=20)
INT_TYPES = [(pa.int8(), 8, True), (pa.int32(), 32, True), (pa.int64(), 64, True), (pa.uint8(), 8, False)]


def _same(ours, theirs) -> None:
    assert ours.type == theirs.type
    assert ours.null_count == theirs.null_count
    assert ours.equals(theirs), (ours, theirs)
    ours.validate(full=True)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.none() | TEXT, max_size=30), large=st.booleans())
def test_strings_are_pyarrows(values, large):
    kind = pa.large_string() if large else pa.string()
    _same(strings(values, kind), pa.array(values, kind))


@settings(max_examples=300, deadline=None)
@given(data=st.data(), which=st.integers(0, len(INT_TYPES) - 1))
def test_integers_are_pyarrows(data, which):
    kind, bits, signed = INT_TYPES[which]
    low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    values = data.draw(st.lists(st.none() | st.integers(low, high), max_size=30))
    _same(integers(values, kind), pa.array(values, kind))
    plain = [v for v in values if v is not None]
    _same(integers(np.array(plain, dtype=kind.to_pandas_dtype()), kind), pa.array(plain, kind))


@pytest.mark.parametrize(("values", "kind"), [([300], pa.int8()), ([-1], pa.uint8()), ([True, False], pa.int8()),
                                              (["1"], pa.int64()), ([1.5], pa.int64()), ([[1]], pa.int64()),
                                              ([1, "a"], pa.string()), ([b"x"], pa.string())])
def test_what_pyarrow_refuses_or_converts_is_pyarrows_answer(values, kind):
    build = strings if pa.types.is_string(kind) else integers
    try:
        theirs = pa.array(values, kind)
    except Exception as exc:  # noqa: BLE001
        with pytest.raises(type(exc)):
            build(values, kind)
        return
    _same(build(values, kind), theirs)


def test_a_lone_surrogate_raises_pyarrows_error():
    with pytest.raises(UnicodeEncodeError) as theirs:
        pa.array(["a", "\ud800"], pa.string())
    with pytest.raises(UnicodeEncodeError) as ours:
        strings(["a", "\ud800"])
    assert str(ours.value) == str(theirs.value)


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=6), max_size=10))
def test_int_lists_are_pyarrows(rows):
    lengths = np.array([len(r) for r in rows], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    flat = np.array([v for r in rows for v in r], dtype=np.int32)
    _same(int_lists(offsets, flat, pa.list_(pa.int32())), pa.array(rows, pa.list_(pa.int32())))


def test_building_them_imports_no_pandas():
    code = ("import sys, numpy as np, pyarrow as pa\n"
            "from beam_sft.arrow_arrays import strings, integers, int_lists\n"
            "t = pa.table({'s': strings(['a', None]), 'i': integers([1, None], pa.int32()),\n"
            "              'l': int_lists(np.array([0, 1, 1]), np.array([5], dtype=np.int8), pa.list_(pa.int8()))})\n"
            "t.take(integers(np.array([1, 0])))\n"
            "print('pandas' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
    # the check itself: pyarrow.array does import it (else this module would have no reason to exist)
    done = subprocess.run([sys.executable, "-c", "import sys, pyarrow as pa; pa.array([1]); "
                           "print('pandas' in sys.modules)"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"
