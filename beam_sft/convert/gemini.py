"""Vertex AI / Gemini tuning rows (``systemInstruction``, ``contents`` of ``role``/``parts``, ``tools``) -> BeamRow.

Vertex AI's supervised-tuning JSON Lines (and the Gemini API's ``contents``):

- ``contents``: ``{"role": "user" | "model" | "function", "parts": [...]}``; ``model`` is the
  assistant (the one alias table), ``function`` (or ``tool``) a turn of tool results.
- Parts: ``{"text"}`` (with ``"thought": true``: the model's reasoning), ``{"functionCall":
  {"name", "args", "id"?}}`` a call, ``{"functionResponse": {"name", "response", "id"?}}`` a
  result (one tool message per part, its ``response`` as JSON text; a response that is only
  ``{"content": TEXT}`` or ``{"result": TEXT}`` is that text). ``fileData``/``inlineData`` parts
  are ``non_text_content``. ``thoughtSignature`` and other bookkeeping keys beside a part's data
  are ignored.
- ``systemInstruction`` (or ``system_instruction``): its text parts, joined, are the system prompt
  (its ``role`` is ignored, as Vertex ignores it).
- ``tools``: ``[{"functionDeclarations": [{"name", "description", "parameters"}]}]`` (or
  ``function_declarations``); Gemini's upper-case schema types (``OBJECT``, ``STRING``) are
  written in JSON Schema's words (tools.normalize_schema).

The row is rewritten into the OpenAI shape and read by the OpenAI reader (one set of rules).

>>> row = convert_gemini({"contents": [
...     {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
...     {"role": "model", "parts": [{"text": "Ask the tool.", "thought": True},
...                                 {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]},
...     {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"content": "18 C"}}}]},
...     {"role": "model", "parts": [{"text": "Paris: a thought.", "thought": True}, {"text": "18 C."}]}]},
...     options=ConvertOptions(require_declared_tools=False))
>>> row["messages"][2], row["messages"][3]["content"]
({'role': 'tool', 'tool_call_id': 'call_0', 'name': 'get_weather', 'content': '18 C'}, '18 C.')
"""

from __future__ import annotations

import json
from typing import Any

from beam_sft.convert.assemble import convert_with
from beam_sft.convert.openai import read_openai_row
from beam_sft.convert.options import ColumnMap, ConvertOptions
from beam_sft.convert.parts import canonical_role
from beam_sft.convert.rows import BeamRow, Rejection

_MEDIA_PARTS = ("fileData", "inlineData", "file_data", "inline_data", "executableCode", "codeExecutionResult")
_UNWRAPPED = ("content", "result", "output")


def convert_gemini(raw: Any, *, options: ConvertOptions) -> BeamRow | Rejection:
    """One Gemini row -> a BeamRow (without ``meta``) or a Rejection; never raises."""
    return convert_with(read_gemini_row, raw, options=options)


def is_gemini(raw: Any) -> bool:
    """The shape detect.py votes ``gemini`` for: a ``contents`` list of role/parts objects."""
    contents = raw.get("contents") if isinstance(raw, dict) else None
    return isinstance(contents, list) and any(isinstance(c, dict) and "parts" in c for c in contents)


def read_gemini_row(raw: Any, columns: ColumnMap) -> tuple[list[dict], list[dict], dict | None]:
    """``(draft messages, tools, template kwargs)``, by the OpenAI reader over ``openai_row``."""
    row, places = openai_row(raw)
    return read_openai_row(row, ColumnMap(), places)


