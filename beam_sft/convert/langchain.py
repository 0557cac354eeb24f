"""LangChain / LangGraph message dumps -> BeamRow: a ``messages`` list (or a bare list) of LangChain's
own message serializations, beside OpenAI-shaped ``tools``.

The two serializations langchain_core writes:

- ``messages_to_dict``: ``{"type": "human", "data": {"content", "additional_kwargs", ...}}``;
- ``dumpd``: ``{"lc": 1, "type": "constructor", "id": [..., "HumanMessage"], "kwargs": {"content", ...}}``
  (``id`` ends with the class; ``kwargs`` holds only the fields that were set). Any other ``lc``
  object (``not_implemented``, ``secret``: what dumpd writes for a value it cannot serialize) is
  ``malformed_row`` naming it, as is an ``lc`` version other than 1.

Every item must be one of them (an OpenAI message among them is ``malformed_row``: which shape the
list is cannot be told). Each is rewritten into the OpenAI shape and the row read by the OpenAI
reader (one set of rules), rejections naming the source's place (``messages[2].data.tool_calls[0]``,
``row[1].kwargs.content[0]``). The rules:

- Types (``type``, or the class ``id`` names; a ``...MessageChunk`` as its message): ``human`` ->
  user, ``ai`` -> assistant, ``system`` -> system (``developer`` when its
  ``additional_kwargs.__openai_role__`` says so, as langchain-openai writes a developer message),
  ``tool`` and ``function`` -> tool, ``chat`` -> its ``role`` (the one alias table). Anything else
  (``remove``, LangGraph's RemoveMessage) is ``unknown_role``; a ``data.type`` that disagrees with
  the outer one is ``malformed_row``.
- Calls, on AI messages: ``tool_calls`` (``{name, args, id, type: "tool_call"}``),
  ``additional_kwargs.tool_calls`` (OpenAI's, arguments as JSON text), ``tool_call_chunks`` (a
  chunk's unparsed calls), content parts (Anthropic's ``tool_use``, its arguments a streamed message's
  ``partial_json`` where it has one; LangChain v1's ``tool_call``)
  and ``additional_kwargs.function_call`` are one turn's calls written several times: each one
  present is read, and they must be the same calls (name, arguments, and ids where both have one),
  else ``conflicting_tool_calls`` naming both. ``function_call`` beside the others must be one of
  them (Gemini via LangChain mirrors its last call there). Content parts carry them when they exist
  (their place among the text is kept). Calls on any other message are ``malformed_tool_call``.
- ``invalid_tool_calls`` (or a v1 ``invalid_tool_call`` part) non-empty: the model wrote a call that
  could not be parsed: ``malformed_tool_call``, never dropped.
- Reasoning: ``additional_kwargs.reasoning_content`` (DeepSeek, Qwen, Ollama via LangChain),
  ``reasoning``/``thinking`` text, OpenRouter's ``reasoning_details`` and content parts of type
  ``thinking``/``reasoning`` are carriers that must agree (``conflicting_reasoning``), as in every
  reader. langchain-openai's Responses API reasoning (``additional_kwargs.reasoning`` as a
  ``{"type": "reasoning", "summary": [...]}`` object, or a ``reasoning`` content block of that shape)
  is read by the Responses reader's rule (its text, else its summary; encrypted alone is none); any
  other reasoning value that is not text is ``malformed_row``. Anthropic's content is read by anthropic.py's block rules (``redacted_thinking``
  alone is no reasoning; beside ``thinking``, ``non_text_content``; ``tool_result`` blocks in a human
  message are tool messages).
- ``additional_kwargs.refusal`` is the answer (as OpenAI's ``refusal`` field); ``audio`` and the other
  media keys are ``non_text_content``. Other ``additional_kwargs`` keys (``parsed``, provider ids)
  are ignored, as the OpenAI reader ignores a message's keys it does not read.
- Tool messages: ``tool_call_id``, ``name``; ``status: "error"`` is counted (``status_dropped``), as
  Bedrock's and Anthropic's error results are; ``artifact`` (kept from the model by LangChain) is ignored.
- Bookkeeping, ignored: ``id``, ``example``, ``response_metadata``, ``usage_metadata``.

>>> row = convert_langchain({"messages": [
...     {"type": "human", "data": {"content": "Weather in Paris?"}},
...     {"type": "ai", "data": {"content": "", "additional_kwargs": {"reasoning_content": "Ask the tool."},
...      "tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1", "type": "tool_call"}]}},
...     {"type": "tool", "data": {"content": "18 C", "tool_call_id": "c1"}}]},
...     options=ConvertOptions(require_declared_tools=False))
>>> row["messages"][1]["tool_calls"][0]["function"], row["messages"][2]
({'name': 'get_weather', 'arguments': {'city': 'Paris'}}, {'role': 'tool', 'tool_call_id': 'c1', 'content': '18 C'})
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from beam_sft.convert.anthropic import BLOCKS
from beam_sft.convert.assemble import convert_with, missing_content
from beam_sft.convert.blocks import block_message
from beam_sft.convert.openai import read_openai_row
from beam_sft.convert.options import ColumnMap, ConvertOptions
from beam_sft.convert.parts import (
    MEDIA_PART_KEYS,
    canonical_role,
    read_tool_calls,
    reasoning_details_text,
    reasoning_field_text,
)
from beam_sft.convert.reasoning import REASONING_FIELDS
from beam_sft.convert.rows import BeamRow, Rejection
from beam_sft.convert.tools import parse_arguments, parse_json_text, parse_tool_call
from beam_sft.visible import KEY_CHARS, quoted

# A message's type (messages_to_dict) -> its role; "chat" takes its own ``role``.
TYPES: dict[str, str | None] = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool",
                                "function": "tool", "chat": None}
# The class dumpd's ``id`` names (and a chunk's type, "AIMessageChunk") -> the type.
CLASSES: dict[str, str] = {"HumanMessage": "human", "AIMessage": "ai", "SystemMessage": "system",
                           "ToolMessage": "tool", "FunctionMessage": "function", "ChatMessage": "chat"}
_CHUNK = "Chunk"
_STATUSES = ("success", "error")


def convert_langchain(raw: Any, *, options: ConvertOptions) -> BeamRow | Rejection:
    """One row of LangChain messages -> a BeamRow (without ``meta``) or a Rejection; never raises."""
    return convert_with(read_langchain_row, raw, options=options)


def is_langchain(raw: Any, columns: ColumnMap) -> bool:
    """The shape detect.py votes ``langchain`` for: a message list (``messages``, or the row itself)
    holding an item of ``type`` and ``data`` or of ``lc`` and ``kwargs``; no other format writes these."""
    messages = raw if isinstance(raw, list) else raw.get(columns.messages) if isinstance(raw, dict) else None
    return isinstance(messages, list) and any(_is_message(m) for m in messages)


def _is_message(item: Any) -> bool:
    return isinstance(item, dict) and (
        ("lc" in item and "kwargs" in item) or ("type" in item and isinstance(item.get("data"), dict)))


def read_langchain_row(raw: Any, columns: ColumnMap) -> tuple[list[dict], list[dict], dict | None]:
    """``(draft messages, tools, template kwargs)``, by the OpenAI reader over ``openai_row``."""
    row, places = openai_row(raw, columns)
    return read_openai_row(row, ColumnMap(), places)


def openai_row(raw: Any, columns: ColumnMap) -> tuple[dict, list[str]]:
    """The row in the OpenAI shape, and the entry each message was read from (``messages[2].data``; a
    tool result block of a human message ``messages[2].data.content[1]``), for rejections to name."""
    if isinstance(raw, list):
        messages, key, rest = raw, "row", {}
    elif isinstance(raw, dict):
        messages, key = raw.get(columns.messages), columns.messages
        if not isinstance(messages, list):
            raise Rejection("malformed_row", f"no {key!r} list of LangChain messages in the row")
        rest = {k: v for k, v in raw.items() if k != key}
    else:
        raise Rejection("malformed_row", f"a row is a {type(raw).__name__}, not an object")
    out: list[dict] = []
    places: list[str] = []
    for i, item in enumerate(messages):
        for message, place in _message(item, f"{key}[{i}]"):
            out.append(message)
            places.append(place)
    return {**rest, "messages": out}, places


def _unwrap(item: Any, where: str) -> tuple[dict, str, str]:
    """``(fields, their place, type)`` of one serialized message."""
    if not isinstance(item, dict):
        raise Rejection("malformed_row", f"{where} is not an object")
    if "lc" in item:
        if item["lc"] != 1 or isinstance(item["lc"], bool):
            raise Rejection("malformed_row", f"{where}.lc is {quoted(item['lc'])}, not 1 (the serialization read)")
        if item.get("type") != "constructor":
            raise Rejection("malformed_row", f"{where} is an lc {quoted(item.get('type'))} object "
                            f"({quoted(item.get('id'))}), not a message: LangChain could not serialize it")
        path = item.get("id")
        if not isinstance(path, list) or not path or not all(isinstance(p, str) for p in path):
            raise Rejection("malformed_row", f"{where}.id is {quoted(path)}, not a class path")
        kind = _type_of(path[-1], classes=True)
        if kind is None:
            raise Rejection("unknown_role", f"{where}.id names {quoted('.'.join(path))}, not a LangChain message "
                            f"class (known: {', '.join(CLASSES)}, and their chunks)")
        fields, at = item.get("kwargs"), f"{where}.kwargs"
    elif "data" in item:
        kind = _type_of(item.get("type"), classes=False)
        if kind is None:
            raise Rejection("unknown_role", f"{where}.type is {quoted(item.get('type'))} (known: "
                            f"{', '.join(TYPES)}, and the chunks' AIMessageChunk, ...)")
        fields, at = item.get("data"), f"{where}.data"
    else:
        keys = ", ".join(quoted(k, KEY_CHARS) for k in list(item)[:12]) or "none"
        raise Rejection("malformed_row", f"{where} is not a LangChain message (neither type and data nor lc and "
                        f"kwargs; keys: {keys})")
    if not isinstance(fields, dict):
        raise Rejection("malformed_row", f"{at} is {quoted(fields, 60)}, not an object")
    inner = fields.get("type")
    if inner is not None and _type_of(inner, classes=False) != kind:
        raise Rejection("malformed_row", f"{at}.type is {quoted(inner)}, but the message is a {kind!r} message")
    return fields, at, kind


def _type_of(name: Any, *, classes: bool) -> str | None:
    """The type a serialized type name (or, with ``classes``, a class name) stands for; a chunk's as its
    message's (``AIMessageChunk`` -> ``ai``: a type as messages_to_dict writes a chunk's, a class as dumpd does)."""
    if not isinstance(name, str):
        return None
    if name.endswith(_CHUNK):
        return CLASSES.get(name[: -len(_CHUNK)])
    return CLASSES.get(name) if classes else (name if name in TYPES else None)


def _message(item: Any, where: str) -> list[tuple[dict, str]]:
    """The OpenAI messages of one LangChain message, each with its place."""
    fields, at, kind = _unwrap(item, where)
    extra = fields.get("additional_kwargs")
    if extra is None:
        extra = {}
    if not isinstance(extra, dict):
        raise Rejection("malformed_row", f"{at}.additional_kwargs is {quoted(extra, 60)}, not an object")
    role = _role(kind, fields, extra, at)
    media = next((k for k in MEDIA_PART_KEYS if extra.get(k) not in (None, "", [], {})), None)
    if media is not None:
        raise Rejection("non_text_content", f"{at}.additional_kwargs.{media}: Beam reads text only")
    if role != "assistant":
        _no_assistant_fields(fields, extra, at, role)
    content = fields.get("content")
    if role == "tool":
        return [(_tool(fields, at), at)]
    if content is None and role != "assistant":  # named with the source's keys, not the rewritten message's
        raise missing_content(fields, at, role)
    message: dict[str, Any] = {"role": role}
    if isinstance(content, list):
        entries = block_message({"role": role, "content": content}, at, _SHAPE)
        if entries[0][0]["role"] == "tool":  # tool_result blocks of a human message: one tool message each
            return entries
        content = entries[0][0]["content"]
    if "content" in fields:
        message["content"] = content
    if fields.get("name") is not None:
        message["name"] = fields["name"]  # the OpenAI reader counts it (name_dropped)
    if role == "assistant":
        message.update(_assistant(fields, extra, content, at))
    return [(message, at)]


def _role(kind: str, fields: dict, extra: dict, at: str) -> str:
    if kind == "chat":
        role = canonical_role(fields.get("role"), f"{at}.role")
        if role == "call":  # a call is an AI message's tool_calls, never a chat message of its own
            raise Rejection("unknown_role", f"{at}.role is {quoted(fields['role'])}, not a speaker")
        return role
    role = TYPES[kind]
    assert role is not None
    openai_role = extra.get("__openai_role__")
    if openai_role is not None:
        if kind != "system" or openai_role not in ("system", "developer"):
            raise Rejection("malformed_row", f"{at}.additional_kwargs.__openai_role__ is {quoted(openai_role)} on a "
                            f"{kind!r} message (read: 'system' or 'developer' on a system message)")
        return openai_role
    return role


# What only an AI message carries: on any other message it is refused, never read as if it were not there.
_CALL_FIELDS = ("tool_calls", "invalid_tool_calls", "tool_call_chunks")
_CALL_KWARGS = ("tool_calls", "function_call")
_ASSISTANT_KWARGS = (*REASONING_FIELDS, "reasoning_details", "refusal")


def _no_assistant_fields(fields: dict, extra: dict, at: str, role: str) -> None:
    for owner, keys, place in ((fields, _CALL_FIELDS, at), (extra, _CALL_KWARGS, f"{at}.additional_kwargs")):
        found = next((k for k in keys if owner.get(k) not in (None, "", [])), None)
        if found is not None:
            raise Rejection("malformed_tool_call", f"{place}.{found} on a {role} message: only the assistant "
                            "calls tools")
    found = next((k for k in _ASSISTANT_KWARGS if extra.get(k) not in (None, "")), None)
    if found is not None:
        raise Rejection("malformed_row", f"{at}.additional_kwargs.{found} on a {role} message: only the assistant's "
                        "turn carries it")


def _tool(fields: dict, at: str) -> dict:
    message: dict[str, Any] = {"role": "tool"}
    if "content" in fields:
        message["content"] = fields["content"]
    for key in ("tool_call_id", "name"):
        if fields.get(key) is not None:
            message[key] = fields[key]
    status = fields.get("status")
    if status is not None:
        if status not in _STATUSES:
            raise Rejection("malformed_row", f"{at}.status is {quoted(status)}, not 'success' or 'error'")
        message["status"] = status  # read_tool_result counts an error (status_dropped)
    return message


def _assistant(fields: dict, extra: dict, content: Any, at: str) -> dict:
    """The assistant message's calls (one carrier, the others checked against it), reasoning fields and refusal."""
    out: dict[str, Any] = {}
    for key in REASONING_FIELDS:
        # text, or langchain-openai's Responses reasoning object (its text or summary, the Responses rule)
        value = reasoning_field_text(extra.get(key), f"{at}.additional_kwargs.{key}")
        if value is not None:
            out[key] = value
    if extra.get("reasoning_details") is not None:
        reasoning_details_text(extra["reasoning_details"], f"{at}.additional_kwargs.reasoning_details")  # its place
        out["reasoning_details"] = extra["reasoning_details"]
    refusal = extra.get("refusal")
    if refusal is not None:
        if not isinstance(refusal, str):
            raise Rejection("malformed_row", f"{at}.additional_kwargs.refusal is a {type(refusal).__name__}, not text")
        out["refusal"] = refusal
    _refuse_invalid(fields.get("invalid_tool_calls"), f"{at}.invalid_tool_calls")
    carriers = _call_carriers(fields, extra, content, at)
    mirror = extra.get("function_call")
    if mirror is not None:
        where = f"{at}.additional_kwargs.function_call"
        call = parse_tool_call(mirror, where)
        if not carriers:
            carriers = [(where, [call])]
        elif not any(_same(call, c) for c in carriers[0][1]):
            raise Rejection("conflicting_tool_calls", f"{where} is none of the calls of {carriers[0][0]}")
    if carriers:
        first, calls = carriers[0]
        for place, other in carriers[1:]:
            if len(other) != len(calls) or not all(_same(a, b) for a, b in zip(calls, other, strict=True)):
                raise Rejection("conflicting_tool_calls", f"{first} and {place} hold different calls")
        if not first.startswith(f"{at}.content"):  # content parts carry them in place; else the field does
            out["tool_calls"] = calls
    return out


