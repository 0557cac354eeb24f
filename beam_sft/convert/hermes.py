"""Hermes/Qwen-style tool use, where tool traffic lives as tags inside the text -> BeamRow.

- Containers: OpenAI ``messages``, ShareGPT ``conversations``, or a transcript string (a row that
  is a string, a ``text`` column, or a row whose only value is a string): ``SYSTEM:``,
  ``USER:``, ``ASSISTANT:`` and ``TOOL:`` lines, optionally fenced in triple backticks (the
  Hermes few-shot prompts; turns stripped of surrounding whitespace), or a chat template's
  rendering, ChatML or Llama 3 (transcripts.py: its rules). A ``tools`` and a ``system`` column
  beside a transcript are read as beside ``messages``.
- ``<tool_call>BODY</tool_call>`` blocks in assistant text become tool calls. BODY is a JSON
  object ``{"name", "arguments"}`` (any key order, any line breaks), a Python-literal dict
  (hermes-function-calling-v1's single quotes), or a Qwen3-coder ``<function=...>`` call. The
  text before the first block is the turn's content (so ``<think>`` before the calls becomes
  reasoning, and other text follows ``tool_call_content``); text after the first block follows
  ``text_after_tool_call`` (it is never moved before the call).
- A user or tool message made only of ``<tool_response>...</tool_response>`` blocks becomes one
  tool message per block (inner text stripped; a JSON ``{"name", "content"}`` envelope
  unwrapped). Blocks mixed with other text: ``tool_response_mixed``.
- ``<tools>`` in the system prompt is handled for every format (see assemble.py / tools.py).

>>> row = convert_hermes({"messages": [
...     {"role": "user", "content": "Time?"},
...     {"role": "assistant", "content": '<think>Ask the clock.</think>\\n<tool_call>\\n{"name": "now", "arguments": {}}\\n</tool_call>'},
...     {"role": "user", "content": "<tool_response>\\n12:00\\n</tool_response>"}]}, options=ConvertOptions(require_declared_tools=False))
>>> row["messages"][1]["tool_calls"][0]["function"], row["messages"][2]
({'name': 'now', 'arguments': {}}, {'role': 'tool', 'tool_call_id': 'call_0', 'name': 'now', 'content': '12:00'})
"""

from __future__ import annotations

import re
from typing import Any

from beam_sft.convert.assemble import PLACE, add_system_column, finish_row, parse_envelope, place_of
from beam_sft.convert.openai import read_openai_row
from beam_sft.convert.options import ColumnMap, ConvertOptions
from beam_sft.convert.parts import canonical_role, reject_media
from beam_sft.convert.rows import BeamRow, Rejection
from beam_sft.convert.sharegpt import read_sharegpt_row
from beam_sft.convert.tools import (
    NOT_JSON,
    maybe_json,
    normalize_tools,
    parse_tool_call,
    parse_xml_function,
    python_literal,
)
from beam_sft.convert.transcripts import read_template_transcript, template_of
from beam_sft.visible import quoted

_CALL_RE = re.compile(r"<tool_call>(?P<body>.*?)</tool_call>", re.DOTALL)
_RESPONSE_RE = re.compile(r"<tool_response>(?P<body>.*?)</tool_response>", re.DOTALL)
_SPEAKER_RE = re.compile(r"^(SYSTEM|USER|ASSISTANT|TOOL):[ \t]*", re.MULTILINE)
# Python literals deeper than this are not parsed (ast recursion on hostile input).
_MAX_LITERAL_CHARS = 100_000


def convert_hermes(raw: Any, *, options: ConvertOptions) -> BeamRow | Rejection:
    """One Hermes-style row -> a BeamRow (without ``meta``) or a Rejection; never raises."""
    try:
        reject_media(raw)
        transcript = transcript_text(raw, options.columns)
        if transcript is not None:
            (drafts, tools), kwargs = _read_transcript_row(raw, transcript, options.columns), None
        elif _is_sharegpt(raw, options.columns):
            drafts, tools, kwargs = read_sharegpt_row(raw, options.columns)
        else:
            drafts, tools, kwargs = read_openai_row(raw, options.columns)
        return finish_row(untag(drafts), tools=tools, kwargs=kwargs, options=options)
    except Rejection as exc:
        return exc


def transcript_text(raw: Any, columns: ColumnMap) -> str | None:
    """The transcript string of a text row, or None for a structured row."""
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, dict) or columns.messages in raw or columns.conversations in raw:
        return None
    if isinstance(raw.get(columns.text), str):
        return raw[columns.text]
    values = list(raw.values())
    return values[0] if len(values) == 1 and isinstance(values[0], str) else None


def _read_transcript_row(raw: Any, transcript: str, columns: ColumnMap) -> tuple[list[dict], list[dict]]:
    """The drafts and tools of a transcript row: a ``tools`` column and a ``system`` column beside the
    text are read as beside a message list (they were dropped unsaid)."""
    drafts = read_transcript(transcript)
    if not isinstance(raw, dict) or raw.get(columns.text) is not transcript:
        return drafts, []  # a string row, or a row whose only value is the transcript: no column beside it
    add_system_column(drafts, raw.get(columns.system), columns.system)
    return drafts, normalize_tools(raw.get(columns.tools), columns.tools)


def _is_sharegpt(raw: Any, columns: ColumnMap) -> bool:
    turns = (
        raw if isinstance(raw, list) else raw.get(columns.conversations) if isinstance(raw, dict) else None
    )
    return isinstance(turns, list) and any(isinstance(t, dict) and columns.role_key in t for t in turns)


