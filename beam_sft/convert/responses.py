"""OpenAI Responses API rows (``instructions``, ``input`` and ``output`` items, flat ``tools``) -> BeamRow.

What ``responses.create`` takes and returns, as agent traces and request/response logs keep it:

- ``input``: a string (one user message) or a list of items; ``output``: the response's items,
  read after the input; ``instructions``: the system prompt.
- Items: ``message`` (``role`` user/system/developer/assistant; ``type`` may be left out), its
  ``content`` a string or parts (``input_text``/``output_text``; an assistant's ``refusal`` part
  is its answer, as OpenAI's ``refusal`` field is); ``reasoning`` (its ``content`` of
  ``reasoning_text`` parts when present, else its ``summary`` of ``summary_text`` parts joined by
  blank lines; ``encrypted_content`` alone is no reasoning: the missing-reasoning policy applies);
  ``function_call`` (``call_id``, ``name``, ``arguments`` as JSON text); ``function_call_output``
  (``call_id``, ``output`` text or ``input_text`` parts): one tool message, matched to its call by
  id as every tool message is (validate.py).
- The assistant items of one turn (reasoning, messages, calls, up to the next item of another
  kind) are ONE assistant turn, named by their range (``output[0..2]``); two message items of
  one turn are joined by a blank line.
- ``tools``: ``{"type": "function", "name", "description", "parameters"}`` (tools.py reads the
  flat shape); ``reasoning.effort`` is the template's ``reasoning_effort``.

Nothing is dropped unsaid: items of hosted tools (``web_search_call``, ``computer_call``, ...),
custom (free-text) tool calls, compaction items and image/file/audio parts are ``non_text_content``;
an ``item_reference`` or a ``previous_response_id`` (turns kept on OpenAI's side, not in the row) is
``malformed_row``; an unfinished response or item (``status`` ``incomplete``, ...) is
``response_cut_off``. The row is rewritten into the OpenAI shape and read by the OpenAI reader (one
set of rules: text after a call, reasoning order, ids, weights).

>>> row = convert_responses({"instructions": "Be brief.", "input": "Weather in Paris?", "output": [
...     {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Ask the tool."}]},
...     {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'}]},
...     options=ConvertOptions(require_declared_tools=False))
>>> row["messages"][2]["reasoning_content"], row["messages"][2]["tool_calls"][0]["function"]
('Ask the tool.', {'name': 'get_weather', 'arguments': {'city': 'Paris'}})
"""

from __future__ import annotations

from typing import Any

from beam_sft.convert.assemble import convert_with, joined_place
from beam_sft.convert.openai import read_openai_row
from beam_sft.convert.options import ColumnMap, ConvertOptions
from beam_sft.convert.parts import (
    LOSS_FLAGS,
    TEXT_PART_TYPES,
    canonical_role,
    reasoning_item_text,
    refuse_media,
)
from beam_sft.convert.reasoning import REASONING_FIELDS
from beam_sft.convert.rows import BeamRow, Rejection
from beam_sft.convert.tools import parse_tool_call
from beam_sft.visible import SHOWN_CHARS, cut, quoted

_ASSISTANT_ITEMS = ("reasoning", "function_call")
# What the API writes that Beam's template has no place for: hosted tools' calls and results, custom
# (free-text) tool calls, compacted context. Named, never skipped: the model saw them.
_UNRENDERABLE = (
    "web_search_call", "file_search_call", "computer_call", "computer_call_output", "code_interpreter_call",
    "image_generation_call", "local_shell_call", "local_shell_call_output", "shell_call", "shell_call_output",
    "apply_patch_call", "apply_patch_call_output", "mcp_call", "mcp_list_tools", "mcp_approval_request",
    "mcp_approval_response", "custom_tool_call", "custom_tool_call_output", "compaction")
_ITEM_TYPES = ("message", *_ASSISTANT_ITEMS, "function_call_output", "item_reference", *_UNRENDERABLE)
_RESPONSES_PARTS = ("input_text", "output_text", "input_image", "input_file", "input_audio")
_MEDIA_PARTS = ("input_image", "input_file", "input_audio", "image_url", "image", "audio", "file")
# Chat Completions fields an assistant item may carry when a log mixed the two APIs: read by neither
# shape here, so refused rather than dropped.
_CHAT_FIELDS = ("tool_calls", "function_call", *REASONING_FIELDS)


def convert_responses(raw: Any, *, options: ConvertOptions) -> BeamRow | Rejection:
    """One Responses row -> a BeamRow (without ``meta``) or a Rejection; never raises."""
    return convert_with(read_responses_row, raw, options=options)


def is_responses(raw: Any) -> bool:
    """The shape detect.py votes ``responses`` for: an ``output`` list of Responses items, or an
    ``input`` list holding one (a typed item, or a message of ``input_text``/``output_text`` parts).
    Alpaca's ``input``/``output`` strings are not lists: never read as this."""
    return isinstance(raw, dict) and (_holds_items(raw.get("output")) or _holds_items(raw.get("input")))