def openai_row(raw: Any) -> tuple[dict, list[str]]:
    """The Gemini row in the OpenAI shape, and the entry each message was read from (``contents[2]``;
    a function response ``contents[2].parts[1]``: each part is a message), for rejections to name."""
    if not isinstance(raw, dict) or not isinstance(raw.get("contents"), list):
        raise Rejection("malformed_row", "no 'contents' list in the row")
    messages: list[dict] = []
    places: list[str] = []
    key = "systemInstruction" if "systemInstruction" in raw else "system_instruction"
    system = raw.get(key)
    if system is not None:
        text = _system_text(system)
        if text:
            messages.append({"role": "system", "content": text})
            places.append(key)
    for i, content in enumerate(raw["contents"]):
        read = _content(content, f"contents[{i}]")
        messages.extend(read)
        places.extend([f"contents[{i}]"] if len(read) == 1 and read[0]["role"] != "tool"
                      else [f"contents[{i}].parts[{j}]" for j in range(len(read))])
    row: dict[str, Any] = {k: v for k, v in raw.items()
                           if k not in ("contents", "systemInstruction", "system_instruction", "tools")}
    row["messages"] = messages
    if raw.get("tools") is not None:
        row["tools"] = _tools(raw["tools"])
    return row, places


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    parts = system.get("parts") if isinstance(system, dict) else None
    if not isinstance(parts, list) or not all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in parts):
        raise Rejection("malformed_row", "systemInstruction is not {parts: [{text}]}")
    return "\n\n".join(p["text"] for p in parts)


def _content(content: Any, where: str) -> list[dict]:
    if not isinstance(content, dict):
        raise Rejection("malformed_row", f"{where} is not an object")
    if "role" not in content:
        raise Rejection("malformed_row", f"{where} has no role")
    parts = content.get("parts")
    if not isinstance(parts, list) or not parts:
        raise Rejection("missing_content", f"{where} has no parts")
    role = canonical_role(content["role"], where)
    responses = [p for p in parts if isinstance(p, dict) and ("functionResponse" in p or "function_response" in p)]
    if responses:
        if len(responses) != len(parts):
            raise Rejection("tool_response_mixed", f"{where} mixes functionResponse parts with other parts")
        return [_response(p.get("functionResponse", p.get("function_response")), f"{where}.parts[{j}]")
                for j, p in enumerate(parts)]
    converted = [_part(p, f"{where}.parts[{j}]", role) for j, p in enumerate(parts)]
    return [{"role": content["role"], "content": converted}]


def _part(part: Any, where: str, role: str) -> dict:
    if not isinstance(part, dict):
        raise Rejection("malformed_row", f"{where} is not an object")
    call = part.get("functionCall", part.get("function_call"))
    if call is not None:
        if role != "assistant" or not isinstance(call, dict):
            raise Rejection("malformed_tool_call", f"{where}: a functionCall outside a model turn, or not an object")
        value: dict[str, Any] = {"name": call.get("name"), "arguments": call.get("args")}
        if call.get("id") is not None:
            value = {"id": call["id"], **value}
        return {"type": "tool_call", "value": value}
    media = next((k for k in _MEDIA_PARTS if k in part), None)
    if media is not None:
        raise Rejection("non_text_content", f"{where} is a {media!r} part: Beam reads text only")
    if not isinstance(part.get("text"), str):
        raise Rejection("malformed_row", f"{where} has no text (keys: {', '.join(map(repr, part)) or 'none'})")
    if part.get("thought") is True and role == "assistant":
        return {"type": "reasoning", "value": part["text"]}
    return {"type": "text", "text": part["text"]}


def _response(response: Any, where: str) -> dict:
    if not isinstance(response, dict) or not isinstance(response.get("name"), str):
        raise Rejection("malformed_row", f"{where}.functionResponse has no name")
    body = response.get("response")
    if isinstance(body, dict) and len(body) == 1 and next(iter(body)) in _UNWRAPPED and isinstance(
            next(iter(body.values())), str):
        text = next(iter(body.values()))
    elif isinstance(body, str):
        text = body
    else:
        text = json.dumps(body, ensure_ascii=False)
    msg: dict[str, Any] = {"role": "tool"}
    if response.get("id") is not None:
        msg["tool_call_id"] = response["id"]
    msg.update(name=response["name"], content=text)
    return msg


def _tools(tools: Any) -> list[dict]:
    groups = tools if isinstance(tools, list) else [tools]
    out: list[dict] = []
    for i, group in enumerate(groups):
        declarations = group.get("functionDeclarations", group.get("function_declarations")) if isinstance(
            group, dict) else None
        if not isinstance(declarations, list):
            raise Rejection("bad_tool_definition", f"tools[{i}] has no functionDeclarations (search and code "
                            "execution tools are not function tools)")
        out.extend(declarations)
    return out
