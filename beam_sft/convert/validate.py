"""Beam rules on a BeamRow: the first broken rule becomes a Rejection (codes in rows.py).

Rules, in the order they are checked (so a row breaking several gets a stable code):

1. shape: messages is a non-empty list of known roles with string content (``malformed_row``),
   ``weight`` is 0 or 1 (``bad_weight``), tools are named functions (``bad_tool_definition``);
2. system/developer messages only at the start (``system_not_leading``): the template drops
   later ones without a word;
3. each call: a name the format can carry (``bad_tool_name``: non-empty, no whitespace, no
   ``<``), arguments a dict (``arguments_not_object``) whose names fit in
   ``name="..."`` (``bad_argument_name``) and whose rendered values never contain
   ``</rfl:parameter>`` (``param_delimiter_in_argument``); no answer text beside calls
   (``content_with_tool_calls``); an answer or a call on every turn (``empty_assistant``);
4. tool results follow their calls, one per call, in call order (Beam matches by position):
   ``tool_result_unmatched``, ``tool_result_order``, ``tool_call_unanswered``. A conversation
   may end on a call turn (the turn ends with ``<|call|>``, which is valid Harmony and trains
   the call) or part-way through its results;
5. ``chat_template_kwargs``: ``bad_reasoning_effort`` (an int of at least 1, or one of the six
   labels; below 8, the least Beam was trained with, the row is kept with a note),
   ``bad_template_kwargs`` (wrong types, or a name the template call itself uses: the same rule
   ``prepare`` applies, ``RESERVED_TEMPLATE_KWARGS``);
6. no Harmony marker in any rendered text (content, reasoning, names, arguments, tool
   definitions, template kwargs): ``harmony_marker_in_text``; and none of
   ``options.forbidden_tokens`` (the tokenizer's other added/special tokens):
   ``special_token_in_text``;
7. no reasoning markup (``<think>``, ``</thinking>``, ...) in any text of a trained assistant
   turn (``reasoning_markup_in_text``), and no tool-call markup (``<tool_call>``,
   ``<function=``, ...) in its answer or reasoning (``tool_call_markup_in_text``): whatever a
   reader could not place never becomes trained text;
8. calls name declared tools (``undeclared_tool``, when ``require_declared_tools``), and an argument
   given as text that the tool's schema types as a number is a number JSON can hold
   (``non_standard_number``: ``NaN``, ``1e400`` as text);
9. reasoning on every trained assistant turn (``missing_reasoning``);
10. at least one trained assistant turn (``no_trained_turn``).

>>> ok = {"messages": [{"role": "user", "content": "Hi"},
...                    {"role": "assistant", "reasoning_content": "Greet.", "content": "Hello"}]}
>>> validate(ok, options=ConvertOptions()) is None
True
>>> bad = {"messages": [{"role": "user", "content": "Say <|end|>"}] + ok["messages"][1:]}
>>> validate(bad, options=ConvertOptions()).code
'harmony_marker_in_text'
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from beam_sft.convert.options import ConvertOptions
from beam_sft.convert.reasoning import find_reasoning_markup
from beam_sft.convert.rows import BeamRow, Rejection, has_reasoning
from beam_sft.convert.tools import MAX_SCHEMA_DEPTH, SUBSCHEMA_KEYS
from beam_sft.data.jsontext import number_problem
from beam_sft.harmony.markers import ALL_MARKERS, PARAM_CLOSE, REASONING_EFFORT_LABELS
from beam_sft.harmony.spans import is_trained
from beam_sft.harmony.template import RESERVED_TEMPLATE_KWARGS
from beam_sft.visible import KEY_CHARS, SHOWN_CHARS, cut, quoted

ROLES = ("system", "developer", "user", "assistant", "tool")
_TOOL_NAME_RE = re.compile(r"[^\s<]+")
# The registered keys of chat_template_kwargs and the types the template accepts for them.
_KWARG_TYPES: dict[str, tuple[type, ...]] = {"model_identity": (str,), "allow_missing_thinking": (bool,)}
# The least reasoning effort Beam was trained with (the format documentation: "Beam wasn't trained
# below 8, so smaller values aren't respected").
MIN_TRAINED_EFFORT = 8
# Tool-call markup of the text formats (Hermes/Qwen): never trained as an answer or reasoning.
TOOL_CALL_MARKUP: tuple[str, ...] = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
                                     "<function=")


def forbidden_tokens(tokenizer: Any) -> frozenset[str]:
    """The tokenizer's added and special tokens other than the Harmony markers (those are
    ``harmony_marker_in_text``): text holding one would be tokenized as that control token. Pass it
    as ``ConvertOptions.forbidden_tokens``; ``convert --tokenizer`` and ``prepare`` both do (one rule).

    Whitespace-only added tokens (some tokenizers add runs of spaces) are left out: they are how
    ordinary text is tokenized, not control tokens.
    """
    tokens: set[str] = set()
    added = getattr(tokenizer, "get_added_vocab", None)
    if callable(added):
        tokens.update(added())
    tokens.update(getattr(tokenizer, "all_special_tokens", None) or ())
    return forbidden_among(tokens)


def forbidden_among(tokens: Iterable) -> frozenset[str]:
    """Which of a tokenizer's added and special tokens ``forbidden_tokens`` forbids (the one rule)."""
    return frozenset(t for t in tokens if isinstance(t, str) and t.strip() and t not in ALL_MARKERS)


