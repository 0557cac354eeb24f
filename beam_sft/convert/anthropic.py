"""Anthropic Messages API rows (``system``, ``messages`` of typed content blocks, ``tools`` with
``input_schema``) -> BeamRow.

What ``messages.create`` takes (Claude traces, distillation sets, logged calls):

- ``system``: a string, or a list of ``text`` blocks (joined by blank lines): the system message.
- ``content``: a string, or blocks, each ``{"type": ...}``: ``text``; ``thinking`` (the turn's
  reasoning; its ``signature`` is dropped); ``redacted_thinking`` (encrypted: alone it is no
  reasoning, the missing-reasoning policy applies; beside readable thinking it is
  ``non_text_content``, as Bedrock's ``redactedContent``: blocks.py); ``tool_use`` (``id``,
  ``name``, ``input``): a call; ``tool_result`` (``tool_use_id``, ``content`` a string or ``text``
  blocks, ``is_error``), sent in a user message: one tool message per result, results mixed with
  other content are ``tool_response_mixed``, ``is_error`` is counted (``status_dropped``).
  ``image``, ``document``, server tools' blocks (``server_tool_use``, ``web_search_tool_result``,
  ...) are ``non_text_content`` naming the block. ``cache_control`` on any block is ignored.
- ``tools``: ``{name, description, input_schema}``; a server or Anthropic-defined tool (a ``type``
  other than ``custom``: ``bash_20250124``, ``web_search_20250305``, ...) is ``bad_tool_definition``.
  ``tool_choice`` and ``thinking`` (the request's budget) are request settings, not conversation:
  ignored.

The row is rewritten into the OpenAI shape (blocks in their order, as content parts) and read by the
OpenAI reader, so every rule there (text after a call, reasoning order, ids) applies alike. A logged
call (``{"request": {...}, "response": {"content": [...], "stop_reason"}}``) is a chat_log row,
read here (chat_log.py).

>>> row = convert_anthropic({"system": "Be brief.", "messages": [
...     {"role": "user", "content": "Weather in Paris?"},
...     {"role": "assistant", "content": [{"type": "thinking", "thinking": "Ask the tool.", "signature": "s"},
...         {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
...     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"}]}],
...     "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}]}, options=ConvertOptions())
>>> row["messages"][2]["reasoning_content"], row["messages"][3]
('Ask the tool.', {'role': 'tool', 'tool_call_id': 'toolu_1', 'content': '18 C'})
"""

from __future__ import annotations

from typing import Any

from beam_sft.convert.assemble import convert_with
from beam_sft.convert.blocks import ENCRYPTED, REASONING, RESULT, BlockShape, block_message, tool_message
from beam_sft.convert.openai import read_openai_row
from beam_sft.convert.options import ColumnMap, ConvertOptions
from beam_sft.convert.rows import BeamRow, Rejection
from beam_sft.visible import quoted

# The block types only Anthropic's API writes (an OpenAI row's plain text parts are not among them); a
# thinking block only with its own "thinking" key: the OpenAI reader's thinking parts write "text".
BLOCK_TYPES = ("tool_use", "tool_result", "thinking", "redacted_thinking")
_MEDIA = ("image", "document", "search_result", "container_upload")


def convert_anthropic(raw: Any, *, options: ConvertOptions) -> BeamRow | Rejection:
    """One Messages API row -> a BeamRow (without ``meta``) or a Rejection; never raises."""
    return convert_with(read_anthropic_row, raw, options=options)


def is_anthropic(raw: Any, columns: ColumnMap) -> bool:
    """The shape detect.py votes ``anthropic`` for: a ``messages`` list beside ``system`` text blocks
    or tools with an ``input_schema``, or holding a typed block only Anthropic writes (``BLOCK_TYPES``).
    Bedrock's blocks have no ``type``; OpenAI's ``text`` parts are not among them."""
    if not isinstance(raw, dict) or not isinstance(raw.get(columns.messages), list):
        return False
    system, tools = raw.get("system"), raw.get("tools")
    if isinstance(system, list) and system and all(isinstance(b, dict) and b.get("type") == "text" for b in system):
        return True
    if isinstance(tools, list) and any(isinstance(t, dict) and "input_schema" in t for t in tools):
        return True
    return any(isinstance(m, dict) and isinstance(m.get("content"), list) and any(_anthropic_block(b) for b in m["content"])
               for m in raw[columns.messages])


def _anthropic_block(block: Any) -> bool:
    kind = block.get("type") if isinstance(block, dict) else None
    return kind in BLOCK_TYPES and (kind != "thinking" or "thinking" in block)


def read_anthropic_row(raw: Any, columns: ColumnMap) -> tuple[list[dict], list[dict], dict | None]:
    """``(draft messages, tools, template kwargs)``, by the OpenAI reader over ``openai_row``."""
    row, places = openai_row(raw, columns)
    return read_openai_row(row, ColumnMap(), places)


