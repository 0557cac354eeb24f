"""The one JSON rule of every reader: strict numbers, no duplicate keys, wherever JSON is decoded.

A value can reach a row as a record of a file, as an item of a JSON array, or as a JSON *string*
decoded later (tool-call arguments, a ``tools`` column, a ShareGPT ``function_call`` value, a Hermes
``<tool_call>`` body). Python's ``json`` accepts ``NaN``/``Infinity``, turns ``1e400`` into
``inf`` and lets the last of two equal keys win. Every decode in the package goes through
``loads`` (or ``decoder`` for incremental reads), so each way in meets the same rule:

- ``NaN``, ``Infinity``, ``-Infinity`` and a number too large for a float (``1e400``) raise
  ``NonStandardNumber`` (reason ``non_standard_number``);
- an object holding a key twice, at any depth, raises ``DuplicateKey`` (reason ``duplicate_key``);
- anything else that is not JSON raises ``ValueError`` as ``json`` does (``invalid_json``).

Both are ``ValueError`` subclasses, so a caller that only knows "not JSON" still rejects the value;
``reason(exc)`` gives the code.

>>> loads('{"a": [1, 2.5]}')
{'a': [1, 2.5]}
>>> loads('{"x": 1e400}')
Traceback (most recent call last):
...
beam_sft.data.jsontext.NonStandardNumber: the number 1e400 is too large for JSON (it would be Infinity)
>>> loads('{"content": "a", "content": "b"}')
Traceback (most recent call last):
...
beam_sft.data.jsontext.DuplicateKey: the key 'content' appears twice in one object
"""

from __future__ import annotations

import json
import math
from typing import Any


class NonStandardNumber(ValueError):
    """NaN, Infinity or a float that overflows: not JSON, and a row column could not hold it."""


class DuplicateKey(ValueError):
    """An object with a key twice: which value is meant cannot be told."""


def _constant(name: str) -> Any:
    raise NonStandardNumber(f"{name} is not a JSON number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NonStandardNumber(f"the number {text[:40]} is too large for JSON (it would be Infinity)")
    if value == 0.0 and any(d in "123456789" for d in text.lower().partition("e")[0]):
        # 1e-400 reads as 0.0: the value would change unsaid (as 1e400 would become Infinity)
        raise NonStandardNumber(f"the number {text[:40]} is too small for a 64-bit float (it would be 0)")
    return value


def number_problem(text: str) -> str | None:
    """Why the number written ``text`` is not one JSON can hold (the rule ``loads`` applies to a
    number in a record), or None: also for text that is no number at all.

    >>> number_problem("1e400"), number_problem("2.5"), number_problem("abc")
    ('the number 1e400 is too large for JSON (it would be Infinity)', None, None)
    >>> number_problem(" NaN ")
    'the number NaN is not finite'
    """
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value) and text.lstrip("+-").lower() in ("nan", "inf", "infinity"):
        return f"the number {text[:40]} is not finite"
    try:
        _float(text)
    except NonStandardNumber as exc:
        return str(exc)
    return None


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise DuplicateKey(f"the key {key[:80]!r} appears twice in one object")
    return out


_DECODER = json.JSONDecoder(object_pairs_hook=_object, parse_float=_float, parse_constant=_constant)


def loads(text: str | bytes) -> Any:
    """``json.loads`` under the rule above."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")
    return _DECODER.decode(text)


def decoder() -> json.JSONDecoder:
    """A decoder under the rule, for ``raw_decode`` of arrays and concatenated values."""
    return _DECODER


INVALID_CODE = "invalid_json"
NUMBER_CODE = "non_standard_number"
DUPLICATE_CODE = "duplicate_key"


def reason(exc: BaseException) -> str:
    """The reason code of a decode failure."""
    if isinstance(exc, NonStandardNumber):
        return NUMBER_CODE
    if isinstance(exc, DuplicateKey):
        return DUPLICATE_CODE
    return INVALID_CODE


def semantic(exc: BaseException) -> bool:
    """True when the text is JSON syntax but breaks the rule (the value's end is known to a
    permissive decoder, so a reader can skip just that value)."""
    return isinstance(exc, (NonStandardNumber, DuplicateKey))
