"""Pythonic tool calls in assistant text, ``[name(arg=value, ...), ...]`` (ToolACE, BFCL, Llama 3.2
style), read when ``ConvertOptions.pythonic_tool_calls`` is on.

Only this is read: a Python list literal of calls at the end of the turn's text, each call a name
(dotted names allowed: ``math.factorial``) with keyword arguments whose values are Python literals
(``ast.literal_eval``: strings, numbers, booleans, None, lists, dicts, tuples as lists). The text is
parsed with ``ast.parse`` and never evaluated. Anything else (a positional argument, ``**kwargs``,
an expression as a value, a value JSON has no form for, a name called twice with one key twice, text
after the list) is not a call list, and the turn stays text. A dict value with a key twice is
``RepeatedKey`` (the row is ``duplicate_key``, as a JSON row with it is).

>>> said, calls = parse_pythonic_calls('[get_weather(city="Paris", unit="c"), get_time(tz="CET")]')
>>> said, [c["function"] for c in calls]
('', [{'name': 'get_weather', 'arguments': {'city': 'Paris', 'unit': 'c'}}, {'name': 'get_time', 'arguments': {'tz': 'CET'}}])
>>> parse_pythonic_calls("See [1] and [2]."), parse_pythonic_calls("[__import__('os').system(x=1)]")
(None, None)
"""

from __future__ import annotations

import ast
from typing import Any

from beam_sft.convert.literals import NotJSON, literal_value

_MAX_CHARS = 100_000  # ast recursion and time on hostile input
_MAX_STARTS = 64  # where a call list may start: each '[' tried, the leftmost that parses wins


def parse_pythonic_calls(text: str) -> tuple[str, list[dict]] | None:
    """``(text before the list, calls)`` when ``text`` ends with a pythonic call list, else None."""
    body = text.rstrip()
    if not body.endswith("]") or len(body) > _MAX_CHARS:
        return None
    starts = [i for i, ch in enumerate(body) if ch == "["][:_MAX_STARTS]
    for start in starts:
        calls = _calls(body[start:])
        if calls is not None:
            return body[:start], calls
    return None


def _calls(text: str) -> list[dict] | None:
    source = text.strip()
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    node = tree.body
    if not isinstance(node, ast.List) or not node.elts:
        return None
    calls = []
    for item in node.elts:
        call = _call(item, source)
        if call is None:
            return None
        calls.append(call)
    return calls


def _call(node: ast.AST, source: str) -> dict | None:
    if not isinstance(node, ast.Call) or node.args:
        return None
    name = _name(node.func)
    if name is None:
        return None
    arguments: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None or kw.arg in arguments:  # **kwargs, or a key twice
            return None
        try:
            arguments[kw.arg] = literal_value(kw.value, source)  # RepeatedKey, TooSmall go up: the row is rejected
        except NotJSON:
            return None
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _name(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None