def _refuse_invalid(value: Any, where: str) -> None:
    if value is None or value == []:
        return
    if not isinstance(value, list):
        raise Rejection("malformed_row", f"{where} is {quoted(value, 60)}, not a list")
    _invalid(value[0], f"{where}[0]")


def _invalid(call: Any, where: str) -> None:
    """An invalid tool call (LangChain's, or a v1 content part): the model's call, unparsed; never dropped."""
    name = call.get("name") if isinstance(call, dict) else None
    error = call.get("error") if isinstance(call, dict) else None
    raise Rejection("malformed_tool_call", f"{where}: the model wrote a call LangChain could not parse "
                    f"({quoted(name)}: {quoted(error, 80)})")


def _call_carriers(fields: dict, extra: dict, content: Any, at: str) -> list[tuple[str, list[dict]]]:
    """``(place, parsed calls)`` of each non-empty carrier of the turn's calls, content parts first."""
    carriers = []
    parts = content if isinstance(content, list) else []
    in_parts = [(j, p.get("value", p.get("tool_call", p.get("function")))) for j, p in enumerate(parts)
                if isinstance(p, dict) and p.get("type") == "tool_call"]  # the call parts read_content reads
    if in_parts:
        carriers.append((f"{at}.content", [parse_tool_call(
            parse_json_text(v, f"{at}.content[{j}]") if isinstance(v, str) else v, f"{at}.content[{j}]")
            for j, v in in_parts]))
    for key, shape in (("tool_calls", _lc_call), ("tool_call_chunks", _chunk_call)):
        place = f"{at}.{key}"
        raw = fields.get(key)
        if raw is not None and not isinstance(raw, list):
            raise Rejection("malformed_row", f"{place} is {quoted(raw, 60)}, not a list")
        if raw:
            carriers.append((place, [shape(c, f"{place}[{j}]") for j, c in enumerate(raw)]))
    raw = read_tool_calls(extra.get("tool_calls"), f"{at}.additional_kwargs")  # OpenAI's: JSON text too
    if raw:
        place = f"{at}.additional_kwargs.tool_calls"
        carriers.append((place, [parse_tool_call(c, f"{place}[{j}]") for j, c in enumerate(raw)]))
    return carriers


