"""Tools declared by use (``--infer-tools``, opt-in): declarations made from the calls a source makes.

Agent trajectories (tau-bench style) call tools they never declare. Trained so, the model learns
calls to tools its prompt never shows. With ``infer_tools``, a first pass over the source
(``SourceConversion``) sees every call to a tool its own row does not declare (``ToolUsage``) and
makes one declaration per name: an object schema whose properties are the argument names seen, each
typed with the JSON types its values had (several: a union; integers and numbers together:
``number``), ``required`` the arguments present in every call. Rows then get the declarations of
the tools they call and do not declare (``declare_inferred``), named in ``meta.inferred_tools``
and counted in the summary's notes (``inferred_tools``). A row's own declarations always win.

>>> usage = ToolUsage()
>>> usage.observe({"messages": [{"role": "assistant", "tool_calls": [
...     {"function": {"name": "find_user", "arguments": {"email": "a@b.c", "limit": 1}}},
...     {"function": {"name": "find_user", "arguments": {"email": "d@e.f", "limit": 2.5, "exact": True}}}]}]})
>>> json.loads(usage.declarations()[0])["function"]["parameters"]
{'type': 'object', 'properties': {'email': {'type': 'string'}, 'limit': {'type': 'number'}, 'exact': {'type': 'boolean'}}, 'required': ['email', 'limit']}
"""

from __future__ import annotations

import json
from typing import Any

from beam_sft.convert.rows import BeamRow

NOTE = "inferred_tools"  # the meta.notes key (one per row that got declarations)


def json_type(value: Any) -> str:
    """The JSON Schema type name of a decoded JSON value.

    >>> [json_type(v) for v in (True, 1, 1.5, "a", [], {}, None)]
    ['boolean', 'integer', 'number', 'string', 'array', 'object', 'null']
    """
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _declared(row: BeamRow) -> set[str]:
    return {t["function"]["name"] for t in row.get("tools") or []
            if isinstance(t, dict) and isinstance(t.get("function"), dict)}


def _calls(row: BeamRow):
    for msg in row.get("messages") or []:
        for call in msg.get("tool_calls") or [] if isinstance(msg, dict) else []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("name"), str) and isinstance(fn.get("arguments"), dict):
                yield fn["name"], fn["arguments"]


class ToolUsage:
    """What a source's calls to undeclared tools show: per tool, per argument, types and presence."""

    def __init__(self) -> None:
        self._calls: dict[str, int] = {}
        self._types: dict[str, dict[str, set[str]]] = {}  # tool -> argument -> types (first-seen order)
        self._seen: dict[str, dict[str, int]] = {}  # tool -> argument -> calls holding it

    def observe(self, row: BeamRow) -> None:
        declared = _declared(row)
        for name, arguments in _calls(row):
            if name in declared:
                continue
            self._calls[name] = self._calls.get(name, 0) + 1
            types = self._types.setdefault(name, {})
            seen = self._seen.setdefault(name, {})
            for key, value in arguments.items():
                types.setdefault(key, set()).add(json_type(value))
                seen[key] = seen.get(key, 0) + 1

    def declarations(self) -> tuple[str, ...]:
        """One declaration per tool, as compact JSON text, sorted by name (the options' form)."""
        out = []
        for name in sorted(self._calls):
            properties = {key: {"type": _union(types)} for key, types in self._types[name].items()}
            required = [key for key, n in self._seen[name].items() if n == self._calls[name]]
            params: dict[str, Any] = {"type": "object", "properties": properties}
            if required:
                params["required"] = required
            out.append(json.dumps({"type": "function", "function": {"name": name, "parameters": params}},
                                  ensure_ascii=False, separators=(",", ":")))
        return tuple(out)


def _union(types: set[str]) -> str | list[str]:
    if {"integer", "number"} <= types:
        types = types - {"integer"}
    ordered = sorted(types)
    return ordered[0] if len(ordered) == 1 else ordered


def declare_inferred(row: BeamRow, inferred: tuple[str, ...]) -> BeamRow:
    """``row`` with the inferred declarations of the tools it calls and does not declare."""
    declared = _declared(row)
    wanted = {name for name, _ in _calls(row)} - declared
    if not wanted:
        return row
    tools = [t for t in (json.loads(text) for text in inferred) if t["function"]["name"] in wanted]
    if not tools:
        return row
    meta = dict(row.get("meta") or {})
    meta["inferred_tools"] = [t["function"]["name"] for t in tools]
    meta["notes"] = {**meta.get("notes", {}), NOTE: 1}
    return {**row, "tools": [*(row.get("tools") or []), *tools], "meta": meta}
