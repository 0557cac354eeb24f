"""ShareGPT rows (``conversations`` of ``from``/``value`` turns) -> BeamRow.

- Speakers (``from``): human/user; gpt/assistant/chatgpt/model/bot; system; developer;
  function_call (an assistant tool call); observation/tool/function (a tool result).
- ``function_call`` values: a JSON string or object ``{"name", "arguments", "id"?}``, or a list
  of them (parallel calls). Consecutive call turns, and a ``gpt`` turn directly followed by call
  turns, form one assistant turn: the same speaker said the text and made the calls.
- A ``gpt`` value that is exactly a JSON list of OpenAI calls (``[{"id", "function": {"name",
  "arguments"}}]``, hermes-function-calling style) is read as those calls.
- Tool results are text, kept verbatim. A value that is a JSON envelope ``{"tool_call_id"?,
  "name"?, "content"}`` is unwrapped; one that merely looks like one but is not valid JSON stays
  text (the tool said that).
- Row columns: ``tools`` (list or JSON string), ``system`` (prepended as a system message),
  ``chat_template_kwargs``/``reasoning_effort``. Turn keys ``reasoning_content``/``reasoning``/
  ``thinking`` and ``weight``/``loss``/``train`` are read as on OpenAI messages.

>>> convert_sharegpt({"conversations": [
...     {"from": "human", "value": "Hi"},
...     {"from": "gpt", "value": "<think>Greet back.</think>Hello!"}]}, options=ConvertOptions())
{'messages': [{'role': 'user', 'content': 'Hi'}, {'role': 'assistant', 'reasoning_content': 'Greet back.', 'content': 'Hello!'}]}
"""

from __future__ import annotations

import json
from typing import Any

from beam_sft.convert.assemble import convert_with, parse_envelope
from beam_sft.convert.options import ColumnMap, ConvertOptions
from beam_sft.convert.parts import read_reasoning_fields, read_template_kwargs, read_weight
from beam_sft.convert.rows import BeamRow, Reject, Rejection
from beam_sft.convert.tools import merge_tools, normalize_tools, parse_json_text, parse_tool_call

SPEAKERS = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "model": "assistant",
    "bot": "assistant",
    "system": "system",
    "developer": "developer",
    "function_call": "call",
    "observation": "tool",
    "tool": "tool",
    "function": "tool",
}


def convert_sharegpt(raw: Any, *, options: ConvertOptions) -> BeamRow | Rejection:
    """One ShareGPT row -> a BeamRow (without ``meta``) or a Rejection; never raises."""
    return convert_with(read_sharegpt_row, raw, options=options)


def read_sharegpt_row(raw: Any, columns: ColumnMap) -> tuple[list[dict], list[dict], dict | None]:
    """``(draft messages, tools, template kwargs)`` of one row (see assemble.py for drafts)."""
    if isinstance(raw, list):
        raw = {columns.conversations: raw}
    if not isinstance(raw, dict):
        raise Reject("malformed_row", f"a row is a {type(raw).__name__}, not an object")
    turns = raw.get(columns.conversations)
    if not isinstance(turns, list):
        raise Reject("malformed_row", f"no {columns.conversations!r} list in the row")
    drafts = read_turns(turns, columns)
    system = raw.get(columns.system)
    if system is not None:
        if not isinstance(system, str):
            raise Reject("malformed_row", f"{columns.system!r} is not a string")
        if system:
            drafts.insert(0, {"role": "system", "content": system})
    tools = merge_tools(
        normalize_tools(raw.get(columns.tools), columns.tools),
        normalize_tools(raw.get("functions"), "functions"),
    )
    return drafts, tools, read_template_kwargs(raw)


def read_turns(turns: list, columns: ColumnMap) -> list[dict]:
    drafts: list[dict] = []
    for i, turn in enumerate(turns):
        where = f"conversations[{i}]"
        if not isinstance(turn, dict):
            raise Reject("malformed_row", f"{where} is not an object")
        speaker = turn.get(columns.role_key)
        if not isinstance(speaker, str):
            raise Reject("malformed_row", f"{where} has no {columns.role_key!r}")
        role = SPEAKERS.get(speaker.lower())
        if role is None:
            raise Reject("unknown_role", f"{where} is from {speaker!r}")
        value = turn.get(columns.content_key)
        if role == "call":
            reasoning = read_reasoning_fields(turn, where)
            _add_calls(drafts, _read_call_value(value, where), reasoning, read_weight(turn, where), where)
            continue
        if value is not None and not isinstance(value, str):
            raise Reject("malformed_row", f"{where}.{columns.content_key} is not a string")
        if role == "assistant":
            drafts.append(_read_assistant(turn, value, where))
        elif role == "tool":
            drafts.append(_read_result(turn, value or "", where))
        else:
            drafts.append({"role": role, "content": value})
    return drafts


def _read_assistant(turn: dict, value: str | None, where: str) -> dict:
    calls = _openai_call_list(value, where)
    return {
        "role": "assistant",
        "content": None if calls else value,
        "reasoning": read_reasoning_fields(turn, where),
        "tool_calls": calls or [],
        "weight": read_weight(turn, where),
    }


def _openai_call_list(value: str | None, where: str) -> list[dict] | None:
    if not value or not value.lstrip().startswith("["):
        return None
    try:
        items = json.loads(value)
    except (ValueError, RecursionError):
        return None
    if not (
        isinstance(items, list)
        and items
        and all(
            isinstance(c, dict) and isinstance(c.get("function"), dict) and "name" in c["function"]
            for c in items
        )
    ):
        return None
    return [parse_tool_call(c, f"{where}[{j}]") for j, c in enumerate(items)]


def _read_call_value(value: Any, where: str) -> list[dict]:
    if isinstance(value, str):
        value = parse_json_text(value, where)
    items = value if isinstance(value, list) else [value]
    if not items:
        raise Reject("malformed_tool_call", f"{where} holds no call")
    return [
        parse_tool_call(c, f"{where}[{j}]" if isinstance(value, list) else where) for j, c in enumerate(items)
    ]


def _add_calls(
    drafts: list[dict], calls: list[dict], reasoning: list, weight: int | None, where: str
) -> None:
    last = drafts[-1] if drafts else None
    if last is not None and last["role"] == "assistant":
        if weight is not None and last["weight"] is not None and weight != last["weight"]:
            raise Reject("bad_weight", f"{where}: the call and the text of one turn have different weights")
        last["tool_calls"] = last["tool_calls"] + calls
        last["reasoning"] = last["reasoning"] + reasoning
        last["weight"] = last["weight"] if last["weight"] is not None else weight
    else:
        drafts.append(
            {
                "role": "assistant",
                "content": None,
                "reasoning": reasoning,
                "tool_calls": calls,
                "weight": weight,
            }
        )


def _read_result(turn: dict, value: str, where: str) -> dict:
    draft = parse_envelope(value) or {"role": "tool", "content": value}
    for key in ("tool_call_id", "name"):
        if isinstance(turn.get(key), str) and turn[key] and key not in draft:
            draft[key] = turn[key]
    return draft
