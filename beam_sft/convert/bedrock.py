"""Amazon Bedrock Converse rows (``messages`` of content blocks, ``system`` blocks, ``toolConfig``) -> BeamRow.

The Converse API (and Bedrock's ``bedrock-conversation-2024`` fine-tuning files) writes every
message's ``content`` as a list of blocks, each an object with one key:

- ``{"text"}``: text (the OpenAI reader already reads these as text parts);
- ``{"reasoningContent": {"reasoningText": {"text", "signature"?}}}``: the assistant's reasoning;
  ``redactedContent`` (encrypted reasoning) alone is no reasoning (the missing-reasoning policy applies,
  as for the Responses API's ``encrypted_content``); beside readable reasoning it is ``non_text_content``
  (only part of the reasoning could be read);
- ``{"toolUse": {"toolUseId", "name", "input"}}``: a call (assistant turns only);
- ``{"toolResult": {"toolUseId", "content": [{"text"} | {"json"}], "status"?}}``: a tool result,
  sent in a user message. A user message holding only results becomes one tool message per result;
  results mixed with text are ``tool_response_mixed``;
- ``{"guardContent": {"text": {"text", "qualifiers"?}}}``: text the guardrail assesses, which the model
  reads as any text: read as text (a guarded ``image`` is ``non_text_content``);
- ``cachePoint`` markers carry nothing and are skipped; images, documents, video are
  ``non_text_content``.

Row keys: ``system`` (a list of ``text``, ``guardContent`` and ``cachePoint`` blocks, read as above and
prepended as one system message), ``toolConfig.tools``
of ``toolSpec`` (``name``, ``description``, ``inputSchema.json``). The row is rewritten into the
OpenAI shape (blocks in their order, as content parts) and read by the OpenAI reader, so every
rule there (text after a call, reasoning order, ids) applies alike; the rules shared with the
Anthropic reader (encrypted reasoning, result messages) are blocks.py's.

>>> row = convert_bedrock({"messages": [
...     {"role": "user", "content": [{"text": "Top song on WZPZ?"}]},
...     {"role": "assistant", "content": [{"reasoningContent": {"reasoningText": {"text": "Ask the tool."}}},
...         {"toolUse": {"toolUseId": "t1", "name": "top_song", "input": {"sign": "WZPZ"}}}]},
...     {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"json": {"song": "X"}}]}}]}],
...     "toolConfig": {"tools": [{"toolSpec": {"name": "top_song", "inputSchema": {"json": {"type": "object"}}}}]}},
...     options=ConvertOptions())
>>> row["messages"][1]["tool_calls"][0]["id"], row["messages"][2]
('t1', {'role': 'tool', 'tool_call_id': 't1', 'content': '{"song": "X"}'})
"""

from __future__ import annotations

import json
from typing import Any

from beam_sft.convert.assemble import convert_with
from beam_sft.convert.blocks import (
    ENCRYPTED,
    REASONING,
    RESULT,
    SKIP,
    BlockShape,
    block_message,
    tool_message,
)
from beam_sft.convert.openai import read_openai_row
from beam_sft.convert.options import ColumnMap, ConvertOptions
from beam_sft.convert.rows import BeamRow, Rejection
from beam_sft.visible import quoted

BLOCK_KEYS = ("toolUse", "toolResult", "reasoningContent")  # the blocks that tell a Converse row
_SKIPPED = ("cachePoint",)
_TEXT_KEYS = frozenset({"text", "guardContent"})


def convert_bedrock(raw: Any, *, options: ConvertOptions) -> BeamRow | Rejection:
    """One Converse row -> a BeamRow (without ``meta``) or a Rejection; never raises."""
    return convert_with(read_bedrock_row, raw, options=options)


