"""Python literals read as JSON values: Hermes ``<tool_call>`` bodies and ``<tools>`` blocks written
with single quotes, and pythonic call arguments (convert/pythonic.py). One rule for all of them.

``ast.literal_eval`` accepts more than JSON holds: sets, bytes, complex numbers, ``...``, tuples
and non-string keys. A value becomes JSON only as JSON has it (tuples as lists); anything else is
``NotJSON`` (its reader then says the text is not a call or not a declaration, never a crash). A key
twice in one dict literal, at any depth, is ``RepeatedKey``: ``literal_eval`` would keep the last
value unsaid, where the JSON reader rejects the same row as ``duplicate_key``.

>>> read_literal("{'a': (1, 2), 'b': None}")
{'a': [1, 2], 'b': None}
>>> read_literal("{'a': {1, 2}}")
Traceback (most recent call last):
...
beam_sft.convert.literals.NotJSON: a set has no JSON form
"""

from __future__ import annotations

import ast
from typing import Any

from beam_sft.convert.rows import Rejection


class NotJSON(ValueError):
    """A literal (or text) with no JSON form."""


class RepeatedKey(ValueError):
    """A key twice in one dict literal."""


class TooSmall(ValueError):
    """A float literal written non-zero that reads as 0.0 (``1e-400``): ``non_standard_number``, as
    the JSON reader says of it (and of ``1e400``, which reads as infinity)."""


_SCALARS = (str, int, float, bool, type(None))


def repeated_key(tree: ast.AST) -> bool:
    """True when a dict literal anywhere in ``tree`` names one constant key twice."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = [repr(k.value) for k in node.keys if isinstance(k, ast.Constant)]
            if len(keys) != len(set(keys)):
                return True
    return False


def as_json(value: Any) -> Any:
    """``value`` (from ``literal_eval``) as JSON has it, iteratively (literals can be deep)."""
    root = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        item = parent[key]
        if isinstance(item, (tuple, list)):
            item = parent[key] = list(item)
            stack.extend((item, i) for i in range(len(item)))
        elif isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                raise NotJSON("a dict key that is not a string has no JSON form")
            item = parent[key] = dict(item)
            stack.extend((item, k) for k in item)
        elif not isinstance(item, _SCALARS):
            raise NotJSON(f"a {_kind(item)} has no JSON form")
    return root[0]


def _kind(item: Any) -> str:
    return {set: "set", frozenset: "set", bytes: "bytes value", complex: "complex number",
            type(...): "'...'"}.get(type(item), type(item).__name__)


def _underflows(node: ast.AST, source: str) -> bool:
    """A float literal written non-zero that reads as 0.0 (``1e-400``); the JSON reader refuses it
    as ``non_standard_number`` and so does this one (the value would change unsaid)."""
    for item in ast.walk(node):
        if isinstance(item, ast.Constant) and type(item.value) is float and item.value == 0.0:
            text = ast.get_source_segment(source, item) or ""
            if any(d in "123456789" for d in text.lower().partition("e")[0]):
                return True
    return False


def literal_value(node: ast.AST, source: str) -> Any:
    """The JSON value of one literal expression node of ``source``: ``RepeatedKey``, ``TooSmall``,
    or ``NotJSON`` for anything ``literal_eval`` refuses or JSON has no form for."""
    if repeated_key(node):
        raise RepeatedKey("a key appears twice in one dict")
    if _underflows(node, source):
        raise TooSmall("a number too small for a 64-bit float (it would be 0)")
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise NotJSON(f"not a Python literal: {exc}") from None
    return as_json(value)


def read_literal(text: str) -> Any:
    """``literal_value`` of a whole text."""
    try:
        tree = ast.parse(text, mode="eval")
    except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        raise NotJSON(f"not a Python literal: {exc}") from None
    return literal_value(tree.body, text)


NOT_JSON = object()  # tools.maybe_json: the text is not JSON at all (it may be meant as plain text)


def python_literal(text: str, where: str) -> Any:
    """``text`` read as a Python literal into JSON (``read_literal``), else ``NOT_JSON``: a key twice
    in one dict is ``duplicate_key`` and a number that underflows ``non_standard_number``, as in JSON."""
    try:
        return read_literal(text)
    except RepeatedKey:
        raise Rejection("duplicate_key", f"{where}: a key appears twice in one dict") from None
    except TooSmall as exc:
        raise Rejection("non_standard_number", f"{where}: {exc}") from None
    except NotJSON:
        return NOT_JSON
