"""The start-up probe: the fast encoder must match ``apply_chat_template`` before a run relies on it.

It encodes a fixed set of awkward rows (every tool-schema shape the Beam template renders, tool
calls with every argument type, weights, reasoning efforts, whitespace and non-ASCII text, rows the
template rejects) plus the first rows of the run's own data, with both encoders, and compares ids,
masks and errors. Any difference and the run uses the reference encoder instead, saying why.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from beam_sft.data.synthetic import synthetic_rows
from beam_sft.errors import Rejection

_TOOL_SCHEMAS = [
    {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                      "days": {"type": "integer", "default": 3}}, "required": ["city"]},
    {"type": "object", "description": "Search options", "properties": {
        "mode": {"type": "string", "enum": ["fast", "deep"], "default": "fast"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "limit": {"type": ["integer", "null"], "nullable": True},
        "filter": {"oneOf": [{"type": "string", "description": "a query"}, {"type": "object", "properties": {
            "field": {"type": "string"}}}]},
        "nested": {"type": "object", "title": "Nested", "properties": {"x": {"type": "number"}}},
        "examples": {"type": "string", "examples": ["a", "b"]},
    }},
    {"type": "string"},
    {"type": "object", "properties": {}},
]


def _tool(name: str, schema: dict, description: str = "Does a thing.\nSecond line.") -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


def _call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def probe_rows() -> list[dict]:
    """Fixed rows that reach every branch of a Beam template the data is likely to reach."""
    tools = [_tool(f"tool_{i}", schema) for i, schema in enumerate(_TOOL_SCHEMAS)]
    bash = _tool("bash", {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})
    user = {"role": "user", "content": "  Hello,\n\nworld! héllo 日本語 🎉 \t"}
    answer = {"role": "assistant", "reasoning_content": "\nThink  twice.\n", "content": " Answer:\n- one\n- two  "}
    rows = [
        {"messages": [user, answer]},
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "developer", "content": "Use JSON."},
                      user, {**answer, "weight": 0}, {"role": "user", "content": "again"},
                      {"role": "assistant", "reasoning_content": "r", "content": "null"}],
         "chat_template_kwargs": {"reasoning_effort": "low", "model_identity": "You are a probe."}},
        {"messages": [user, {"role": "assistant", "reasoning_content": "Call both.", "tool_calls": [
            _call("c0", "tool_0", {"city": "Paris", "days": 2}),
            _call("c1", "tool_1", {"mode": "deep", "tags": ["x", "y"], "limit": None, "filter": {"field": "a"},
                                   "nested": {"x": 1.5}, "flag": True})]},
            {"role": "tool", "tool_call_id": "c0", "name": "tool_0", "content": "18 C"},
            {"role": "tool", "tool_call_id": "c1", "content": "{\"hits\": []}"},
            {"role": "assistant", "reasoning_content": "Done.", "content": "It is 18 C."}],
         "tools": tools, "chat_template_kwargs": {"reasoning_effort": 64}},
        {"messages": [{"role": "system", "content": ""}, user,
                      {"role": "assistant", "reasoning_content": "Run it.",
                       "tool_calls": [_call("b0", "bash", {"command": "ls -la\necho 'done'"})]}],
         "tools": [bash, tools[2], tools[3]]},
        {"messages": [user, {"role": "assistant", "reasoning_content": "", "content": "no reasoning"},
                      {"role": "user", "content": "x"}, answer]},
        {"messages": [user, answer], "chat_template_kwargs": {"reasoning_effort": "bogus"}},  # the template raises
        {"messages": [user, {"role": "assistant", "reasoning_content": "r",
                             "tool_calls": [_call("z", "tool_0", {"city": "a</rfl:parameter>b"})]}],
         "tools": tools[:1]},  # the template raises
    ]

    rows.extend(synthetic_rows(6, seed=7, scale=0.05, vocab=500))
    return rows


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    rows: int
    mismatch: str | None = None

    def to_json(self) -> dict:
        return {"ok": self.ok, "rows": self.rows, "mismatch": self.mismatch}


def _describe(result) -> str:
    if isinstance(result, Rejection):
        return f"error {result.code}: {result.detail[:200]}"
    return f"{len(result.input_ids)} tokens, {int(result.assistant_masks.sum())} trained"


def error_kind(error: Rejection) -> tuple[str, str | None]:
    """What an error is, not how it is worded: its reason code and the type of the exception behind it.

    The two encoders reach the same failure by different roads (a RecursionError from a deep schema is
    raised at a different depth, with other words), so comparing messages would call them different.

    >>> try:
    ...     try:
    ...         raise RecursionError("maximum recursion depth exceeded while calling a Python object")
    ...     except RecursionError as exc:
    ...         raise Rejection("template_error", f"RecursionError: {exc}") from exc
    ... except Rejection as err:
    ...     error_kind(err)
    ('template_error', 'RecursionError')
    """
    cause = error.__cause__
    return error.code, type(cause).__name__ if cause is not None else None


def _same(a, b) -> bool:
    if isinstance(a, Rejection) or isinstance(b, Rejection):
        return isinstance(a, Rejection) and isinstance(b, Rejection) and error_kind(a) == error_kind(b)
    return np.array_equal(a.input_ids, b.input_ids) and np.array_equal(a.assistant_masks, b.assistant_masks)


def probe(fast, reference, rows: Iterable[dict]) -> ProbeResult:
    """Encode ``rows`` with both encoders; the first difference, if any, decides."""
    rows = list(rows)
    got = fast.encode_batch(rows)
    want = reference.encode_batch(rows)
    for index, (a, b) in enumerate(zip(got, want, strict=True)):
        if not _same(a, b):
            meta = rows[index].get("meta") or {}
            where = f"{meta.get('source')}:{meta.get('row')}" if meta else f"probe row {index}"
            return ProbeResult(False, len(rows), f"{where}: fast gave {_describe(a)}, template gave {_describe(b)}")
    return ProbeResult(True, len(rows))
