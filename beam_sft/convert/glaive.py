"""glaive-function-calling rows (a ``system`` string of JSON function specs, one ``chat`` string) -> BeamRow.

glaiveai/glaive-function-calling-v2 writes each conversation as two strings:

- ``system``: ``SYSTEM: <prompt> -`` then the functions, pretty-printed JSON objects one after
  another (or none: "with no access to external functions"). The prompt is the system message;
  the objects are the row's tools.
- ``chat``: turns headed ``USER:``, ``ASSISTANT:`` and ``FUNCTION RESPONSE:`` at the start of a
  line; each assistant turn ends with ``<|endoftext|>``, which is a separator, not text (taken
  off; one anywhere else in a turn is ``separator_in_text``). An assistant turn
  ``<functioncall> {"name": ..., "arguments": '{...}'}`` is a call: the arguments are JSON inside
  single quotes inside JSON (not JSON; read as the quoted JSON text), or a plain JSON object. Text
  before ``<functioncall>`` is said before the call (``tool_call_content``); a call that cannot
  be read is ``malformed_tool_call``. A function response is the result of the call before it.

>>> row = convert_glaive({"system": 'SYSTEM: You are a helpful assistant with access to the following functions. '
...     'Use them if required -\\n{\\n    "name": "get_time",\\n    "parameters": {"type": "object"}\\n}\\n',
...     "chat": "USER: Time? \\n\\n\\nASSISTANT: <functioncall> {\\"name\\": \\"get_time\\", \\"arguments\\": '{}'} "
...     "<|endoftext|>\\n\\n\\nFUNCTION RESPONSE: {\\"time\\": \\"12:00\\"}\\n\\n\\nASSISTANT: 12:00. <|endoftext|>\\n"},
...     options=ConvertOptions())
>>> [m["role"] for m in row["messages"]], row["messages"][3]["content"], row["messages"][4]["content"]
(['system', 'user', 'assistant', 'tool', 'assistant'], '{"time": "12:00"}', '12:00.')
"""

from __future__ import annotations

import json
import re
from typing import Any

from beam_sft.convert.assemble import PLACE, finish_row
from beam_sft.convert.options import ColumnMap, ConvertOptions
from beam_sft.convert.parts import reject_media
from beam_sft.convert.rows import BeamRow, Rejection
from beam_sft.convert.tools import NOT_JSON, maybe_json, normalize_tools, parse_arguments, parse_tool_call
from beam_sft.data import jsontext
from beam_sft.visible import quoted

SEPARATOR = "<|endoftext|>"
CALL_TAG = "<functioncall>"
_HEAD_RE = re.compile(r"^(USER|ASSISTANT|FUNCTION RESPONSE|SYSTEM):[ \t]*", re.MULTILINE)
_ROLES = {"USER": "user", "ASSISTANT": "assistant", "FUNCTION RESPONSE": "tool", "SYSTEM": "system"}
# {"name": "...", "arguments": '...'}: glaive's single-quoted JSON text inside a JSON object.
_QUOTED_CALL_RE = re.compile(
    r"\{\s*\"name\"\s*:\s*(?P<name>\"(?:[^\"\\]|\\.)*\")\s*,\s*\"arguments\"\s*:\s*'(?P<args>.*)'\s*\}", re.DOTALL)


def convert_glaive(raw: Any, *, options: ConvertOptions) -> BeamRow | Rejection:
    """One glaive row -> a BeamRow (without ``meta``) or a Rejection; never raises."""
    try:
        reject_media(raw)
        drafts, tools = read_glaive_row(raw, options.columns)
        return finish_row(drafts, tools=tools, kwargs=None, options=options)
    except Rejection as exc:
        return exc


def is_glaive(raw: Any) -> bool:
    """The shape detect.py votes ``glaive`` for: a ``chat`` string of ``USER:``/``ASSISTANT:`` turns."""
    chat = raw.get("chat") if isinstance(raw, dict) else None
    return isinstance(chat, str) and "USER:" in chat and "ASSISTANT:" in chat