def is_bedrock(raw: Any, columns: ColumnMap) -> bool:
    """The shape detect.py votes ``bedrock`` for: a ``toolConfig``, ``system`` blocks, or a message
    whose content blocks include a tool use, a tool result or reasoning."""
    if not isinstance(raw, dict):
        return False
    if isinstance(raw.get("toolConfig"), dict) or _is_blocks(raw.get("system")):
        return isinstance(raw.get(columns.messages), list)
    messages = raw.get(columns.messages)
    return isinstance(messages, list) and any(
        isinstance(m, dict) and isinstance(m.get("content"), list)
        and any(isinstance(b, dict) and any(k in b for k in BLOCK_KEYS) for b in m["content"])
        for m in messages)


def _is_blocks(value: Any) -> bool:
    # Converse system blocks are untyped ({"text"}, {"guardContent"}, {"cachePoint"}), one at least holding
    # text; Anthropic's ({"type": "text", "text"}) are not these
    return isinstance(value, list) and any(isinstance(b, dict) and _TEXT_KEYS & b.keys() for b in value) and all(
        isinstance(b, dict) and "type" not in b and (_TEXT_KEYS | set(_SKIPPED)) & b.keys() for b in value)


def read_bedrock_row(raw: Any, columns: ColumnMap) -> tuple[list[dict], list[dict], dict | None]:
    """``(draft messages, tools, template kwargs)``, by the OpenAI reader over ``openai_row``."""
    row, places = openai_row(raw, columns)
    return read_openai_row(row, ColumnMap(), places)


def openai_row(raw: Any, columns: ColumnMap) -> tuple[dict, list[str]]:
    """The Converse row in the OpenAI shape (messages with content parts, tools as functions), and the
    entry each message was read from (``messages[2]``; a tool result ``messages[2].content[1]``: each
    result is a message), for rejections to name."""
    if not isinstance(raw, dict):
        raise Rejection("malformed_row", f"a row is a {type(raw).__name__}, not an object")
    messages = raw.get(columns.messages)
    if not isinstance(messages, list):
        raise Rejection("malformed_row", f"no {columns.messages!r} list in the row")
    out: list[dict] = []
    places: list[str] = []
    system = _system(raw.get("system"))
    if system is not None:
        out.append({"role": "system", "content": system})
        places.append("system")
    for i, msg in enumerate(messages):
        where = f"{columns.messages}[{i}]"
        for message, place in block_message(msg, where, _SHAPE):  # blocks.py: the rules block readers share
            out.append(message)
            places.append(place)
    row: dict[str, Any] = {k: v for k, v in raw.items()
                           if k not in (columns.messages, "system", "toolConfig", "schemaVersion")}
    row["messages"] = out
    config = raw.get("toolConfig")
    if config is not None:
        row["tools"] = _tools(config)
    return row, places


def _system(system: Any) -> str | None:
    """The system blocks' text, joined by blank lines (None: no system text). A ``cachePoint`` carries
    nothing and is skipped, as in messages; ``guardContent`` is text the model reads (``_guard_text``)."""
    if system is None:
        return None
    if not isinstance(system, list):
        raise Rejection("malformed_row", f"system is a {type(system).__name__}, not a list of blocks")
    texts = []
    for i, block in enumerate(system):
        where = f"system[{i}]"
        if not isinstance(block, dict) or "type" in block:  # an Anthropic block ({"type": "text"}) is not Converse's
            raise Rejection("malformed_row", f"{where} is not a Converse system block ({{text}}, {{guardContent}} or "
                            "{cachePoint})")
        if "text" in block:
            texts.append(_text(block, where))
        elif "guardContent" in block:
            texts.append(_guard_text(block["guardContent"], f"{where}.guardContent"))
        elif not any(k in block for k in _SKIPPED):
            kind = next(iter(block), "empty")
            raise Rejection("malformed_row", f"{where} is a {quoted(kind)} block, not text, guardContent or cachePoint")
    return "\n\n".join(texts) if texts else None


