"""``--format auto``: the format each row's shape shows (``classify``), and the file's main format
from its first records (``detect_format``), said with why.

Each row is read by the format ``classify`` gives it, the file's main format when its shape shows
none (pipeline.resolve_format): a merged file whose Hermes rows start at row 438 is read right.
For the main format each sampled record votes; the most common vote wins (ties go to the earlier
format in ``FORMATS`` order). Hermes wins over OpenAI/ShareGPT when a
user, assistant or tool text holds ``<tool_call>``/``<tool_response>`` tags (system prompts are
not looked at: Qwen's tool boilerplate mentions the tags there). A file where no record shows a
known shape is read as OpenAI, and each of its rows is rejected for its own reason.

>>> detect_format([{"conversations": [{"from": "human", "value": "hi"}]}], ColumnMap())
('sharegpt', 'sharegpt: 1 of 1 sampled rows')
>>> detect_format(["<|start|>user<|message|>hi<|end|>"], ColumnMap())[0]
'harmony'
>>> detect_format([{"instruction": "Add", "input": "", "output": "4"}], ColumnMap())[0]
'alpaca'
>>> detect_format([{"text": "<|im_start|>user\\nhi<|im_end|>"}], ColumnMap())[0]
'hermes'

Rows of the other readers are told by their own keys: ``request`` beside ``response``
(``chat_log``), ``contents`` of role/parts (``gemini``), a ``chat`` string of ``USER:``/``ASSISTANT:``
turns (``glaive``), ``messages`` with Converse content blocks or a ``toolConfig`` (``bedrock``), an
``output`` list of Responses API items or an ``input`` list holding one (``responses``),
``messages`` with Anthropic's typed blocks (``tool_use``, ``thinking``, ...), ``system`` text blocks
or ``input_schema`` tools (``anthropic``), a ``conversation``/``conversations`` list of turn pairs
(``input``/``output``, ``human``/``assistant``: ``pairs``), ``query`` beside ``answers`` and ``tools``
(``xlam``), a message list (or a bare list) of LangChain's serialized messages (``type`` + ``data``,
``lc`` + ``kwargs``: ``langchain``). A row
with none of the known keys but exactly one list of role-bearing messages under another key (a
trajectory's ``traj``, ``dialog``, ``turns``) is OpenAI's (the reader names the key in ``meta.notes``).

A text (a string row, a ``text`` column, a row's only value) is Harmony's when it holds ``<|start|>``
and ``<|message|>``, Hermes' when it is a ``SYSTEM:``/``USER:`` transcript holding Hermes tags or a
chat template's rendering (ChatML's ``<|im_start|>``, Llama 3's ``<|start_header_id|>``).

Flat rows (``alpaca``: the ``columns.prompt`` and ``columns.answer`` columns, Alpaca's
``instruction``/``output`` unless mapped) are told by those two columns; a whole ``.txt`` file is
one string and reads as a Harmony transcript.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from beam_sft.convert.flat import is_flat
from beam_sft.convert.formats import detectors
from beam_sft.convert.openai import message_keys
from beam_sft.convert.options import FORMATS, ColumnMap
from beam_sft.convert.transcripts import template_of

_HERMES_TAGS = ("<tool_call>", "<tool_response>")
_TRANSCRIPT_HEADS = ("SYSTEM:", "USER:", "ASSISTANT:")
# The own-key detectors of convert/formats.py's table, in its detect_rank order (resolved once: code, not state).
_OWN_KEYS = tuple(detectors())


def classify(raw: Any, columns: ColumnMap) -> str | None:
    """The format one record looks like, or None."""
    if isinstance(raw, str):
        return _classify_text(raw)
    if not isinstance(raw, (list, dict)):
        return None
    for name, detector, takes_columns in _OWN_KEYS:  # a bare list too: a list of LangChain messages is langchain's
        if detector(raw, columns) if takes_columns else detector(raw):
            return name
    if isinstance(raw, list):
        return _with_tags(raw, "role", "content", "openai")
    turns = raw.get(columns.conversations)
    messages = raw.get(columns.messages)
    # An empty list carries nothing (as for conflicting_carriers): `messages: []` beside ShareGPT turns
    # does not make the row OpenAI's.
    if isinstance(messages, list) and (messages or not (isinstance(turns, list) and turns)):
        return _with_tags(messages, "role", "content", "openai")
    if isinstance(turns, list) and turns:
        if any(isinstance(t, dict) and columns.role_key in t for t in turns):
            return _with_tags(turns, columns.role_key, columns.content_key, "sharegpt")
        if any(isinstance(t, dict) and "role" in t for t in turns):
            return _with_tags(turns, "role", "content", "openai")
    if isinstance(raw.get("answer_generation"), dict):
        return "openai"
    if is_flat(raw, columns):
        return "alpaca"
    text = raw.get(columns.text)
    if isinstance(text, str):
        return _classify_text(text)
    values = list(raw.values())
    if len(values) == 1 and isinstance(values[0], str):
        return _classify_text(values[0])
    keys = message_keys(raw, columns)
    if keys:  # messages under another key (a trajectory's `traj`): the OpenAI reader names it, or both
        return _with_tags(raw[keys[0]], "role", "content", "openai") if len(keys) == 1 else "openai"
    return None


def _classify_text(text: str) -> str | None:
    if "<|start|>" in text and "<|message|>" in text:
        return "harmony"
    if any(head in text for head in _TRANSCRIPT_HEADS) and any(tag in text for tag in _HERMES_TAGS):
        return "hermes"
    if template_of(text) is not None:  # ChatML or Llama 3 turns: the Hermes reader reads them (transcripts.py)
        return "hermes"
    return None


def _with_tags(turns: list, role_key: str, content_key: str, plain: str) -> str:
    for turn in turns:
        if not isinstance(turn, dict) or turn.get(role_key) == "system":
            continue
        content = turn.get(content_key)
        if isinstance(content, list):  # content parts: their text counts too
            content = "".join(_part_text(p) for p in content)
        if isinstance(content, str) and any(tag in content for tag in _HERMES_TAGS):
            return "hermes"
    return plain


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict):
        value = part.get("text", part.get("value"))
        return value if isinstance(value, str) else ""
    return ""


def detect_format(records: Iterable[Any], columns: ColumnMap) -> tuple[str, str]:
    """``(format, explanation)`` for a file from its sampled records."""
    votes: Counter[str] = Counter()
    sampled = 0
    for raw in records:
        sampled += 1
        kind = classify(raw, columns)
        if kind is not None:
            votes[kind] += 1
    if not votes:
        return "openai", f"openai: none of {sampled} sampled rows has a known shape"
    best = max(FORMATS, key=lambda f: (votes[f], -FORMATS.index(f)))
    return best, f"{best}: {votes[best]} of {sampled} sampled rows"