def read_transcript(text: str) -> list[dict]:
    """``SYSTEM: ...\\nUSER: ...\\nASSISTANT: ...`` -> draft messages.

    >>> [d["role"] for d in read_transcript("```\\nSYSTEM: s\\nUSER: u\\nASSISTANT:\\na\\n```")]
    ['system', 'user', 'assistant']
    """
    rendered = text
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rstrip()
        text = text[:-3] if text.endswith("```") else text
    heads = list(_SPEAKER_RE.finditer(text))
    if not heads or text[: heads[0].start()].strip():
        if template_of(rendered) is not None:  # a chat template's rendering: ChatML or Llama 3
            return read_template_transcript(rendered)
        raise Rejection("malformed_row", "the transcript does not start with SYSTEM:, USER: or ASSISTANT: "
                        "(nor is it a ChatML or Llama 3 transcript)")
    drafts = []
    for head, nxt in zip(heads, heads[1:] + [None], strict=True):
        body = text[head.end() : nxt.start() if nxt else len(text)].strip()
        where = f"transcript turn {len(drafts)}"
        role = canonical_role(head.group(1), where)  # the one alias table
        draft: dict[str, Any] = {"role": role, "content": body, PLACE: where}
        if role == "assistant":
            draft.update(reasoning=[], tool_calls=[], weight=None)
        drafts.append(draft)
    return drafts


def untag(drafts: list[dict]) -> list[dict]:
    """Tags -> structure: ``<tool_call>`` into calls, ``<tool_response>`` into tool messages."""
    out: list[dict] = []
    for i, draft in enumerate(drafts):
        where = place_of(draft, i)
        content = draft.get("content") or ""
        if draft["role"] == "assistant" and "<tool_call>" in content:
            if draft.get("tool_calls"):
                raise Rejection("conflicting_tool_calls", f"{where} has tool_calls and <tool_call> tags")
            text, after, calls = _take_calls(content, where)
            out.append({**draft, "content": text, "tool_calls": calls, "text_after_calls": after})
        elif draft["role"] in ("user", "tool") and "<tool_response>" in content:
            out.extend({**result, PLACE: where} for result in _carry_ids(_take_responses(content, where), draft, where))
        else:
            out.append(draft)
    return out


def _take_calls(content: str, where: str) -> tuple[str, str | None, list[dict]]:
    """``(text before the first call, text after it (between and after the calls), calls)``."""
    calls = []
    pieces = []
    pos = 0
    for m in _CALL_RE.finditer(content):
        pieces.append(content[pos : m.start()])
        calls.append(parse_call_body(m["body"], f"{where} <tool_call> {len(calls)}"))
        pos = m.end()
    pieces.append(content[pos:])
    if any("<tool_call>" in p or "</tool_call>" in p for p in pieces):
        raise Rejection("malformed_tool_call", f"{where} has an unclosed <tool_call>")
    after = "".join(pieces[1:])
    return pieces[0], (after if after.strip() else None), calls


def parse_call_body(body: str, where: str) -> dict:
    """A ``<tool_call>`` body: JSON, a Python-literal dict, or a Qwen3-coder ``<function=...>`` call.

    >>> parse_call_body("{'name': 'f', 'arguments': {'a': 1}}", "x")["function"]
    {'name': 'f', 'arguments': {'a': 1}}
    """
    text = body.strip()
    if text.startswith("<function="):
        return parse_xml_function(text, where)
    value = maybe_json(text, where)
    if value is NOT_JSON:
        value = _literal(text, where)
        if value is None:
            raise Rejection("malformed_tool_call", f"{where} is neither JSON nor a Python dict") from None
    if not isinstance(value, dict):
        raise Rejection("malformed_tool_call", f"{where} is not an object")
    return parse_tool_call(value, where)


def _literal(text: str, where: str) -> Any:
    """A Python-literal dict as JSON (``tools.python_literal``); None when the text is not one, or holds a
    value JSON has no form for."""
    if len(text) > _MAX_LITERAL_CHARS or not text.startswith("{"):
        return None
    value = python_literal(text, where)
    return None if value is NOT_JSON else value


def _carry_ids(results: list[dict], draft: dict, where: str) -> list[dict]:
    """The message's own ``tool_call_id`` and ``name`` on the results its ``<tool_response>`` blocks
    hold, where a block does not say them itself (as a ShareGPT result takes its turn's): without
    them a result answering a later call would be matched to the call at its position, unsaid. One
    id on several blocks answers several calls with one id, which Beam cannot express."""
    carried = {k: draft[k] for k in ("tool_call_id", "name") if isinstance(draft.get(k), str) and draft[k]}
    if not carried:
        return results
    if "tool_call_id" in carried and len(results) > 1:
        raise Rejection("tool_result_unmatched", f"{where} answers {len(results)} calls with one tool_call_id "
                        f"{quoted(carried['tool_call_id'])}")
    return [{**result, **{k: v for k, v in carried.items() if k not in result}} for result in results]


def _take_responses(content: str, where: str) -> list[dict]:
    results = []
    pos = 0
    for m in _RESPONSE_RE.finditer(content):
        if content[pos : m.start()].strip():
            raise Rejection("tool_response_mixed", f"{where} has text outside its <tool_response> blocks")
        body = m["body"].strip()
        results.append(parse_envelope(body) or {"role": "tool", "content": body})
        pos = m.end()
    if content[pos:].strip():
        raise Rejection("tool_response_mixed", f"{where} has text outside its <tool_response> blocks")
    return results