def openai_row(raw: Any, columns: ColumnMap, *, answer: Any = None, at: str = "", answer_at: str = ""
               ) -> tuple[dict, list[str]]:
    """The Messages row in the OpenAI shape (messages with content parts, tools as functions), and the
    entry each message was read from (``messages[2]``; a tool result ``messages[2].content[1]``), for
    rejections to name.

    ``answer``: a logged call's response content (its blocks), read as the last assistant turn, named
    ``answer_at``; ``at`` prefixes the request's places (``request.messages[2]``).
    """
    if not isinstance(raw, dict):
        raise Rejection("malformed_row", f"a row is a {type(raw).__name__}, not an object")
    messages = raw.get(columns.messages)
    if not isinstance(messages, list):
        raise Rejection("malformed_row", f"no {at}{columns.messages!r} list in the row")
    out: list[dict] = []
    places: list[str] = []
    system = None if raw.get("system") is None else _system(raw["system"], f"{at}system")
    if system:  # "" or [] is the API's "no system prompt", as omitting it is: no empty system message
        out.append({"role": "system", "content": system})
        places.append(f"{at}system")
    entries = [(msg, f"{at}{columns.messages}[{i}]") for i, msg in enumerate(messages)]
    if answer is not None:
        entries.append(({"role": "assistant", "content": answer}, answer_at))
    for msg, where in entries:
        for message, place in block_message(msg, where, BLOCKS):  # blocks.py: the rules block readers share
            out.append(message)
            places.append(place)
    row: dict[str, Any] = {k: v for k, v in raw.items() if k not in (columns.messages, "system", "tools")}
    row["messages"] = out
    if raw.get("tools") is not None:
        row["tools"] = _tools(raw["tools"], f"{at}tools")
    return row, places


def _system(system: Any, where: str) -> str:
    if isinstance(system, str):
        return system
    if not isinstance(system, list):
        raise Rejection("malformed_row", f"{where} is a {type(system).__name__}, not a string or text blocks")
    return "\n\n".join(_text(b, f"{where}[{i}]") for i, b in enumerate(system))


def _text(block: Any, where: str) -> str:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind in _MEDIA:
        raise Rejection("non_text_content", f"{where} is a {quoted(kind)} block: Beam reads text only")
    if kind != "text":
        raise Rejection("malformed_row", f"{where} is not a text block (type {quoted(kind)})")
    if not isinstance(block.get("text"), str):
        raise Rejection("malformed_row", f"{where}.text is not a string")
    return block["text"]


def _kind(block: Any) -> str | None:
    kind = block.get("type") if isinstance(block, dict) else None
    if not isinstance(kind, str):  # a list or an object is no block type (and no key to look up): read as a part
        return None
    return {"thinking": REASONING, "redacted_thinking": ENCRYPTED, "tool_result": RESULT}.get(kind)


def _part(block: Any, where: str) -> Any:
    """A block as the OpenAI reader's content part. ``text`` and ``thinking`` blocks are such parts
    already (the reader reads ``thinking`` as reasoning; ``signature``, ``cache_control`` and
    ``citations`` are not read); any type not read here is named by it (``non_text_content``)."""
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "tool_use":
        call = {k: block[k] for k in ("id", "name", "input") if k in block}  # no "type": a function call
        return {"type": "tool_call", "value": call}
    if kind in _MEDIA:
        raise Rejection("non_text_content", f"{where} is a {quoted(kind)} block: Beam reads text only")
    return block


def _result(block: dict, where: str) -> dict:
    content = block.get("content", "")  # the API lets a result leave its content out: an empty result
    if isinstance(content, str):
        texts = [content]
    elif isinstance(content, list):
        texts = [_text(b, f"{where}.content[{j}]") for j, b in enumerate(content)]
    else:
        raise Rejection("malformed_row", f"{where}.content is a {type(content).__name__}, not a string or blocks")
    return tool_message(texts, block.get("tool_use_id"), "error" if block.get("is_error") else None)


# Anthropic's blocks, as blocks.py reads them (langchain.py reads an Anthropic model's content by them too).
BLOCKS = BlockShape(kind=_kind, part=_part, result=_result, result_name="tool_result")


def _tools(tools: Any, where: str) -> list[dict]:
    """Custom tools as function tools; a server or Anthropic-defined tool (its own ``type``) the template
    cannot declare is ``bad_tool_definition``. Anything else is left to tools.py to judge."""
    if not isinstance(tools, list):
        return tools
    out = []
    for i, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind not in (None, "custom", "function"):
            raise Rejection("bad_tool_definition", f"{where}[{i}] is a {quoted(kind)} tool "
                            f"({quoted(tool.get('name'))}): Beam declares custom tools (name, input_schema) only")
        if kind == "function" or not isinstance(tool, dict) or "input_schema" not in tool:
            out.append(tool)  # OpenAI's shape, or no tool at all: normalize_tools reads or rejects it
            continue
        fn = {k: tool[k] for k in ("name", "description") if tool.get(k) is not None}
        fn["parameters"] = tool["input_schema"]
        out.append({"type": "function", "function": fn})
    return out
