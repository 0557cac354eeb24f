"""Reading one source message's fields: content (string, null or parts), loss flags, reasoning fields.

Content parts: ``{"type": "text", "text"|"value": ...}`` parts are joined with no separator (the
parts of one message are pieces of one text, as in OpenAI's API). Parts typed ``reasoning`` or
``thinking`` carry the turn's reasoning and ``tool_call`` parts carry calls (LLaMA-Factory v1);
both only on assistant turns, and reasoning only before any answer text or call. Any other part
(image, audio, video, file, refusal, ...) rejects the row with ``non_text_part``: dropping it
silently would train on a conversation the annotator never saw.

>>> read_content([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "m", role="user")
('ab', [], [])
>>> read_content([{"type": "reasoning", "value": "r"}, {"type": "text", "value": "x"}], "m", role="assistant")
('x', ['r'], [])
>>> read_weight({"role": "assistant", "loss": False}, "m")
0
"""

from __future__ import annotations

from typing import Any

from beam_sft.convert.reasoning import REASONING_FIELDS
from beam_sft.convert.rows import Reject

TEXT_PART_TYPES = ("text", "input_text", "output_text")
REASONING_PART_TYPES = ("reasoning", "thinking")
PART_VALUE_KEYS = ("text", "value", "reasoning", "thinking")
LOSS_FLAGS = ("weight", "loss", "train")


def _part_value(part: dict, where: str) -> str:
    for key in PART_VALUE_KEYS:
        if key in part:
            value = part[key]
            if isinstance(value, str):
                return value
            raise Reject("malformed_row", f"{where}.{key} is not a string")
    raise Reject("malformed_row", f"{where} has no text")


def read_content(content: Any, where: str, *, role: str) -> tuple[str | None, list[str], list[Any]]:
    """``(text or None, reasoning parts, raw tool-call parts)`` of a message's ``content``."""
    if content is None or isinstance(content, str):
        return content, [], []
    if not isinstance(content, list):
        raise Reject("malformed_row", f"{where}.content is a {type(content).__name__}")
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[Any] = []
    for i, part in enumerate(content):
        at = f"{where}.content[{i}]"
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            raise Reject("malformed_row", f"{at} is not an object")
        kind = part.get("type", "text")
        if kind in TEXT_PART_TYPES:
            texts.append(_part_value(part, at))
        elif kind in REASONING_PART_TYPES and role == "assistant":
            if texts or calls:
                raise Reject("interleaved_reasoning", f"{at}: reasoning after the answer or a call")
            reasoning.append(_part_value(part, at))
        elif kind == "tool_call" and role == "assistant":
            value = part.get("value", part.get("tool_call", part.get("function")))
            if value is None:
                raise Reject("malformed_tool_call", f"{at} has no value")
            calls.append(value)
        else:
            raise Reject("non_text_part", f"{at} is a {kind!r} part")
    return ("".join(texts) if texts else None), reasoning, calls


def _flag_value(key: str, value: Any, where: str) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    raise Reject("bad_weight", f"{where}.{key} is {value!r}, not 0/1 or true/false")


def read_weight(msg: dict, where: str) -> int | None:
    """The turn's loss weight from ``weight``, ``loss`` or ``train``; None when none is given.

    >>> read_weight({"weight": 1, "train": False}, "m")
    Traceback (most recent call last):
    ...
    beam_sft.convert.rows.Reject: m: weight and train disagree
    """
    found: tuple[str, int] | None = None
    for key in LOSS_FLAGS:
        if key in msg and msg[key] is not None:
            value = _flag_value(key, msg[key], where)
            if found is not None and found[1] != value:
                raise Reject("bad_weight", f"{where}: {found[0]} and {key} disagree")
            found = found or (key, value)
    return None if found is None else found[1]


def read_reasoning_fields(msg: dict, where: str) -> list[tuple[str, str | None]]:
    """``(field, text)`` for each reasoning field present on the message (null counts as absent)."""
    out = []
    for key in REASONING_FIELDS:
        value = msg.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise Reject("malformed_row", f"{where}.{key} is a {type(value).__name__}, not a string")
        out.append((key, value))
    return out


def read_template_kwargs(row: dict) -> dict | None:
    """Row-level template arguments: ``chat_template_kwargs`` plus a bare ``reasoning_effort``.

    None when the row has neither (an empty ``chat_template_kwargs`` stays an empty dict).
    """
    kwargs = row.get("chat_template_kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise Reject("malformed_row", "chat_template_kwargs is not an object")
    if row.get("reasoning_effort") is not None and "reasoning_effort" not in (kwargs or {}):
        kwargs = {**(kwargs or {}), "reasoning_effort": row["reasoning_effort"]}
    return None if kwargs is None else dict(kwargs)