@functools.lru_cache(maxsize=16)
def _alternation(tokens: tuple[str, ...]) -> re.Pattern[str] | None:
    if not tokens:
        return None
    return re.compile("|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True)))


class Places:
    """How a message of the converted row is named in a rejection: by the source entry it was read from
    (``places[i]``, as the converter noted it in ``meta.places``: ``conversations[3]``), else by its index
    here. A field of it follows as a path (``conversations[3].content``), or in parentheses after a
    name that is not one (``output+reasoning (reasoning_content)``).

    >>> at = Places(["system", "conversations[0]", "output+reasoning"])
    >>> at(1), at(1, "content"), at(2, "reasoning_content"), at(5)
    ('conversations[0]', 'conversations[0].content', 'output+reasoning (reasoning_content)', 'messages[5]')
    """

    def __init__(self, places: list[str] | None = None):
        self.places = places or []

    def __call__(self, i: int, key: str | None = None) -> str:
        place = self.places[i] if i < len(self.places) else f"messages[{i}]"
        if key is None:
            return place
        return f"{place}.{key}" if _PATH_RE.fullmatch(place) else f"{place} ({key})"


_PATH_RE = re.compile(r"[\w.\[\]]+")


def validate(row: BeamRow, *, options: ConvertOptions, places: list[str] | None = None) -> Rejection | None:
    """The first Beam rule ``row`` breaks, as a Rejection, or None when it keeps every rule. ``places``:
    the source entry of each message (``Places``), named in the rejection."""
    at = Places(places)
    for check in (
        _shape,
        _system_leading,
        _calls,
        _results,
        _kwargs,
        _control_text,
        _trained_markup,
        _declared,
        _typed_numbers,
        _reasoning,
        _trained,
    ):
        problem = check(row, options, at)
        if problem is not None:
            return Rejection(*problem)
    return None


def _shape(row: Any, options: ConvertOptions, at: Places) -> tuple[str, str] | None:
    if not isinstance(row, dict) or not isinstance(row.get("messages"), list):
        return "malformed_row", "a BeamRow needs a messages list"
    if not row["messages"]:  # only truncation leaves a row empty: converters reject empty conversations
        return "no_trained_turn", "no message is left"
    for i, msg in enumerate(row["messages"]):
        where = at(i)
        if not isinstance(msg, dict) or msg.get("role") not in ROLES:
            return "malformed_row", f"{where} is not a message with a known role"
        for key in ("content", "reasoning_content", "name", "tool_call_id"):
            if key in msg and not isinstance(msg[key], str):
                return "malformed_row", f"{at(i, key)} is not a string"
        if msg["role"] != "assistant" and not isinstance(msg.get("content"), str):
            return "malformed_row", f"{where} has no string content"
        if "weight" in msg and (type(msg["weight"]) is not int or msg["weight"] not in (0, 1)):
            return "bad_weight", f"{at(i, 'weight')} is {quoted(msg['weight'])}, not 0 or 1"
        calls = msg.get("tool_calls")
        if calls is not None and not (isinstance(calls, list) and all(_call_shape(c) for c in calls)):
            return "malformed_row", f"{at(i, 'tool_calls')} is not a list of function calls"
    tools = row.get("tools", [])
    if not isinstance(tools, list):
        return "bad_tool_definition", "tools is not a list"
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or tool.get("type") != "function" or not isinstance(fn.get("name"), str):
            return "bad_tool_definition", f"tools[{i}] is not a named function tool"
        bad = _schema_problem(fn.get("parameters"), f"tools[{i}].function.parameters")
        if bad is not None:
            return "bad_tool_definition", bad
    return None


def _schema_problem(schema: Any, where: str, depth: int = 1) -> str | None:
    """Where a parameters schema breaks the shape every reader of schemas takes for granted (the
    template, the argument checks, the encoder), at any depth tools.normalize_schema walks: ``type`` a
    type name or a list of them, ``properties`` an object, ``required`` a list of names. The template
    would stop on ``"required": true`` or ``"properties": []``; ``{"type": {...}}`` crashed the checks."""
    if not isinstance(schema, dict):
        return None
    if depth > MAX_SCHEMA_DEPTH:  # (a reader's normalize_tools refuses it first; a row built otherwise, here)
        return f"{where} nests schemas past {MAX_SCHEMA_DEPTH} deep"
    kind, properties, required = schema.get("type"), schema.get("properties"), schema.get("required")
    if kind is not None and not (isinstance(kind, str) or isinstance(kind, list)
                                 and all(isinstance(k, str) for k in kind)):
        return f"{where}.type is {quoted(kind, 40)}, not a type name or a list of them"
    if properties is not None and not isinstance(properties, dict):
        return f"{where}.properties is {quoted(properties, 40)}, not an object of named schemas"
    if required is not None and not (isinstance(required, list) and all(isinstance(r, str) for r in required)):
        return f"{where}.required is {quoted(required, 40)}, not a list of property names"
    subs: list[tuple[Any, str]] = [(sub, f"{where}.properties.{cut(str(name), KEY_CHARS)}")
                                   for name, sub in (properties or {}).items()]
    for key in SUBSCHEMA_KEYS:
        value = schema.get(key)
        subs += ([(v, f"{where}.{key}[{j}]") for j, v in enumerate(value)] if isinstance(value, list)
                 else [(value, f"{where}.{key}")])
    return next((bad for sub, at in subs if (bad := _schema_problem(sub, at, depth + 1)) is not None), None)


def _call_shape(call: Any) -> bool:
    return isinstance(call, dict) and isinstance(call.get("function"), dict) and "name" in call["function"]


def _system_leading(row: BeamRow, options: ConvertOptions, at: Places) -> tuple[str, str] | None:
    seen_other = False
    for i, msg in enumerate(row["messages"]):
        if msg["role"] in ("system", "developer"):
            if seen_other:
                return (
                    "system_not_leading",
                    f"{at(i)} is a {msg['role']} message after the conversation started",
                )
        else:
            seen_other = True
    return None


def _calls(row: BeamRow, options: ConvertOptions, at: Places) -> tuple[str, str] | None:
    for i, msg in enumerate(row["messages"]):
        if msg["role"] == "tool" and "name" in msg and not _TOOL_NAME_RE.fullmatch(msg["name"]):
            return "bad_tool_name", f"{at(i, 'name')} {quoted(msg['name'])} cannot be a Harmony author"
        if msg["role"] != "assistant":
            continue
        calls = msg.get("tool_calls") or []
        for j, call in enumerate(calls):
            where = at(i, f"tool_calls[{j}]")
            name, args = call["function"]["name"], call["function"].get("arguments")
            if not isinstance(name, str) or not _TOOL_NAME_RE.fullmatch(name):
                return "bad_tool_name", f"{where}: {quoted(name)} cannot be a Harmony recipient"
            if not isinstance(args, dict):
                return "arguments_not_object", f"{where}.arguments is a {type(args).__name__}, not an object"
            for key, value in args.items():
                if '"' in key:
                    return "bad_argument_name", f"{where}: argument name {quoted(key)} contains a double quote"
                rendered = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                if PARAM_CLOSE in rendered:
                    return "param_delimiter_in_argument", f"{where}: argument {quoted(key)} contains {PARAM_CLOSE}"
        content = msg.get("content") or ""
        if calls and content:
            return "content_with_tool_calls", f"{at(i)} has an answer beside its tool calls"
        if not calls and not content.strip():
            return "empty_assistant", f"{at(i)} has neither an answer nor a tool call"
    return None


def _results(row: BeamRow, options: ConvertOptions, at: Places) -> tuple[str, str] | None:
    pending: list[dict] = []
    for i, msg in enumerate(row["messages"]):
        where = at(i)
        if msg["role"] == "tool":
            if not pending:
                return "tool_result_unmatched", f"{where} is a tool result but no call is waiting for one"
            problem = _match(msg, pending, where, at(i, "tool_call_id"))
            if problem is not None:
                return problem
            pending.pop(0)
            continue
        if pending:
            names = ", ".join(cut(c["function"]["name"], SHOWN_CHARS) for c in pending[:12])
            names += ", …" if len(pending) > 12 else ""
            return "tool_call_unanswered", f"{where} comes before the results of: {names}"
        if msg["role"] == "assistant":
            pending = list(msg.get("tool_calls") or [])
    return None


def _match(msg: dict, pending: list[dict], where: str, id_where: str) -> tuple[str, str] | None:
    expected = pending[0]
    name = expected["function"]["name"]
    if "tool_call_id" in msg:
        if msg["tool_call_id"] != expected.get("id"):
            if any(msg["tool_call_id"] == c.get("id") for c in pending[1:]):
                return "tool_result_order", f"{where} answers a later call than {quoted(expected.get('id'))}"
            return (
                "tool_result_unmatched",
                f"{id_where} {quoted(msg['tool_call_id'])} matches no waiting call",
            )
        if "name" in msg and msg["name"] != name:
            return "tool_result_unmatched", f"{where} is named {quoted(msg['name'])} but answers a call to {quoted(name)}"
        return None
    if "name" in msg:
        if msg["name"] == name:
            return None
        if any(msg["name"] == c["function"]["name"] for c in pending[1:]):
            return "tool_result_order", f"{where} answers {quoted(msg['name'])} before {quoted(name)}"
        return "tool_result_unmatched", f"{where} is named {quoted(msg['name'])} but the waiting call is {quoted(name)}"
    return "tool_result_unmatched", f"{where} has neither a name nor a tool_call_id"


def _kwargs(row: BeamRow, options: ConvertOptions, at: Places) -> tuple[str, str] | None:
    kwargs = row.get("chat_template_kwargs", {})
    if not isinstance(kwargs, dict):
        return "bad_template_kwargs", "chat_template_kwargs is not an object"
    effort = kwargs.get("reasoning_effort")
    if effort is not None:
        if (
            isinstance(effort, bool)
            or not isinstance(effort, (int, str))
            or (isinstance(effort, str) and effort not in REASONING_EFFORT_LABELS)
        ):
            return (
                "bad_reasoning_effort",
                f"reasoning_effort {quoted(effort)} is neither an int nor one of {', '.join(REASONING_EFFORT_LABELS)}",
            )
        if isinstance(effort, int) and effort < 1:
            return "bad_reasoning_effort", f"reasoning_effort {quoted(effort)} is below 1 (Beam always reasons)"
    clash = sorted(RESERVED_TEMPLATE_KWARGS.intersection(kwargs))
    if clash:
        return "bad_template_kwargs", f"chat_template_kwargs uses names the template call itself takes: {clash}"
    for key, types in _KWARG_TYPES.items():
        if kwargs.get(key) is not None and not isinstance(kwargs[key], types):
            return "bad_template_kwargs", f"chat_template_kwargs.{key} is a {type(kwargs[key]).__name__}"
    builtin = kwargs.get("builtin_tools")
    if builtin is not None and not (isinstance(builtin, list) and all(isinstance(n, str) for n in builtin)):
        return "bad_template_kwargs", "chat_template_kwargs.builtin_tools is not a list of names"
    return None


def iter_rendered_text(row: BeamRow, at: Places | None = None) -> Iterator[tuple[str, str]]:
    """``(path, text)`` for every string the template can render (ids and meta excluded); a message's
    path starts with its name (``Places``: ``messages[i]`` without one)."""
    at = at or Places()
    stack: list[tuple[str, Any]] = [
        ("chat_template_kwargs", row.get("chat_template_kwargs")),
        ("tools", row.get("tools")),
    ]
    for i, msg in reversed(list(enumerate(row["messages"]))):
        for key, value in msg.items():
            if key == "tool_calls" and isinstance(value, list):
                stack.extend(
                    (at(i, f"tool_calls[{j}].function"), c.get("function"))
                    for j, c in enumerate(value)
                )
            elif key not in ("tool_call_id", "role", "weight"):
                stack.append((at(i, key), value))
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            yield path, value
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str):
                    yield f"{path} (key)", key
                stack.append((f"{path}.{key}", item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{j}]", item) for j, item in enumerate(value))


def _rendered_strings(row: BeamRow) -> str:
    """Every string ``iter_rendered_text`` yields, joined by NUL, without building their paths.

    A text found inside one of them is found in the join, so a search that finds nothing here finds
    nothing there; only a row with a hit pays for the paths (to name where it is).
    """
    out: list[str] = []
    stack: list[Any] = [row.get("chat_template_kwargs"), row.get("tools")]
    for msg in row["messages"]:
        for key, value in msg.items():
            if key == "tool_calls" and isinstance(value, list):
                stack.extend(c.get("function") for c in value)
            elif key not in ("tool_call_id", "role", "weight"):
                stack.append(value)
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str):
                    out.append(key)
                stack.append(item)
        elif isinstance(value, list):
            stack.extend(value)
    return "\0".join(out)


