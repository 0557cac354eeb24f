"""Format validity of one generated assistant turn: the one check that format health (training) and
``beam-sft eval``'s ``format_valid`` share.

A valid turn (``score_turn`` on generated text, ``check_message`` on a message a server already parsed):
it ends with ``<|return|>`` or ``<|call|>``; it parses strictly and the response template reads the
same message; its reasoning is not empty; an answer is not empty; every tool call names a declared tool
and its arguments are a JSON object that satisfies the tool's JSON schema (types, ``required``,
``enum``, ``properties``, ``items``, ``additionalProperties: false``; ``schema_problems``); no text of
it (reasoning, answer, argument values) holds a Harmony marker, which a strict parse of generated text
never leaves there but a server that did not parse the turn as Beam does returns. Pure: no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from beam_sft.harmony import markers
from beam_sft.harmony.response import parse_assistant_turn

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "object": (dict,), "array": (list,), "null": (type(None),),
}


def schema_problems(value: Any, schema: Any, path: str = "arguments") -> list[str]:
    """What makes ``value`` invalid for a JSON schema (the subset tool definitions use).

    >>> schema_problems({"city": "Paris"}, {"type": "object", "required": ["city"],
    ...                  "properties": {"city": {"type": "string"}}})
    []
    >>> schema_problems({"n": "x"}, {"type": "object", "required": ["n", "m"], "properties": {"n": {"type": "integer"}}})
    ['arguments: missing required m', 'arguments.n: expected integer, got str']
    """
    if not isinstance(schema, dict):
        return []
    out: list[str] = []
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(_is_type(value, name) for name in names):
            return [f"{path}: expected {' or '.join(map(str, names))}, got {type(value).__name__}"]
    if "enum" in schema and isinstance(schema["enum"], list) and value not in schema["enum"]:
        out.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, dict):
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        for key in schema.get("required") or []:
            if key not in value:
                out.append(f"{path}: missing required {key}")
        for key, item in value.items():
            if key in properties:
                out.extend(schema_problems(item, properties[key], f"{path}.{key}"))
            elif schema.get("additionalProperties") is False:
                out.append(f"{path}: unexpected key {key}")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            out.extend(schema_problems(item, schema["items"], f"{path}[{i}]"))
    return out


def _is_type(value: Any, name: str) -> bool:
    if name not in _JSON_TYPES:
        return True  # a type this check does not know: not held against the model
    if isinstance(value, bool) and name in ("integer", "number"):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES[name])


@dataclass(frozen=True)
class Verdict:
    valid: bool
    problem: str | None = None
    message: dict | None = None


def tool_schemas(tools: Sequence[dict] | None) -> dict[str, Any]:
    """Each declared tool's name -> its parameters schema (``{}`` when it declares none)."""
    out = {}
    for tool in tools or []:
        fn = tool.get("function", tool) if isinstance(tool, dict) else {}
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out[fn["name"]] = fn.get("parameters") or {}
    return out


def score_turn(text: str, tools: Sequence[dict] | None = None) -> Verdict:
    """Whether one generated assistant turn (the text after the prompt's ``<|start|>assistant``) is valid.

    >>> score_turn("<|channel|>analysis<|message|>Greet.<|end|><|start|>assistant<|channel|>final"
    ...            "<|message|>Hello.<|return|>").valid
    True
    >>> score_turn("<|channel|>final<|message|>Hello.<|return|>").problem
    'parse: [harmony_malformed_turn] the turn must open with an analysis message ending <|end|>'
    """
    stops = sorted((i, m) for m in markers.STOP_MARKERS if (i := text.find(m)) >= 0)
    if not stops:
        return Verdict(False, f"the turn does not end ({' or '.join(markers.STOP_MARKERS)} never written)")
    end, marker = stops[0]
    turn = text[: end + len(marker)]  # generation stops there; anything after (padding) is not the turn
    try:
        message = parse_assistant_turn(turn, list(tools) if tools else None)
    except Exception as exc:  # Rejection from the strict reader, or the response template refusing it
        return Verdict(False, f"parse: {exc}")
    return check_message(message, tools)


def check_message(message: dict, tools: Sequence[dict] | None = None) -> Verdict:
    """The content rules of a valid turn on an already-parsed message (``thinking``, ``content``,
    ``tool_calls`` with ``function.arguments`` as values): what ``score_turn`` checks after parsing.

    >>> check_message({"thinking": "r", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}).problem
    "tool call 0 names 'f', not a declared tool"
    """
    thinking, content = message.get("thinking"), message.get("content")
    for field, value in (("reasoning", thinking), ("answer", content)):
        if value is not None and not isinstance(value, str):
            return Verdict(False, f"the {field} is {type(value).__name__}, not text", message)
        if marker := _marker_in(value):
            return Verdict(False, f"the {field} holds the Harmony marker {marker} (a turn not parsed as Beam)",
                           message)
    if not (thinking or "").strip():
        return Verdict(False, "no reasoning (empty analysis message)", message)
    calls = message.get("tool_calls") or []
    if not calls:
        if not (content or "").strip():
            return Verdict(False, "empty answer", message)
        return Verdict(True, None, message)
    if not isinstance(calls, list):
        return Verdict(False, f"tool_calls is {type(calls).__name__}, not a list", message)
    schemas = tool_schemas(tools)
    for i, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str):
            return Verdict(False, f"tool call {i} has no function name", message)
        if name not in schemas:
            return Verdict(False, f"tool call {i} names {name!r}, not a declared tool", message)
        arguments = fn.get("arguments")
        if not isinstance(arguments, dict):
            return Verdict(False, f"tool call {i} ({name}) arguments are not a JSON object", message)
        if marker := _marker_in(arguments):
            return Verdict(False, f"tool call {i} ({name}) arguments hold the Harmony marker {marker}", message)
        problems = schema_problems(arguments, schemas[name], f"tool call {i} ({name}) arguments")
        if problems:
            return Verdict(False, "; ".join(problems), message)
    return Verdict(True, None, message)


def _marker_in(value: Any) -> str | None:
    """The first Harmony marker in any text inside ``value`` (keys too), else None.

    >>> _marker_in({"q": ["a", "b<|call|>"]}), _marker_in("plain <|x|>")
    ('<|call|>', None)
    """
    if isinstance(value, str):
        return next((m for m in markers.ALL_MARKERS if m in value), None)
    if isinstance(value, dict):
        return next((m for k, v in value.items() if (m := _marker_in(k) or _marker_in(v))), None)
    if isinstance(value, list):
        return next((m for v in value if (m := _marker_in(v))), None)
    return None