def _guard_text(content: Any, where: str) -> str:
    """A ``guardContent`` block's text. It is text the model reads like any other (the guardrail also
    assesses it; its ``qualifiers`` tell the guardrail how), so it is read as text; a guarded image is
    ``non_text_content``."""
    if isinstance(content, dict) and "image" in content:
        raise Rejection("non_text_content", f"{where} is an 'image' block: Beam reads text only")
    text = content.get("text") if isinstance(content, dict) else None
    if not isinstance(text, dict) or not isinstance(text.get("text"), str):
        raise Rejection("malformed_row", f"{where} has no text.text string")
    return text["text"]


def _text(block: dict, where: str) -> str:
    text = block.get("text")
    if not isinstance(text, str):
        raise Rejection("malformed_row", f"{where}.text is not a string")
    return text


def _kind(block: Any) -> str | None:
    if not isinstance(block, dict):
        return None
    if any(k in block for k in _SKIPPED):
        return SKIP
    if "toolResult" in block:
        return RESULT
    if "reasoningContent" in block:
        content = block["reasoningContent"]
        return ENCRYPTED if isinstance(content, dict) and "redactedContent" in content else REASONING
    return None


def _part(block: Any, where: str) -> Any:
    if not isinstance(block, dict):
        return block
    if "toolUse" in block:
        use = block["toolUse"]
        if not isinstance(use, dict):
            raise Rejection("malformed_tool_call", f"{where}.toolUse is not an object")
        call: dict[str, Any] = {"name": use.get("name"), "arguments": use.get("input")}
        if use.get("toolUseId") is not None:
            call = {"id": use["toolUseId"], **call}
        return {"type": "tool_call", "value": call}
    if "reasoningContent" in block:
        content = block["reasoningContent"]
        text = content.get("reasoningText") if isinstance(content, dict) else None
        if not isinstance(text, dict) or not isinstance(text.get("text"), str):
            raise Rejection("malformed_row", f"{where}.reasoningContent has no reasoningText.text")
        return {"type": "reasoning", "value": text["text"]}
    if "text" in block and len(block) == 1:
        return {"type": "text", "text": block["text"]}
    if "guardContent" in block:
        return {"type": "text", "text": _guard_text(block["guardContent"], f"{where}.guardContent")}
    kind = next(iter(block), "empty")
    raise Rejection("non_text_content", f"{where} is a {quoted(kind)} block: Beam reads text only")


def _result(item: dict, where: str) -> dict:
    result = item["toolResult"]
    where = f"{where}.toolResult"
    if not isinstance(result, dict):
        raise Rejection("malformed_row", f"{where} is not an object")
    content = result.get("content")
    if not isinstance(content, list):
        raise Rejection("missing_content", f"{where} has no content list")
    texts = []
    for j, block in enumerate(content):
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif isinstance(block, dict) and "json" in block:
            texts.append(json.dumps(block["json"], ensure_ascii=False))
        else:
            kind = next(iter(block), "empty") if isinstance(block, dict) else type(block).__name__
            raise Rejection("non_text_content", f"{where}.content[{j}] is a {quoted(kind)} block: Beam reads text only")
    return tool_message(texts, result.get("toolUseId"), result.get("status"))


_SHAPE = BlockShape(kind=_kind, part=_part, result=_result, result_name="toolResult")


def _tools(config: Any) -> list[dict]:
    if not isinstance(config, dict) or not isinstance(config.get("tools"), list):
        raise Rejection("bad_tool_definition", "toolConfig has no tools list")
    tools = []
    for i, tool in enumerate(config["tools"]):
        spec = tool.get("toolSpec") if isinstance(tool, dict) else None
        if not isinstance(spec, dict):
            raise Rejection("bad_tool_definition", f"toolConfig.tools[{i}] has no toolSpec")
        fn: dict[str, Any] = {"name": spec.get("name")}
        if spec.get("description") is not None:
            fn["description"] = spec["description"]
        schema = spec.get("inputSchema")
        if schema is not None:
            if not isinstance(schema, dict) or not isinstance(schema.get("json"), dict):
                raise Rejection("bad_tool_definition", f"toolConfig.tools[{i}].toolSpec.inputSchema has no json schema")
            fn["parameters"] = schema["json"]
        tools.append({"type": "function", "function": fn})
    return tools