def _holds_items(value: Any) -> bool:
    return isinstance(value, list) and any(
        isinstance(item, dict) and (item.get("type") in _ITEM_TYPES or (
            isinstance(item.get("content"), list) and any(
                isinstance(p, dict) and p.get("type") in _RESPONSES_PARTS for p in item["content"])))
        for item in value)


def read_responses_row(raw: Any, columns: ColumnMap) -> tuple[list[dict], list[dict], dict | None]:
    """``(draft messages, tools, template kwargs)``, by the OpenAI reader over ``openai_row``."""
    row, places = openai_row(raw)
    return read_openai_row(row, ColumnMap(), places)


def openai_row(raw: Any, response: Any = None, *, request_at: str = "", response_at: str = ""
               ) -> tuple[dict, list[str]]:
    """The Responses row in the OpenAI shape, and the entry each message was read from (``input[3]``,
    an assistant turn of several items ``output[0..2]``), for rejections to name.

    ``response``: a logged call's response object, apart from its request ``raw`` (chat_log.py's
    ``request``/``response`` records); ``request_at``/``response_at`` prefix the places named
    (``request.input[3]``, ``response.output[0]``).
    """
    if not isinstance(raw, dict):
        raise Rejection("malformed_row", f"a row is a {type(raw).__name__}, not an object")
    if response is None:
        response = raw
    elif not isinstance(response, dict) or not isinstance(response.get("output"), list):
        raise Rejection("malformed_row", f"{response_at}output is not a list of items (a logged Responses call "
                        "needs the response's output)")
    _check_finished(response.get("status"), f"{response_at}status", response.get("incomplete_details"))
    for key in ("previous_response_id", "conversation"):
        if raw.get(key):
            raise Rejection("malformed_row", f"the row continues a stored conversation ({request_at}{key} "
                            f"{quoted(raw[key])}): the earlier turns the model saw are not in the row")
    if raw.get("input") is None:
        raise Rejection("malformed_row", f"no {request_at}input in the row (a logged response needs the "
                        "request's input beside its output)")
    items = [*_entries(raw, "instructions", "system", request_at), *_entries(raw, "input", "user", request_at),
             *_entries(response, "output", None, response_at)]
    row: dict[str, Any] = {k: raw[k] for k in ("tools", "chat_template_kwargs", "reasoning_effort")
                           if raw.get(k) is not None}
    effort = raw["reasoning"].get("effort") if isinstance(raw.get("reasoning"), dict) else None
    if effort is not None:
        # (asked by key, not by a default equal to effort: NaN is not equal to itself)
        if "reasoning_effort" in row and row["reasoning_effort"] != effort:
            raise Rejection("conflicting_template_kwargs", f"reasoning.effort is {quoted(effort)} but "
                            f"reasoning_effort is {quoted(row['reasoning_effort'])}")
        row["reasoning_effort"] = effort
    messages: list[dict] = []
    places: list[str] = []
    turn: dict | None = None  # the assistant turn being read: its parts, flags and place
    for item, where in items:
        if _is_assistant(item, where):
            turn = _add_to_turn(turn, item, where)
            continue
        if turn is not None:
            messages.append(_finish_turn(turn))
            places.append(turn["place"])
            turn = None
        messages.append(_message(item, where))
        places.append(where)
    if turn is not None:
        messages.append(_finish_turn(turn))
        places.append(turn["place"])
    row["messages"] = messages
    return row, places


def _entries(raw: dict, key: str, role: str | None, at: str) -> list[tuple[Any, str]]:
    """``(item, place)`` of a row key: a string is one message of ``role``, a list its items."""
    value = raw.get(key)
    if value is None:
        return []
    if isinstance(value, str) and role is not None:
        return [({"role": role, "content": value}, f"{at}{key}")]
    if not isinstance(value, list):
        raise Rejection("malformed_row", f"{at}{key} is a {type(value).__name__}, not a list of items")
    return [(item, f"{at}{key}[{i}]") for i, item in enumerate(value)]


def _check_finished(status: Any, where: str, details: Any = None) -> None:
    if status is None or status == "completed":
        return
    reason = details.get("reason") if isinstance(details, dict) else None
    raise Rejection("response_cut_off", f"{where} is {quoted(status)}" + (f" ({cut(str(reason), SHOWN_CHARS)})" if reason else "")
                    + ": the response did not finish (not a whole answer of the model's)")


