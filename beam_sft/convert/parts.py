"""Reading one source message's fields, the same way in every reader: the role (one alias table),
content (string, null or parts), loss flags, reasoning fields, ``tool_calls``, media columns.

Roles: ``ROLE_ALIASES`` maps every speaker name any reader accepts (OpenAI ``role``, ShareGPT
``from``, compared without case) to system, developer, user, assistant, tool, or ``call`` (a turn
whose value is a tool call, ShareGPT's ``function_call``).

Loss flags: ``weight``, ``loss_weight`` (LLaMA-Factory), ``loss`` (xtuner) and ``train``
(open-instruct), booleans or the numbers 0/1, all give the turn's weight; flags that disagree,
or another number, are ``bad_weight``.

Content parts: ``{"type": "text", "text"|"value": ...}`` parts are joined with no separator (the
parts of one message are pieces of one text, as in OpenAI's API). Parts typed ``reasoning`` or
``thinking`` carry the turn's reasoning and ``tool_call`` parts carry calls (LLaMA-Factory v1);
both only on assistant turns, and reasoning only before any answer text or call; text parts after
a call are kept apart (``ConvertOptions.text_after_tool_call`` decides). Any other part (image,
audio, video, file, refusal, ...), and a non-empty ``images``/``videos``/``audios`` column,
rejects the row with ``non_text_content``: Beam is text only, and dropping the media silently
would train on a conversation the annotator never saw.

>>> read_content([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "m", role="user")
('ab', [], [], None)
>>> read_content([{"type": "reasoning", "value": "r"}, {"type": "text", "value": "x"}], "m", role="assistant")
('x', ['r'], [], None)
>>> read_weight({"role": "assistant", "loss_weight": 0.0}, "m")
0
>>> canonical_role("Bot", "m"), canonical_role("observation", "m")
('assistant', 'tool')
"""

from __future__ import annotations

import json
from typing import Any

from beam_sft.convert.reasoning import REASONING_FIELDS
from beam_sft.convert.rows import Rejection
from beam_sft.data import jsontext
from beam_sft.visible import quoted

TEXT_PART_TYPES = ("text", "input_text", "output_text")
REASONING_PART_TYPES = ("reasoning", "thinking")
PART_VALUE_KEYS = ("text", "value", "reasoning", "thinking")
LOSS_FLAGS = ("weight", "loss_weight", "loss", "train")


class _NoPart:
    """The type of ``NO_PART``."""

    def __repr__(self) -> str:
        return "NO_PART"


# What a reader that rewrites its format's content into parts leaves where a block carries nothing
# (Bedrock's cachePoint): read_content skips it, and every later part keeps the index it has in the
# source, which the messages name. No JSON value is this object.
NO_PART = _NoPart()
# Row columns that hold media (LLaMA-Factory, ms-swift, xtuner): Beam cannot see them.
MEDIA_COLUMNS = ("images", "videos", "audios", "image", "video", "audio")
# what a content part carries when it is not text (OpenAI, Anthropic, Gemini shapes)
MEDIA_PART_KEYS = ("image_url", "input_audio", "image", "audio", "video", "file", "inline_data", "inlineData",
                   "file_data", "fileData")

ROLE_ALIASES: dict[str, str] = {
    "system": "system",
    "developer": "developer",
    "user": "user",
    "human": "user",
    "prompter": "user",  # OpenAssistant's oasst1/oasst2 (prompter / assistant)
    "assistant": "assistant",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "model": "assistant",
    "bot": "assistant",
    "chatbot": "assistant",  # Cohere's chat fine-tuning files (System / User / Chatbot)
    "ai": "assistant",
    "tool": "tool",
    "function": "tool",
    "observation": "tool",
    "ipython": "tool",
    # ShareGPT exports name the result speaker and the call speaker in several spellings
    "function_response": "tool",
    "function-response": "tool",
    "tool_response": "tool",
    "function_call": "call",
    "function-call": "call",
}


def canonical_role(value: object, where: str) -> str:
    """The role a speaker name stands for (``ROLE_ALIASES``, case-insensitive), or ``unknown_role``."""
    role = ROLE_ALIASES.get(value.lower()) if isinstance(value, str) else None
    if role is None:
        raise Rejection("unknown_role", f"{where} has role {quoted(value)} (known: {', '.join(ROLE_ALIASES)})")
    return role


def reject_media(row: object) -> None:
    """``non_text_content`` for a row with a non-empty media column (an empty list or "" is none)."""
    if not isinstance(row, dict):
        return
    for key in MEDIA_COLUMNS:
        value = row.get(key)
        if value not in (None, "", [], {}):
            raise Rejection("non_text_content", f"the row has {key!r} ({_count(value)}): Beam reads text only")