def _control_text(row: BeamRow, options: ConvertOptions, at: Places) -> tuple[str, str] | None:
    """``_markers`` then ``_special_tokens``, over one join of the row's rendered strings."""
    joined = _rendered_strings(row)
    return _markers(row, options, at, joined) or _special_tokens(row, options, at, joined)


def _markers(row: BeamRow, options: ConvertOptions, at: Places | None = None,
             joined: str | None = None) -> tuple[str, str] | None:
    if "<|" not in (_rendered_strings(row) if joined is None else joined):
        return None
    for path, text in iter_rendered_text(row, at):
        if "<|" in text:
            for marker in ALL_MARKERS:
                if marker in text:
                    return "harmony_marker_in_text", f"{path} contains {marker}"
    return None


def _special_tokens(row: BeamRow, options: ConvertOptions, at: Places | None = None,
                    joined: str | None = None) -> tuple[str, str] | None:
    pattern = _alternation(tuple(sorted(options.forbidden_tokens)))
    if pattern is None:
        return None
    if pattern.search(_rendered_strings(row) if joined is None else joined) is None:
        return None
    for path, text in iter_rendered_text(row, at):
        m = pattern.search(text)
        if m is not None:
            return "special_token_in_text", f"{path} contains the tokenizer's added token {m.group()!r}"
    return None


