"""Arrow arrays from Python lists and numpy arrays, equal to ``pyarrow.array``'s, without the pandas
import that ``pyarrow.array`` makes the first time it is called.

``pyarrow.array`` asks of every value it is handed (a list and a numpy array alike) whether it is a
pandas object, and to ask it imports pandas: 0.23 s at the start of every prepare run, in a process
that never holds a pandas object. ``strings``, ``integers`` and ``int_lists`` build the column types
prepare and verify write from their buffers (``pyarrow.Array.from_buffers``), which looks at nothing
but the buffers. Anything they are not sure of (a value of another type, an integer out of the type's
range, text past 2 GiB in one array) goes to ``pyarrow.array`` itself, which then gives the answer it
always gave, error included. ``tests/test_arrow_arrays.py`` compares both on generated values.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

_INT32_MAX = 2**31 - 1
_INT_OR_NONE = frozenset({int, type(None)})
_type = type  # (``integers`` has a parameter of that name)


@functools.cache
def _pyarrow():
    """pyarrow, imported on first use (the CLI imports this module before it knows it needs Arrow)."""
    import pyarrow

    return pyarrow


@functools.cache
def _numpy_types() -> dict:
    pa = _pyarrow()
    return {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
            pa.uint8(): np.uint8, pa.uint32(): np.uint32, pa.uint64(): np.uint64}


def _validity(values: Sequence):
    """The validity bitmap of ``values`` (None where nothing is missing) and the null count."""
    missing = [i for i, v in enumerate(values) if v is None]
    if not missing:
        return None, 0
    pa = _pyarrow()
    valid = np.ones(len(values), dtype=bool)
    valid[missing] = False
    return pa.py_buffer(np.packbits(valid, bitorder="little")), len(missing)


def strings(values: Sequence[str | None], type=None):
    """``pyarrow.array(values, type)`` for str values and None (``type``: ``string``, the default, or
    ``large_string``)."""
    pa = _pyarrow()
    type = pa.string() if type is None else type
    large = type == pa.large_string()
    if not large and type != pa.string():
        return pa.array(values, type)
    try:  # (a lone surrogate raises here what pyarrow.array raises: the same UnicodeEncodeError)
        encoded = [b"" if v is None else v.encode("utf-8") for v in values]
    except AttributeError:  # not a str: pyarrow.array's own answer
        return pa.array(values, type)
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if not large:
        if offsets[-1] > _INT32_MAX:  # pyarrow.array splits such text into chunks
            return pa.array(values, type)
        offsets = offsets.astype(np.int32)
    validity, nulls = _validity(values)
    return pa.Array.from_buffers(type, len(encoded), [validity, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))],
                                 null_count=nulls)


def integers(values: Sequence[int | None] | np.ndarray, type=None):
    """``pyarrow.array(values, type)`` for Python or numpy integers and None, or an integer numpy array
    (``type``: an integer type, int64 by default)."""
    pa = _pyarrow()
    type = pa.int64() if type is None else type
    dtype = _numpy_types().get(type)
    if dtype is None:
        return pa.array(values, type)
    if isinstance(values, np.ndarray):
        if values.dtype != dtype or values.ndim != 1:
            return pa.array(values, type)
        data = np.ascontiguousarray(values)
        return pa.Array.from_buffers(type, len(data), [None, pa.py_buffer(data)], null_count=0)
    # (a bool, a float, a numpy scalar, a str: pyarrow.array decides, and refuses or converts as it always did)
    if not set(map(_type, values)) <= _INT_OR_NONE:
        return pa.array(values, type)
    validity, nulls = _validity(values)
    try:
        data = np.array([0 if v is None else v for v in values] if nulls else values, dtype=dtype)
    except OverflowError:  # out of the type's range: pyarrow.array's error
        return pa.array(values, type)
    return pa.Array.from_buffers(type, len(data), [validity, pa.py_buffer(data)], null_count=nulls)


def int_lists(offsets: np.ndarray, flat: np.ndarray, type):
    """A list array of ``type`` (list of an integer type) from int32 ``offsets`` and the flat values:
    ``pyarrow.ListArray.from_arrays`` over arrays built without ``pyarrow.array``."""
    pa = _pyarrow()
    return pa.ListArray.from_arrays(integers(np.asarray(offsets, dtype=np.int32), pa.int32()),
                                    integers(flat, type.value_type), type=type)


_NUMERIC = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
            "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "float": np.float32, "double": np.float64}


def numbers(array) -> np.ndarray:
    """``array.to_numpy(zero_copy_only=False)`` of an integer or float array (chunked or not): the
    values read from its buffers, where ``to_numpy`` asks pandas about the type first. With nulls
    (read as NaN there, in a float array) or of any other type, ``to_numpy`` itself. A new array."""
    pa = _pyarrow()
    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    dtype = _NUMERIC.get(str(array.type))
    if dtype is None or any(chunk.null_count for chunk in chunks):
        return array.to_numpy(zero_copy_only=False)
    size = np.dtype(dtype).itemsize
    parts = [np.frombuffer(chunk.buffers()[1], dtype=dtype, count=len(chunk), offset=chunk.offset * size)
             for chunk in chunks if len(chunk)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