def _count(value: object) -> str:
    return f"{len(value)} item(s)" if isinstance(value, (list, dict)) else type(value).__name__


def read_tool_calls(value: object, where: str) -> list:
    """A message's raw ``tool_calls``: null, "" and [] are no calls; a JSON string is parsed; one
    call object is a list of one.

    >>> read_tool_calls("", "m"), read_tool_calls('[{"function": {"name": "f"}}]', "m")
    ([], [{'function': {'name': 'f'}}])
    """
    if value is None:
        return []
    if isinstance(value, str):
        if not value.strip():
            return []
        try:
            value = jsontext.loads(value)
        except (ValueError, RecursionError) as exc:
            raise Rejection(jsontext.reason(exc), f"{where}.tool_calls: {exc}") from None
        if value is None:
            return []
    if isinstance(value, dict):
        return [value]
    if not isinstance(value, list):
        raise Rejection("malformed_row", f"{where}.tool_calls is a {type(value).__name__}, not a list")
    return value


def _part_value(part: dict, where: str) -> str:
    for key in PART_VALUE_KEYS:
        if key in part:
            value = part[key]
            if isinstance(value, str):
                return value
            raise Rejection("malformed_row", f"{where}.{key} is not a string")
    raise Rejection("malformed_row", f"{where} has no text")


# The keys of an OpenAI Responses reasoning object: where a reasoning part or field holds one of them
# and no text of its own, it is that object (langchain-openai writes it so), read by its own rule.
REASONING_ITEM_KEYS = ("summary", "content", "encrypted_content")


def reasoning_item_text(item: dict, where: str) -> str | None:
    """An OpenAI Responses reasoning object's own text (``content`` of ``reasoning_text`` parts), else
    its summary (``summary_text`` parts, joined by blank lines); None when neither holds any text
    (``encrypted_content`` alone: no reasoning, the missing-reasoning policy applies). The Responses
    reader's reasoning items and the reasoning parts and fields other readers meet (langchain-openai's
    ``additional_kwargs.reasoning`` and ``reasoning`` content blocks) are read by this one rule.

    >>> reasoning_item_text({"summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}]}, "x")
    'a\\n\\nb'
    >>> reasoning_item_text({"summary": [], "encrypted_content": "gAAA"}, "x") is None
    True
    """
    for key, kind, sep in (("content", "reasoning_text", ""), ("summary", "summary_text", "\n\n")):
        parts = item.get(key)
        if parts is None:
            continue
        if not isinstance(parts, list) or not all(
                isinstance(p, dict) and p.get("type") == kind and isinstance(p.get("text"), str) for p in parts):
            raise Rejection("malformed_row", f"{where}.{key} is not a list of {kind} parts")
        text = sep.join(p["text"] for p in parts if p["text"].strip())
        if text:
            return text
    return None


def _reasoning_part(part: dict, where: str) -> str | None:
    """A reasoning content part's text: its own text key, else (no such key) the Responses reasoning
    object it is; None for an encrypted-only one."""
    if not any(key in part for key in PART_VALUE_KEYS) and any(key in part for key in REASONING_ITEM_KEYS):
        return reasoning_item_text(part, where)
    return _part_value(part, where)


def refuse_media(part: dict, at: str) -> None:
    """A text part that also carries an image or audio (``MEDIA_PART_KEYS``) is not text only: every
    reader of text parts refuses it the same way."""
    media = next((k for k in MEDIA_PART_KEYS if part.get(k) is not None), None)
    if media is not None:
        raise Rejection("non_text_content", f"{at} is a text part carrying {media!r}: Beam reads text only")