def _strings(value: Any) -> Iterator[str]:
    """Every string in a value, dict keys included, at any depth (iterative)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(k for k in item if isinstance(k, str))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _first(markup: Iterable[str], text: str) -> str | None:
    return next((m for m in markup if m in text), None)


def _trained_markup(row: BeamRow, options: ConvertOptions, at: Places) -> tuple[str, str] | None:
    for i, msg in enumerate(row["messages"]):
        if not is_trained(msg):
            continue
        for key in ("content", "reasoning_content"):
            text = msg.get(key) or ""
            found = find_reasoning_markup(text)
            if found:
                return "reasoning_markup_in_text", f"{at(i, key)} holds {found} (trained text)"
            found = _first(TOOL_CALL_MARKUP, text)
            if found:
                return "tool_call_markup_in_text", f"{at(i, key)} holds {found} (trained text)"
        for j, call in enumerate(msg.get("tool_calls") or []):
            for text in _strings(call.get("function")):
                found = find_reasoning_markup(text)
                if found:
                    return "reasoning_markup_in_text", f"{at(i, f'tool_calls[{j}]')} holds {found} (trained text)"
    return None


def row_notes(row: BeamRow) -> dict[str, int]:
    """What a kept row carries that is worth a word but not a rejection (counted in the summary).

    >>> row_notes({"messages": [], "chat_template_kwargs": {"reasoning_effort": 4}})
    {'reasoning_effort_below_8': 1}
    """
    effort = (row.get("chat_template_kwargs") or {}).get("reasoning_effort")
    if isinstance(effort, int) and not isinstance(effort, bool) and 1 <= effort < MIN_TRAINED_EFFORT:
        return {f"reasoning_effort_below_{MIN_TRAINED_EFFORT}": 1}
    return {}


def _declared(row: BeamRow, options: ConvertOptions, at: Places) -> tuple[str, str] | None:
    if not options.require_declared_tools:
        return None
    declared = {t["function"]["name"] for t in row.get("tools", [])}
    for i, msg in enumerate(row["messages"]):
        for call in msg.get("tool_calls") or []:
            if call["function"]["name"] not in declared:
                return (
                    "undeclared_tool",
                    f"{at(i)} calls {quoted(call['function']['name'])}, which the row does not declare",
                )
    return None


def _typed_numbers(row: BeamRow, options: ConvertOptions, at: Places) -> tuple[str, str] | None:
    """An argument given as text (Harmony or Qwen3-coder XML text, a JSON string) that the called
    tool's schema types as a number: its text is what Beam writes and the model learns to write
    there, so text no JSON number can hold (NaN, Infinity, 1e400, 1e-400) is ``non_standard_number``,
    as the same value written as a number is, however the row arrived."""
    schemas = {t["function"]["name"]: t["function"].get("parameters") for t in row.get("tools", [])}
    for i, msg in enumerate(row["messages"]):
        for j, call in enumerate(msg.get("tool_calls") or []):
            schema = schemas.get(call["function"]["name"])
            properties = schema.get("properties") if isinstance(schema, dict) else None
            arguments = call["function"].get("arguments")
            if not isinstance(properties, dict) or not isinstance(arguments, dict):
                continue
            for key, value in arguments.items():
                spec = properties.get(key)
                kind = spec.get("type") if isinstance(spec, dict) else None
                if not isinstance(value, str) or not {"number", "integer"} & set(
                        kind if isinstance(kind, list) else [kind]):
                    continue
                problem = number_problem(value)
                if problem is not None:
                    return ("non_standard_number",
                            f"{at(i, f'tool_calls[{j}].function.arguments')}.{cut(str(key), KEY_CHARS)}, typed a "
                            f"number by the schema of {quoted(call['function']['name'])}, is the text {quoted(value, 40)}: "
                            f"{problem}")
    return None


def _reasoning(row: BeamRow, options: ConvertOptions, at: Places) -> tuple[str, str] | None:
    for i, msg in enumerate(row["messages"]):
        if is_trained(msg) and not has_reasoning(msg):
            return "missing_reasoning", f"{at(i)} is trained but has no reasoning"
    return None


def _trained(row: BeamRow, options: ConvertOptions, at: Places) -> tuple[str, str] | None:
    if not any(is_trained(m) for m in row["messages"]):
        return "no_trained_turn", "no assistant turn is trained"
    return None