def read_glaive_row(raw: Any, columns: ColumnMap) -> tuple[list[dict], list[dict]]:
    if not isinstance(raw, dict) or not isinstance(raw.get("chat"), str):
        raise Rejection("malformed_row", "no 'chat' string in the row")
    drafts: list[dict] = []
    tools: list[dict] = []
    system = raw.get(columns.system)
    if system is not None:
        if not isinstance(system, str):
            raise Rejection("malformed_row", f"column {columns.system!r} is not a string")
        prompt, tools = read_system(system)
        if prompt:
            drafts.append({"role": "system", "content": prompt, PLACE: columns.system})
    drafts.extend(read_chat(raw["chat"]))
    return drafts, tools


def read_system(text: str) -> tuple[str, list[dict]]:
    """``(prompt, tools)`` of glaive's system string: the prompt, then JSON function objects.

    >>> read_system("SYSTEM: You are a helpful assistant, with no access to external functions.")
    ('You are a helpful assistant, with no access to external functions.', [])
    """
    body = text.strip()
    body = body[len("SYSTEM:"):].lstrip() if body.startswith("SYSTEM:") else body
    start = body.find("{")
    if start < 0:
        return body, []
    prompt = body[:start].rstrip()
    prompt = prompt[:-1].rstrip() if prompt.endswith("-") else prompt  # "Use them if required -"
    decoder = json.JSONDecoder()
    specs = []
    pos = start
    while pos < len(body):
        try:
            _, end = decoder.raw_decode(body, pos)
        except ValueError as exc:
            raise Rejection("bad_tool_definition", f"system: function {len(specs)} is not JSON: {exc}") from None
        try:  # the one JSON rule (no NaN, no key twice) on the object's own text
            specs.append(jsontext.loads(body[pos:end]))
        except (ValueError, RecursionError) as exc:
            raise Rejection(jsontext.reason(exc), f"system: function {len(specs)}: {exc}") from None
        pos = end
        while pos < len(body) and body[pos].isspace():
            pos += 1
    return prompt, normalize_tools(specs, "system")


def read_chat(chat: str) -> list[dict]:
    """Draft messages of glaive's ``chat`` string."""
    text = chat.strip()
    heads = list(_HEAD_RE.finditer(text))
    if not heads or text[: heads[0].start()].strip():
        raise Rejection("malformed_row", "chat does not start with USER: or ASSISTANT:")
    drafts: list[dict] = []
    for n, (head, nxt) in enumerate(zip(heads, heads[1:] + [None], strict=True)):
        where = f"chat turn {n}"  # the turn's place in the chat string (a system draft before it is not one)
        body = text[head.end(): nxt.start() if nxt else len(text)].strip()
        if body.endswith(SEPARATOR):
            body = body[: -len(SEPARATOR)].rstrip()
        if SEPARATOR in body:
            raise Rejection("separator_in_text", f"{where} holds {SEPARATOR} before its end")
        role = _ROLES[head.group(1)]
        if role != "assistant":
            drafts.append({"role": role, "content": body, PLACE: where})
            continue
        said, calls = body, []
        if CALL_TAG in body:
            said, _, call = body.partition(CALL_TAG)
            calls = [parse_call(call, f"{where} {CALL_TAG}")]
        draft = {"role": "assistant", "content": said.strip() or None, "reasoning": [], "tool_calls": calls,
                 "weight": None, PLACE: where}
        drafts.append(draft)
    return drafts


def parse_call(text: str, where: str) -> dict:
    """The call after ``<functioncall>``: a JSON object, or glaive's ``"arguments": '{...}'`` form.

    >>> parse_call(' {"name": "f", "arguments": \\'{"note": "it\\'s 5"}\\'} ', "x")["function"]
    {'name': 'f', 'arguments': {'note': "it's 5"}}
    """
    body = text.strip()
    value = maybe_json(body, where)
    if value is not NOT_JSON:
        if not isinstance(value, dict):
            raise Rejection("malformed_tool_call", f"{where} is not an object")
        return parse_tool_call(value, where)
    m = _QUOTED_CALL_RE.fullmatch(body)
    if m is None:
        raise Rejection("malformed_tool_call", f"{where} is neither JSON nor glaive's {{\"name\", \"arguments\": "
                        f"'...'}}: {quoted(body, 60)}")
    name = json.loads(m["name"])
    return parse_tool_call({"name": name, "arguments": parse_arguments(m["args"], where)}, where)