def read_content(
    content: Any, where: str, *, role: str
) -> tuple[str | None, list[str], list[Any], str | None]:
    """``(text or None, reasoning parts, raw tool-call parts, text after the first call or None)``."""
    if content is None or isinstance(content, str):
        return content, [], [], None
    if not isinstance(content, list):
        raise Rejection("malformed_row", f"{where}.content is a {type(content).__name__}")
    texts: list[str] = []
    late: list[str] = []
    reasoning: list[str] = []
    calls: list[Any] = []
    for i, part in enumerate(content):
        at = f"{where}.content[{i}]"
        if part is NO_PART:
            continue
        if isinstance(part, str):
            (late if calls else texts).append(part)
            continue
        if not isinstance(part, dict):
            raise Rejection("malformed_row", f"{at} is not an object")
        kind = part.get("type", "text")
        if kind in TEXT_PART_TYPES:
            refuse_media(part, at)
            (late if calls else texts).append(_part_value(part, at))
        elif kind in REASONING_PART_TYPES and role == "assistant":
            if texts or calls:
                raise Rejection("interleaved_reasoning", f"{at}: reasoning after the answer or a call")
            text = _reasoning_part(part, at)
            if text is not None:
                reasoning.append(text)
        elif kind == "refusal" and role == "assistant":
            # OpenAI's refusal part: the model's answer, as its ``refusal`` field is (openai.py)
            if not isinstance(part.get("refusal"), str):
                raise Rejection("malformed_row", f"{at} is a 'refusal' part whose 'refusal' is not text")
            (late if calls else texts).append(part["refusal"])
        elif kind == "tool_call" and role == "assistant":
            value = part.get("value", part.get("tool_call", part.get("function")))
            if value is None:
                raise Rejection("malformed_tool_call", f"{at} has no value")
            calls.append(value)
        else:
            raise Rejection("non_text_content", f"{at} is a {quoted(kind)} part: Beam reads text only")
    return ("".join(texts) if texts else None), reasoning, calls, ("".join(late) if late else None)


def result_text(value: Any) -> str:
    """A tool result as text: strings as they are, anything else as JSON (non-ASCII kept)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def is_json_result(content: Any) -> bool:
    """A tool message's content that is the tool's structured result, not text or content parts: an
    object, a number or boolean, or a list none of whose items is text or a part (``type``/``text``).
    Gemini's ``functionResponse``, Bedrock's ``json`` blocks, the Responses API's outputs and result
    envelopes are written as their JSON text (``result_text``); an OpenAI-style tool message
    holding the same object was ``malformed_row``.

    >>> is_json_result({"temp": 18}), is_json_result([{"id": 1}, 2]), is_json_result([{"type": "text", "text": "a"}])
    (True, True, False)
    """
    if isinstance(content, (dict, int, float)):  # (bool is an int)
        return True
    return isinstance(content, list) and bool(content) and not any(
        isinstance(item, str) or (isinstance(item, dict) and ("type" in item or "text" in item)) for item in content)


def read_result_content(content: Any, where: str) -> str | None:
    """A tool result's text: a structured result (``is_json_result``) as its JSON text, as every reader
    writes one; text or content parts as ``read_content`` reads them (OpenAI's and ShareGPT's tool turns)."""
    if not is_json_result(content):
        return read_content(content, where, role="tool")[0]
    try:
        return result_text(content)
    except (TypeError, ValueError):  # a Parquet value JSON has no form for (bytes, a date)
        raise Rejection("malformed_row", f"{where}.content holds a value that is not JSON") from None


def _flag_value(key: str, value: Any, where: str) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    raise Rejection("bad_weight", f"{where}.{key} is {quoted(value)}, not 0/1 or true/false")


def check_untrained_weight(msg: dict, where: str, role: str) -> None:
    """A loss flag on a message that is never trained (user, system, tool): 0 says what is so anyway;
    1 asks for what Beam does not train, and an invalid value is invalid wherever it stands.

    >>> check_untrained_weight({"weight": 0}, "m", "user")
    >>> check_untrained_weight({"weight": 1}, "m", "tool")
    Traceback (most recent call last):
    ...
    beam_sft.errors.Rejection: [bad_weight] m: a loss weight of 1 on a tool message: only assistant turns are trained
    """
    if read_weight(msg, where) == 1:
        raise Rejection("bad_weight", f"{where}: a loss weight of 1 on a {role} message: only assistant turns are trained")


def read_weight(msg: dict, where: str) -> int | None:
    """The turn's loss weight from ``weight``, ``loss_weight``, ``loss`` or ``train``; None when
    none is given.

    >>> read_weight({"weight": 1, "train": False}, "m")
    Traceback (most recent call last):
    ...
    beam_sft.errors.Rejection: [bad_weight] m: weight and train disagree
    """
    found: tuple[str, int] | None = None
    for key in LOSS_FLAGS:
        if key in msg and msg[key] is not None:
            value = _flag_value(key, msg[key], where)
            if found is not None and found[1] != value:
                raise Rejection("bad_weight", f"{where}: {found[0]} and {key} disagree")
            found = found or (key, value)
    return None if found is None else found[1]


def read_reasoning_fields(msg: dict, where: str) -> list[tuple[str, str | None]]:
    """``(field, text)`` for each reasoning field present on the message (null counts as absent); where
    none holds text, OpenRouter's ``reasoning_details`` (``reasoning_details_text``)."""
    out = []
    for key in REASONING_FIELDS:
        value = reasoning_field_text(msg.get(key), f"{where}.{key}")
        if value is not None:
            out.append((key, value))
    if msg.get("reasoning_details") is not None and not any(text.strip() for _, text in out):
        out.append(("reasoning_details", reasoning_details_text(msg["reasoning_details"], f"{where}.reasoning_details")))
    return out