def _lc_call(call: Any, where: str) -> dict:
    """A LangChain ToolCall (``{name, args, id, type: "tool_call"}``); an OpenAI-shaped one as it is."""
    if isinstance(call, dict) and call.get("type") == "tool_call":
        call = {k: v for k, v in call.items() if k != "type"}
    return parse_tool_call(call, where)


def _chunk_call(call: Any, where: str) -> dict:
    """A ToolCallChunk (``{name, args as JSON text, id, index, type: "tool_call_chunk"}``)."""
    if not isinstance(call, dict) or call.get("type") not in (None, "tool_call_chunk"):
        raise Rejection("malformed_tool_call", f"{where} is not a tool_call_chunk")
    return parse_tool_call({k: call[k] for k in ("id", "name", "args") if k in call}, where)


def _same(a: dict, b: dict) -> bool:
    """One call written twice: name and arguments alike, and the ids where both have one."""
    ids = (a.get("id"), b.get("id"))
    return a["function"] == b["function"] and (None in ids or ids[0] == ids[1])


def _part(block: Any, where: str) -> Any:
    """A content part: LangChain v1's ``tool_call`` block (``{id, name, args}``) as a call part, its
    ``invalid_tool_call`` refused; everything else by Anthropic's block rules (anthropic.BLOCKS)."""
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "tool_call" and not any(k in block for k in ("value", "tool_call", "function")):
        return {"type": "tool_call", "value": {k: block[k] for k in ("id", "name", "args") if k in block}}
    if kind == "invalid_tool_call":
        _invalid(block, where)
    if kind == "tool_use" and isinstance(block.get("partial_json"), str):
        return _streamed_tool_use(block, where)
    return BLOCKS.part(block, where)


def _streamed_tool_use(block: dict, where: str) -> dict:
    """A ``tool_use`` block of a streamed Anthropic message (AIMessageChunks added up): its arguments are
    the ``partial_json`` deltas joined, its ``input`` the empty object the stream started with. An
    ``input`` that says something else is the arguments twice, differently: neither is picked."""
    arguments = parse_arguments(block["partial_json"], where)
    if block.get("input") not in (None, {}) and block["input"] != arguments:
        raise Rejection("malformed_tool_call", f"{where} writes its arguments twice, differently (input and "
                        "partial_json)")
    return {"type": "tool_call", "value": {**{k: block[k] for k in ("id", "name") if k in block}, "arguments": arguments}}


_SHAPE = replace(BLOCKS, part=_part)