def _kind(item: Any, where: str) -> str:
    if not isinstance(item, dict):
        raise Rejection("malformed_row", f"{where} is not an object")
    kind = item.get("type", "message")
    if kind in _UNRENDERABLE:
        raise Rejection("non_text_content", f"{where} is a {kind!r} item: Beam's template renders messages, "
                        "reasoning and function calls only")
    if kind == "item_reference":
        raise Rejection("malformed_row", f"{where} is an item_reference to {quoted(item.get('id'))}: the item itself "
                        "is not in the row")
    if kind not in _ITEM_TYPES:
        raise Rejection("malformed_row", f"{where} has type {quoted(kind)} (known: message, reasoning, function_call, "
                        "function_call_output)")
    _check_finished(item.get("status"), f"{where}.status")
    return kind


def _is_assistant(item: Any, where: str) -> bool:
    kind = _kind(item, where)
    if kind in _ASSISTANT_ITEMS:
        return True
    return kind == "message" and "role" in item and canonical_role(item["role"], where) == "assistant"


def _add_to_turn(turn: dict | None, item: dict, where: str) -> dict:
    """``turn`` with ``item`` read onto it (a new turn when ``turn`` is None)."""
    if turn is None:
        turn = {"parts": [], "flags": {}, "place": where}
    else:
        turn["place"] = joined_place(turn["place"], where)
    parts: list[dict] = turn["parts"]
    for key in LOSS_FLAGS:  # a loss flag on any item of the turn is the turn's; two that differ are refused
        if item.get(key) is not None:
            if key in turn["flags"] and turn["flags"][key] != item[key]:
                raise Rejection("bad_weight", f"{turn['place']}: the items of one turn have different {key}")
            turn["flags"][key] = item[key]
    kind = item.get("type", "message")
    if kind == "reasoning":
        text = reasoning_item_text(item, where)
        if text is None:
            return turn  # encrypted only, or empty: no reasoning to train on
        if any(p["type"] != "reasoning" for p in parts):
            raise Rejection("interleaved_reasoning", f"{where}: reasoning after the answer or a call of its turn "
                            f"({turn['place']})")
        if parts:  # two reasoning items of one turn: one reasoning, in their order
            parts[-1] = {"type": "reasoning", "value": f"{parts[-1]['value']}\n\n{text}"}
        else:
            parts.append({"type": "reasoning", "value": text})
    elif kind == "function_call":
        parts.append({"type": "tool_call", "value": _call(item, where)})
    else:
        found = next((k for k in _CHAT_FIELDS if item.get(k) not in (None, "", [])), None)
        if found is not None:
            raise Rejection("malformed_row", f"{where} has {found!r}, a Chat Completions field: a Responses row "
                            "writes calls as function_call items and reasoning as reasoning items")
        text = _text(item.get("content"), f"{where}.content", assistant=True)
        if any(p["type"] == "text" for p in parts):
            parts.append({"type": "text", "text": "\n\n"})
        parts.append({"type": "text", "text": text})
    return turn


def _finish_turn(turn: dict) -> dict:
    return {"role": "assistant", "content": turn["parts"], **turn["flags"]}


def _message(item: dict, where: str) -> dict:
    """A user/system/developer message, or a tool message of a ``function_call_output``."""
    if item.get("type") != "function_call_output":
        if "role" not in item:
            raise Rejection("malformed_row", f"{where} has no role (keys: {', '.join(map(repr, item)) or 'none'})")
        return item  # the OpenAI reader reads its role, its text and its parts, naming each by its place here
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise Rejection("tool_result_unmatched", f"{where} has no call_id: which call it answers cannot be told")
    output = item.get("output")
    if output is None:
        raise Rejection("missing_content", f"{where} (function_call_output) has no output")
    return {"role": "tool", "tool_call_id": call_id, "content": _text(output, f"{where}.output", assistant=False)}


def _text(content: Any, field: str, *, assistant: bool) -> str:
    """The text of a content string or list of parts, the field named ``field`` (``input[2].content``)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise Rejection("malformed_row", f"{field} is {'missing' if content is None else type(content).__name__}, "
                        "not a string or a list of parts")
    texts = []
    for j, part in enumerate(content):
        at = f"{field}[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if isinstance(part, str):
            texts.append(part)
        elif kind in TEXT_PART_TYPES and isinstance(part.get("text"), str):
            refuse_media(part, at)
            texts.append(part["text"])
        elif kind == "refusal" and assistant and isinstance(part.get("refusal"), str):
            texts.append(part["refusal"])  # the model's answer, as OpenAI's refusal field is
        elif kind in _MEDIA_PARTS:
            raise Rejection("non_text_content", f"{at} is a {kind!r} part: Beam reads text only")
        else:
            raise Rejection("malformed_row", f"{at} is not a text part (type {quoted(kind)})")
    return "".join(texts)


def _call(item: dict, where: str) -> dict:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise Rejection("malformed_tool_call", f"{where} has no call_id: its output cannot be matched to it")
    return parse_tool_call({"id": call_id, "name": item.get("name"), "arguments": item.get("arguments")}, where)
