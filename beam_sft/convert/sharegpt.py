"""ShareGPT rows (``conversations`` of ``from``/``value`` turns) -> BeamRow.

- Speakers (``from``): the one alias table of parts.py, as in every reader (human/user;
  gpt/assistant/chatgpt/model/bot; system; developer; function_call, an assistant tool call;
  observation/tool/function, a tool result).
- ``value``: a string, or a list of content parts read as OpenAI content parts are. A user,
  system or tool turn without a value is ``missing_content``. A turn's ``tool_calls`` key is
  read as on OpenAI messages.
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

from typing import Any

from beam_sft.convert.assemble import (
    add_call_turn,
    add_system_column,
    convert_with,
    missing_content,
    parse_envelope,
    place_drafts,
    read_call_value,
)
from beam_sft.convert.options import ColumnMap, ConvertOptions
from beam_sft.convert.parts import (
    ROLE_ALIASES,
    canonical_role,
    check_untrained_weight,
    read_content,
    read_reasoning_fields,
    read_result_content,
    read_template_kwargs,
    read_tool_calls,
    read_weight,
)
from beam_sft.convert.rows import BeamRow, Rejection
from beam_sft.convert.tools import maybe_json, merge_tools, normalize_tools, parse_json_text, parse_tool_call
from beam_sft.visible import KEY_CHARS, quoted

SPEAKERS = ROLE_ALIASES  # one table for every reader


def convert_sharegpt(raw: Any, *, options: ConvertOptions) -> BeamRow | Rejection:
    """One ShareGPT row -> a BeamRow (without ``meta``) or a Rejection; never raises."""
    return convert_with(read_sharegpt_row, raw, options=options)


def read_sharegpt_row(raw: Any, columns: ColumnMap) -> tuple[list[dict], list[dict], dict | None]:
    """``(draft messages, tools, template kwargs)`` of one row (see assemble.py for drafts)."""
    key = "row" if isinstance(raw, list) else columns.conversations  # a message is named by its own list
    if isinstance(raw, list):
        raw = {columns.conversations: raw}
    if not isinstance(raw, dict):
        raise Rejection("malformed_row", f"a row is a {type(raw).__name__}, not an object")
    turns = raw.get(columns.conversations)
    if not isinstance(turns, list):
        from beam_sft.convert.openai import no_list_message

        raise Rejection("malformed_row", no_list_message(columns.conversations, raw))
    drafts = read_turns(turns, columns, key)
    add_system_column(drafts, raw.get(columns.system), columns.system)
    tools = merge_tools(
        normalize_tools(raw.get(columns.tools), columns.tools),
        normalize_tools(raw.get("functions"), "functions"),
    )
    return drafts, tools, read_template_kwargs(raw)


def read_turns(turns: list, columns: ColumnMap, key: str = "conversations") -> list[dict]:
    """Draft messages of the turns of list ``key``, each named ``key[i]`` (see assemble.py)."""
    drafts: list[dict] = []
    for i, turn in enumerate(turns):
        where = f"{key}[{i}]"
        since = len(drafts)
        _read_turn(turn, where, columns, drafts)
        place_drafts(drafts, since, where)
    return drafts


def _read_turn(turn: Any, where: str, columns: ColumnMap, drafts: list[dict]) -> None:
    """Read one turn onto ``drafts`` (a call turn may join the draft before it)."""
    if not isinstance(turn, dict):
        raise Rejection("malformed_row", f"{where} is not an object")
    if columns.role_key not in turn:
        raise Rejection("malformed_row", f"{where} has no {columns.role_key!r} (keys: {', '.join(quoted(k, KEY_CHARS) for k in list(turn)[:12])})")
    role = canonical_role(turn[columns.role_key], where)
    value = turn.get(columns.content_key)
    if role == "call":
        reasoning = read_reasoning_fields(turn, where)
        add_call_turn(drafts, read_call_value(value, where), reasoning, read_weight(turn, where), where)
        return
    if role != "assistant":
        check_untrained_weight(turn, where, role)
    if role == "tool":  # a structured result is its JSON text, as in every reader
        text, reasoning_parts, part_calls, late = read_result_content(value, f"{where}.{columns.content_key}"), [], [], None
    else:
        text, reasoning_parts, part_calls, late = read_content(value, f"{where}.{columns.content_key}", role=role)
    if role == "assistant":
        drafts.append(_read_assistant(turn, text, reasoning_parts, part_calls, late, where))
    elif role == "tool" and columns.content_key in turn:  # an explicit null is an empty result
        drafts.append(_read_result(turn, text or "", where))
    elif text is None:
        raise missing_content(turn, where, role)
    else:
        drafts.append({"role": role, "content": text})


def _read_assistant(turn: dict, value: str | None, reasoning_parts: list[str], part_calls: list,
                    late: str | None, where: str) -> dict:
    calls = _openai_call_list(value, where)
    structured = [parse_tool_call(c, f"{where}.tool_calls[{j}]")
                  for j, c in enumerate(read_tool_calls(turn.get("tool_calls"), where))]
    parts = [parse_tool_call(parse_json_text(c, f"{where} tool_call part") if isinstance(c, str) else c,
                             f"{where} tool_call part") for c in part_calls]
    if sum(bool(x) for x in (calls, structured, parts)) > 1:
        raise Rejection("conflicting_tool_calls", f"{where} carries its calls in more than one place")
    return {
        "role": "assistant",
        "content": None if calls else value,
        "text_after_calls": late,
        "reasoning": read_reasoning_fields(turn, where) + [("reasoning part", "".join(reasoning_parts))],
        "tool_calls": calls or structured or parts,
        "weight": read_weight(turn, where),
    }


def _openai_call_list(value: str | None, where: str) -> list[dict] | None:
    if not value or not value.lstrip().startswith("["):
        return None
    items = maybe_json(value, f"{where} (a JSON list of calls)")
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


def _read_result(turn: dict, value: str, where: str) -> dict:
    draft = parse_envelope(value) or {"role": "tool", "content": value}
    for key in ("tool_call_id", "name"):
        if isinstance(turn.get(key), str) and turn[key] and key not in draft:
            draft[key] = turn[key]
    return draft