def reasoning_field_text(value: Any, where: str) -> str | None:
    """A reasoning field's text: a string as it is; an OpenAI Responses reasoning object (``type``
    ``reasoning``, as langchain-openai and Responses-era logs keep it under ``reasoning``) by
    ``reasoning_item_text`` (None when encrypted only); anything else is ``malformed_row``."""
    if isinstance(value, dict) and value.get("type") == "reasoning":
        return reasoning_item_text(value, where)
    if value is not None and not isinstance(value, str):
        raise Rejection("malformed_row", f"{where} is a {type(value).__name__}, not a string "
                        "or an OpenAI Responses reasoning object")
    return value


# OpenRouter's reasoning_details item types: readable text, a summary of it, the encrypted reasoning.
_DETAIL_TEXT, _DETAIL_SUMMARY, _DETAIL_ENCRYPTED = "reasoning.text", "reasoning.summary", "reasoning.encrypted"


def reasoning_details_text(details: Any, where: str) -> str | None:
    """The reasoning OpenRouter logs in ``reasoning_details`` when a message's ``reasoning`` string is
    absent: its ``reasoning.text`` items (the provider's reasoning, in order), else its
    ``reasoning.summary`` items (OpenAI's summaries, as the Responses reader takes a summary when no
    text is given). Encrypted items follow the one rule of blocks.py and responses.py: alone, no
    reasoning (the missing-reasoning policy); beside text items, the text kept would be read as the
    whole reasoning while part of it is hidden: ``non_text_content``. An unknown item type or a
    malformed item is refused naming it, never skipped.

    >>> reasoning_details_text([{"type": "reasoning.summary", "summary": "Add."},
    ...                         {"type": "reasoning.encrypted", "data": "gAAA"}], "m")
    'Add.'
    """
    if not isinstance(details, list):
        raise Rejection("malformed_row", f"{where} is a {type(details).__name__}, not a list")
    texts: list[str] = []
    summaries: list[str] = []
    encrypted = None
    for i, item in enumerate(details):
        at = f"{where}[{i}]"
        kind = item.get("type") if isinstance(item, dict) else None
        field = {_DETAIL_TEXT: "text", _DETAIL_SUMMARY: "summary"}.get(kind) if isinstance(kind, str) else None
        if kind == _DETAIL_ENCRYPTED:
            encrypted = encrypted or at
        elif field is None:
            raise Rejection("malformed_row", f"{at} is not a reasoning.text, reasoning.summary or reasoning.encrypted "
                            f"item (type {quoted(kind)})")
        elif not isinstance(item.get(field), str):
            raise Rejection("malformed_row", f"{at}.{field} is not text")
        else:
            (texts if field == "text" else summaries).append(item[field])
    if texts and encrypted:
        raise Rejection("non_text_content", f"{encrypted} is encrypted reasoning beside readable reasoning.text "
                        "items: the text kept would be read as the whole reasoning")
    kept = texts or summaries
    return "".join(kept) if kept else None


def read_template_kwargs(row: dict) -> dict | None:
    """Row-level template arguments: ``chat_template_kwargs`` plus a bare ``reasoning_effort``.

    None when the row has neither (an empty ``chat_template_kwargs`` stays an empty dict).
    """
    kwargs = row.get("chat_template_kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise Rejection("malformed_row", "chat_template_kwargs is not an object")
    effort = row.get("reasoning_effort")
    # (asked by key, not by a default equal to effort: NaN is not equal to itself)
    if effort is not None and kwargs and "reasoning_effort" in kwargs and kwargs["reasoning_effort"] != effort:
        # two settings of one template argument: keeping either changes the row unsaid
        raise Rejection("conflicting_template_kwargs", f"reasoning_effort is {quoted(effort)} but "
                        f"chat_template_kwargs.reasoning_effort is {quoted(kwargs['reasoning_effort'])}")
    if effort is not None and "reasoning_effort" not in (kwargs or {}):
        kwargs = {**(kwargs or {}), "reasoning_effort": effort}
    return None if kwargs is None else dict(kwargs)
