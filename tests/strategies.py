"""Hypothesis strategies for Beam Harmony conversations, shared by the whole test suite.

Import them as ``from tests.strategies import beam_rows``. Two families:

**Valid data** -- rows that satisfy every Beam rule (the README's "Input guarantees"), for round-trip and differential
tests of converters, encoding and verification:

- :func:`beam_rows` -- canonical BeamRows (``messages``, optional ``tools``, optional
  ``chat_template_kwargs``, ``meta``).
- :func:`beam_messages` -- just the ``messages`` list of such a row.
- :func:`plain_text`, :func:`tool_names`, :func:`json_values` -- the building blocks.

Guarantees of a valid row (tests may rely on each one):

- leading system/developer messages only (0-2), each with non-blank text ``content``;
- then 1..``max_exchanges`` exchanges: a user message (non-blank ``content``), then 0-2 tool rounds
  (an assistant turn with ``tool_calls`` -- 1-3 parallel calls -- followed by exactly one tool
  result per call, in call order), then an assistant turn with a final ``content``. The last
  exchange may instead end on a tool-call turn with no results (the row then ends on ``<|call|>``);
- every assistant turn has a non-blank ``reasoning_content`` and never ``thinking``/``reasoning``;
  a final-answer turn has a non-blank ``content``; a tool-call turn has no ``content`` key;
- every tool call is ``{"id", "type": "function", "function": {"name", "arguments": dict}}`` with
  ids unique in the row; argument values match the tool's parameter types (``string``,
  ``integer``, ``number``, ``boolean``, ``array``, ``object``); floats are finite;
  integers fit in 53 bits;
- every tool message has ``tool_call_id`` of its call and, sometimes, ``name`` equal to the
  call's name; tool ``content`` may be empty;
- ``weight`` (0 or 1) appears on some assistant turns; at least one assistant turn is trained;
- if ``tools`` is present it is non-empty and declares every called tool (possibly plus unused ones) with an object
  schema whose properties are the tool's parameters; tool names are never a role name;
- ``chat_template_kwargs``, if present (it may be empty), holds only ``reasoning_effort`` (a label or an int >= 8)
  and/or ``model_identity`` (non-blank text);
- no text anywhere contains a ``<|...|>`` token (so no Harmony marker) or ``</rfl:parameter>``.
  Text is otherwise broad: unicode, newlines, tabs, leading/trailing whitespace, ``<``, ``|``,
  quotes, JSON-looking fragments.

**Broad data** -- :func:`any_conversations` generates ``{"messages", "tools", "kwargs"}`` with
anything the chat template can be handed, valid or not (missing fields, ``None``/empty values,
wire tags in text, non-dict arguments, unresolvable tool messages, late system messages, random
JSON schemas, bash/search/browse variants, bad reasoning efforts ...). It exists for differential
tests against the reference template, where the only requirement is identical behaviour.
:func:`any_tools` and :func:`json_schemas` are its tool and schema parts.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from hypothesis import strategies as st

from beam_sft.harmony import markers
from tests.doc_examples import SEARCH as SEARCH_TOOL  # the trained search definition

# ----------------------------------------------------------------------------- text

# Any `<|word|>` would become a control token with a real tokenizer (the 7 markers, but also
# `<|endoftext|>` and the like), so valid text never contains one.
_CONTROL_TOKEN = re.compile(r"<\|[^<>|\s]*\|>")

_FRAGMENTS = (
    "<",
    ">",
    "|",
    "<|",
    "|>",
    "</",
    "/>",
    "rfl:parameter",
    '<rfl:parameter name="x">',
    "</rfl:",
    "parameter>",
    '"',
    "'",
    "\\",
    "{",
    "}",
    "[",
    "]",
    '{"a": 1}',
    "//",
    "/*",
    "null",
    "true",
    "to=",
    "analysis",
    "final",
    "assistant",
    "start",
    "channel",
    "message",
    " ",
    "  ",
    "\n",
    "\n\n",
    "\t",
    "é",
    "ß",
    "中文",
    "🙂",
    "👩‍💻",
    "\u200b",
    "\u0301",
    "# Tools",
    "# Instructions",
    "```",
    "$x",
    "%",
    "=",
)

_CHARS = st.characters(exclude_categories=("Cs", "Cc", "Co", "Cn")) | st.sampled_from("\n\t")


def _is_plain(text: str) -> bool:
    return markers.PARAM_CLOSE not in text and _CONTROL_TOKEN.search(text) is None


@cache
def plain_text(min_size: int = 0, max_size: int = 12, *, blank: bool = True) -> st.SearchStrategy[str]:
    """Text safe for any field of a valid row: no ``<|...|>`` token and no ``</rfl:parameter>``.

    ``min_size``/``max_size`` count pieces (a piece is a character, a word or a tricky fragment),
    not characters. With ``blank=False`` the text has at least one non-whitespace character.
    """
    piece = st.one_of(
        st.text(_CHARS, min_size=1, max_size=6),
        st.sampled_from(_FRAGMENTS),
        st.sampled_from(("hello", "world", "Paris", "42", "def f(x):", "SELECT *", "a b c")),
    )
    text = st.lists(piece, min_size=min_size, max_size=max_size).map("".join).filter(_is_plain)
    if not blank:
        text = text.filter(lambda s: s.strip() != "")
    return text


@cache
def nonblank_text(max_size: int = 12) -> st.SearchStrategy[str]:
    """:func:`plain_text` with at least one non-whitespace character."""
    return plain_text(1, max_size, blank=False)


_ROLE_NAMES = frozenset({"system", "developer", "user", "assistant", "tool"})


@cache
def tool_names() -> st.SearchStrategy[str]:
    """Identifier-like tool names (``[a-z][a-z0-9_]*``), never a role name."""
    return st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True).filter(lambda n: n not in _ROLE_NAMES)


@cache
def parameter_names() -> st.SearchStrategy[str]:
    """Identifier-like argument names, safe inside ``<rfl:parameter name="...">``."""
    return st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,11}", fullmatch=True)


# ----------------------------------------------------------------------------- JSON values

_INT53 = 2**53 - 1


@cache
def json_scalars(text: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[Any]:
    """None, booleans, 53-bit integers, finite floats and strings."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-_INT53, _INT53),
        st.floats(allow_nan=False, allow_infinity=False),
        text if text is not None else plain_text(),
    )


@cache
def json_values(max_leaves: int = 8, text: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[Any]:
    """Any JSON value (nested lists and dicts with string keys; dict key order is part of the value)."""
    return st.recursive(
        json_scalars(text),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(plain_text(0, 3), inner, max_size=3),
        max_leaves=max_leaves,
    )


_PARAM_TYPES = ("string", "integer", "number", "boolean", "array", "object")


@cache
def _value_of_type(kind: str) -> st.SearchStrategy[Any]:
    if kind == "string":
        return plain_text()
    if kind == "integer":
        return st.integers(-_INT53, _INT53)
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(json_values(4), max_size=3)
    return st.dictionaries(plain_text(0, 3), json_values(4), max_size=3)


# ----------------------------------------------------------------------------- valid rows


@cache
def _pool_parts() -> dict[str, st.SearchStrategy]:
    return {
        "names": st.lists(tool_names(), max_size=3, unique=True),
        "params": st.dictionaries(parameter_names(), st.sampled_from(_PARAM_TYPES), max_size=4),
        "short": nonblank_text(6),
    }


def _draw_tool_pool(draw, min_size: int) -> list[dict]:
    """``min_size``-3 tools with distinct names, each ``{"name", "params": {name: type}, "required", "tool"}``."""
    parts = _pool_parts()
    names = draw(parts["names"])
    while len(names) < min_size:
        name = draw(tool_names())
        if name not in names:
            names.append(name)
    pool = []
    for name in names:
        params = draw(parts["params"])
        required = [p for p in params if draw(st.booleans())]
        properties = {}
        for p, kind in params.items():
            prop: dict[str, Any] = {"type": kind}
            if draw(st.booleans()):
                prop["description"] = draw(parts["short"])
            properties[p] = prop
        function: dict[str, Any] = {"name": name}
        if draw(st.booleans()):
            function["description"] = draw(parts["short"])
        function["parameters"] = {"type": "object", "properties": properties, "required": required}
        pool.append(
            {
                "name": name,
                "params": params,
                "required": required,
                "tool": {"type": "function", "function": function},
            }
        )
    return pool


def _draw_arguments(draw, tool: dict) -> dict:
    """Arguments for one call of a pool tool: every required parameter, some optional ones, in a
    drawn order (callers may order keys freely, and the order must survive every transform)."""
    chosen = [p for p in tool["params"] if p in tool["required"] or draw(st.booleans())]
    for i in range(len(chosen) - 1, 0, -1):
        j = draw(st.integers(0, i))
        chosen[i], chosen[j] = chosen[j], chosen[i]
    return {p: draw(_value_of_type(tool["params"][p])) for p in chosen}


@cache
def _kwargs() -> st.SearchStrategy[dict]:
    effort = st.sampled_from(sorted(markers.REASONING_EFFORT_LABELS)) | st.integers(8, 1024)
    return st.fixed_dictionaries(
        {}, optional={"reasoning_effort": effort, "model_identity": nonblank_text(8)}
    )


@st.composite
def beam_rows(
    draw,
    *,
    max_exchanges: int = 3,
    with_tools: bool | None = None,
    with_kwargs: bool | None = None,
    with_weights: bool = True,
    text: st.SearchStrategy[str] | None = None,
) -> dict:
    """Valid canonical BeamRows (see the module docstring for every guarantee).

    ``with_tools``/``with_kwargs``: force the ``tools``/``chat_template_kwargs`` keys on (True) or
    off (False); None lets Hypothesis choose (``tools`` is then left out when it would be empty). ``with_weights=False`` never writes ``weight``.
    ``text`` replaces the non-blank text strategy used for every message field (it must keep the
    guarantees: non-blank, no ``<|...|>`` token, no ``</rfl:parameter>``).
    """
    words = text if text is not None else nonblank_text()
    pool = _draw_tool_pool(draw, 1 if with_tools else 0)
    messages: list[dict] = []
    for _ in range(draw(st.integers(0, 2))):
        messages.append({"role": _pick(draw, ("system", "developer")), "content": draw(words)})

    call_count = 0
    exchanges = draw(st.integers(1, max_exchanges))
    for exchange in range(exchanges):
        messages.append({"role": "user", "content": draw(words)})
        rounds = draw(st.integers(0, 2)) if pool else 0
        for round_index in range(rounds):
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                tool = _pick(draw, tuple(pool))
                call_id = _pick(draw, ("call_", "toolu_", "fc-", "")) + str(call_count)
                call_count += 1
                calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool["name"], "arguments": _draw_arguments(draw, tool)},
                    }
                )
            messages.append({"role": "assistant", "reasoning_content": draw(words), "tool_calls": calls})
            last = exchange == exchanges - 1 and round_index == rounds - 1
            if last and draw(st.integers(0, 4)) == 0:
                break  # the row ends on the call itself
            for call in calls:
                result: dict[str, Any] = {"role": "tool", "tool_call_id": call["id"]}
                if draw(st.booleans()):
                    result["name"] = call["function"]["name"]
                result["content"] = draw(plain_text() if text is None else words)
                messages.append(result)
        else:
            messages.append({"role": "assistant", "reasoning_content": draw(words), "content": draw(words)})

    if with_weights:
        assistants = [m for m in messages if m["role"] == "assistant"]
        for message in assistants:
            if draw(st.integers(0, 3)) == 0:
                message["weight"] = _pick(draw, (0, 1))
        if all(m.get("weight", 1) == 0 for m in assistants):
            assistants[draw(st.integers(0, len(assistants) - 1))]["weight"] = 1

    row: dict[str, Any] = {"messages": messages}
    if with_tools if with_tools is not None else draw(st.booleans()):
        called = {c["function"]["name"] for m in messages for c in m.get("tool_calls", [])}
        declared = [t["tool"] for t in pool if t["name"] in called or draw(st.booleans())]
        if with_tools and not declared:
            declared = [t["tool"] for t in pool]
        if declared:
            row["tools"] = declared
    if with_kwargs if with_kwargs is not None else draw(st.booleans()):
        row["chat_template_kwargs"] = draw(_kwargs())
    row["meta"] = {"source": "hypothesis", "row": draw(st.integers(0, 10**6))}
    return row


def beam_messages(**kwargs) -> st.SearchStrategy[list[dict]]:
    """The ``messages`` of :func:`beam_rows` (same keyword arguments)."""
    return beam_rows(**kwargs).map(lambda row: row["messages"])


# ----------------------------------------------------------------------------- broad data

_WIRE = (
    "<|channel|>analysis<|message|>",
    "<|channel|>final<|message|>",
    markers.PARAM_CLOSE,
    "<|end|>",
    "<|start|>assistant",
    "<|return|>",
    "<|call|>",
    "<|constrain|>xml",
)
_NAME_POOL = ("get_weather", "search", "browse", "bash", "lookup", "f", "null_tool", "ünïcode")
_ID_POOL = ("call_1", "call_2", "c3", "x")
_PROP_NAMES = ("city", "days", "query", "command", "nullable_flag", "items", "type", "a b", "ünï", "x")


@cache
def any_text() -> st.SearchStrategy[str]:
    """Mostly :func:`plain_text`, sometimes with Harmony wire tags or ``</rfl:parameter>`` mixed in."""
    wired = st.tuples(plain_text(0, 3), st.sampled_from(_WIRE), plain_text(0, 3)).map("".join)
    plain = plain_text(0, 6)
    return st.one_of(plain, plain, plain, plain, plain, st.just(""), wired)


_MISSING = object()


@cache
def _maybe(strategy: st.SearchStrategy, *extra: Any) -> st.SearchStrategy:
    """The value, or one of the ``extra`` values (``_MISSING`` means: leave the key out)."""
    return st.one_of(strategy, st.sampled_from(extra)) if extra else strategy


def _put(target: dict, key: str, value: Any) -> None:
    if value is not _MISSING:
        target[key] = value


@cache
def _names() -> st.SearchStrategy[str]:
    return st.sampled_from(_NAME_POOL) | tool_names()


def _pick(draw, options: tuple) -> Any:
    """One of ``options`` (cheaper than building a ``sampled_from`` per draw)."""
    return options[draw(st.integers(0, len(options) - 1))]


_KINDS = ("string", "integer", "number", "boolean", "null", "array", "object", "frob")


@cache
def _schema_parts() -> dict[str, st.SearchStrategy]:
    """Strategies reused by every :func:`json_schemas` draw, built once."""
    return {
        "type_list": st.lists(st.sampled_from(_KINDS + ("null", "null")) | st.integers(0, 2), max_size=3),
        "enum": st.one_of(
            st.lists(plain_text(0, 3), max_size=4),
            st.lists(json_scalars(), max_size=3),
            st.sampled_from(("a", {"a": 1}, None)),
        ),
        # A small pool makes descriptions collide (property vs oneOf variant), which the renderer
        # treats specially.
        "description": st.one_of(plain_text(0, 6), st.sampled_from(("same", "same", "other", "", None, 3))),
        "title": plain_text(0, 4) | st.just(7),
        "examples": st.one_of(st.lists(plain_text(0, 3) | json_scalars(), max_size=3), st.just("solo")),
        "default": st.one_of(json_values(4), json_scalars()),
        "names": st.lists(st.sampled_from(_PROP_NAMES) | parameter_names(), max_size=4, unique=True),
    }


@cache
def json_schemas(depth: int = 2, *, root_object: bool = False) -> st.SearchStrategy[dict]:
    """Random JSON schemas exercising every feature the template's TypeScript renderer reads.

    Covers single and list ``type`` (including ``integer``, ``null``, unknown names and non-string
    entries), ``enum`` (strings, mixed, non-string, empty), ``description``, ``title``,
    ``examples``, ``default`` (any JSON, enum strings), ``nullable``, ``oneOf`` (with per-variant
    descriptions and defaults), ``items`` (schema, missing, empty, list), ``properties`` and
    ``required`` (subsets, unknown names, a bare string). Nesting stops at ``depth``.
    ``root_object=True`` makes the top level an object schema (a tool's ``parameters``).
    """
    return _json_schema(depth, root_object)


@st.composite
def _json_schema(draw, depth: int, root_object: bool) -> dict:
    parts = _schema_parts()
    schema: dict[str, Any] = {}
    kind = "object" if root_object else _pick(draw, _KINDS + ("object", "object", "string"))
    type_form = 0 if root_object else draw(st.integers(0, 9))
    if type_form <= 6:
        schema["type"] = kind
    elif type_form == 7:
        schema["type"] = draw(parts["type_list"])
    elif type_form == 8:
        schema["type"] = _pick(draw, (5, None, {"string": 1}))
    if draw(st.integers(0, 3)) == 0:
        schema["enum"] = draw(parts["enum"])
    if draw(st.booleans()):
        schema["description"] = draw(parts["description"])
    if draw(st.integers(0, 5)) == 0:
        schema["title"] = draw(parts["title"])
    if draw(st.integers(0, 5)) == 0:
        schema["examples"] = draw(parts["examples"])
    if draw(st.integers(0, 3)) == 0:
        enum = schema.get("enum")
        if isinstance(enum, list) and enum and draw(st.booleans()):
            schema["default"] = _pick(draw, tuple(enum))  # an enum member: rendered bare
        else:
            schema["default"] = draw(parts["default"])
    if draw(st.integers(0, 3)) == 0:
        schema["nullable"] = _pick(draw, (True, True, False, 1, None))
        if not root_object and draw(st.integers(0, 2)) == 0:
            schema["type"] = [kind, "null"]  # `null` already rendered: no second ` | null`
    if depth > 0 and draw(st.integers(0, 4)) == 0:
        if draw(st.integers(0, 5)):
            variants = [
                draw(json_schemas(depth - 1)) if draw(st.integers(0, 7)) else _pick(draw, ("x", None))
                for _ in range(draw(st.integers(0, 3)))
            ]
            # Variant and property descriptions interact (equal, different, first or not), so
            # give both one often, from a pool small enough to collide.
            for variant in variants:
                if isinstance(variant, dict) and draw(st.booleans()):
                    variant["description"] = _pick(draw, ("same", "other", "variant"))
            if draw(st.booleans()):
                schema["description"] = _pick(draw, ("same", "other", "property"))
            schema["oneOf"] = variants
        else:
            schema["oneOf"] = _pick(draw, ("x", None, {"type": "string"}))
    if kind == "array" or draw(st.integers(0, 9)) == 0:
        items_form = draw(st.integers(0, 4))
        if items_form <= 1 and depth > 0:
            schema["items"] = draw(json_schemas(depth - 1))
        elif items_form == 2:
            schema["items"] = _pick(draw, ({}, None, [{"type": "string"}], "string"))
    if kind == "object" and depth > 0:
        if root_object or draw(st.integers(0, 5)):
            names = draw(parts["names"])
            schema["properties"] = {
                n: draw(json_schemas(depth - 1)) if draw(st.integers(0, 7)) else _pick(draw, ({}, "string"))
                for n in names
            }
            if draw(st.integers(0, 3)):
                if draw(st.integers(0, 4)):
                    pool = tuple(names) + ("ghost",)
                    schema["required"] = [_pick(draw, pool) for _ in range(draw(st.integers(0, 3)))]
                else:
                    schema["required"] = _pick(draw, ("city", None, []))
        elif draw(st.booleans()):
            schema["properties"] = _pick(draw, ({}, [], None))
    if draw(st.integers(0, 9)) == 0:
        schema["additionalProperties"] = draw(st.booleans())
    # Key order only matters for `properties`, but shuffle anyway so no code can depend on it.
    return dict(draw(st.permutations(list(schema.items()))))


@st.composite
def _bash_tool(draw) -> dict:
    """bash tools on both sides of the trained-definition rule."""
    command: dict[str, Any] = {"type": _pick(draw, ("string", "string", "string", "integer"))}
    if draw(st.booleans()):
        command["description"] = draw(plain_text(0, 4))
    if draw(st.integers(0, 4)) == 0:
        command[_pick(draw, ("enum", "default", "title", "examples"))] = ["ls"]
    properties: dict[str, Any] = {"command": command}
    if draw(st.integers(0, 4)) == 0:
        properties["timeout"] = {"type": "integer"}
    params: dict[str, Any] = {"type": _pick(draw, ("object", "object", "object", "string"))}
    params["properties"] = properties
    _put(
        params,
        "required",
        _pick(draw, (["command"], ["command"], _MISSING, [], ["command", "timeout"], None)),
    )
    for key in ("additionalProperties", "description", "title", "$schema"):
        if draw(st.integers(0, 5)) == 0:
            params[key] = False if key == "additionalProperties" else "x"
    params = dict(draw(st.permutations(list(params.items()))))
    function = {"name": "bash", "parameters": params}
    _put(function, "description", draw(_maybe(plain_text(0, 5), _MISSING)))
    return {"type": "function", "function": function}


_STRING_SCHEMAS = (
    {"type": "string"},
    {"type": "string", "description": "raw"},
    {"type": "string", "properties": {}},
    {"type": "string", "properties": {"x": {"type": "string"}}},
)


@cache
def _tool_description() -> st.SearchStrategy:
    return _maybe(
        st.one_of(plain_text(0, 8), st.sampled_from(("line one\nline two", "", "\n", None))), _MISSING
    )


@st.composite
def any_tools(draw) -> Any:
    """One tool definition, valid or not: function-wrapped or bare, string-schema, no parameters,
    multi-line descriptions, the trained search definition, bash variants, random schemas."""
    form = draw(st.integers(-1, 12))
    if form == 0:
        return SEARCH_TOOL
    if form in (-1, 1):
        return draw(_bash_tool())
    if form == 2:
        return _pick(draw, ({"type": "function"}, {"type": "function", "function": None}, {}))
    spec: dict[str, Any] = {}
    _put(spec, "name", draw(_maybe(_names(), _MISSING, "f")) if form == 3 else draw(_names()))
    _put(spec, "description", draw(_tool_description()))
    params_form = draw(st.integers(0, 9))
    if params_form <= 5:
        spec["parameters"] = draw(json_schemas(2, root_object=True))
    elif params_form == 6:
        spec["parameters"] = _pick(draw, _STRING_SCHEMAS)
    elif params_form == 7:
        spec["parameters"] = (
            draw(json_schemas(1)) if draw(st.booleans()) else _pick(draw, (None, "object", []))
        )
    # 8, 9: no parameters at all
    if form <= 8:
        return {"type": "function", "function": spec}
    return spec


@cache
def _call_arguments() -> st.SearchStrategy:
    return st.one_of(
        st.dictionaries(
            st.sampled_from(_PROP_NAMES) | plain_text(0, 2), json_values(6, any_text()), max_size=4
        ),
        st.dictionaries(parameter_names(), json_values(6), max_size=3),
        st.sampled_from(('{"city": "Paris"}', "", None, [], ["a"], 0, _MISSING)),
    )


@st.composite
def _any_call(draw) -> Any:
    if draw(st.integers(0, 30)) == 0:
        return _pick(draw, ("get_weather", None, 3))
    fn: dict[str, Any] = {}
    _put(
        fn,
        "name",
        draw(_maybe(_names(), _MISSING, None, "")) if draw(st.integers(0, 9)) == 0 else draw(_names()),
    )
    _put(fn, "arguments", draw(_call_arguments()))
    if draw(st.integers(0, 9)) == 0:
        fn["id"] = _pick(draw, _ID_POOL)
    call: dict[str, Any] = {}
    _put(call, "id", _pick(draw, _ID_POOL + (_MISSING, _MISSING, None, "")))
    _put(call, "type", _pick(draw, ("function", "function", _MISSING)))
    if draw(st.integers(0, 9)) == 0:
        call.update(fn)  # the flat form: name/arguments on the call itself
    else:
        call["function"] = fn
    return call


_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
_ROLES = (
    "user",
    "user",
    "assistant",
    "assistant",
    "assistant",
    "tool",
    "tool",
    "system",
    "developer",
    "ipython",
    _MISSING,
)


@cache
def _message_parts() -> dict[str, st.SearchStrategy]:
    return {
        "content": st.one_of(any_text(), st.sampled_from((None, "", _MISSING))),
        "odd_content": st.sampled_from(([{"type": "text", "text": "hi"}], 7)),
        "reasoning": st.one_of(any_text(), st.sampled_from((None, ""))),
        "calls": st.one_of(
            st.lists(_any_call(), min_size=1, max_size=3),
            st.sampled_from((_MISSING, _MISSING, _MISSING, None, [])),
        ),
        "tool_name": _maybe(_names(), _MISSING, _MISSING, _MISSING, None, ""),
    }


@st.composite
def _any_message(draw) -> dict:
    parts = _message_parts()
    role = _pick(draw, _ROLES)
    message: dict[str, Any] = {}
    _put(message, "role", role)
    _put(
        message, "content", draw(parts["odd_content"] if draw(st.integers(0, 40)) == 0 else parts["content"])
    )
    if role == "assistant":
        for field in _REASONING_FIELDS:
            if draw(st.integers(0, 2)) == 0:
                message[field] = draw(parts["reasoning"])
        _put(message, "tool_calls", draw(parts["calls"]))
        if draw(st.integers(0, 5)) == 0:
            message["weight"] = _pick(draw, (0, 1))
    elif role == "tool":
        _put(message, "name", draw(parts["tool_name"]))
        _put(message, "tool_call_id", _pick(draw, _ID_POOL + (_MISSING, None)))
    return dict(draw(st.permutations(list(message.items()))))


@st.composite
def _perturbed_valid_messages(draw) -> list[dict]:
    """Valid rows with one or two realistic mistakes (dropped reasoning, ids, late instructions ...)."""
    messages = [dict(m) for m in draw(_perturbable_rows())]
    for _ in range(draw(st.integers(0, 2))):
        i = draw(st.integers(0, len(messages) - 1))
        m = messages[i]
        mistake = draw(st.integers(0, 8))
        if mistake == 0 and m["role"] == "assistant":
            m.pop("reasoning_content", None)
        elif mistake == 1 and m["role"] == "assistant":
            m[_pick(draw, ("thinking", "reasoning"))] = m.pop("reasoning_content", "")
        elif mistake == 2 and m["role"] == "tool":
            m.pop("tool_call_id", None)
        elif mistake == 3:
            messages.insert(i, {"role": _pick(draw, ("system", "developer")), "content": "late"})
        elif mistake == 4 and m["role"] == "assistant" and "tool_calls" in m:
            m["tool_calls"] = [dict(c, id=None) for c in m["tool_calls"]]
        elif mistake == 5:
            del messages[i]
            if not messages:
                break
        elif mistake == 6 and m["role"] == "assistant":
            m["content"] = draw(any_text())
        elif mistake == 7:
            # Some clients number call ids per turn ("call_0" in every turn), so ids repeat with
            # different tools; results that carry only an id then resolve to the latest call.
            _renumber_ids_per_turn(messages)
    return messages


def _renumber_ids_per_turn(messages: list[dict]) -> None:
    renamed: dict[str, str] = {}
    for m in messages:
        if m.get("role") == "assistant" and isinstance(m.get("tool_calls"), list):
            for n, call in enumerate(m["tool_calls"]):
                if isinstance(call, dict) and call.get("id"):
                    renamed[call["id"]] = f"call_{n}"
                    call["id"] = f"call_{n}"
        elif m.get("role") == "tool" and m.get("tool_call_id") in renamed:
            m["tool_call_id"] = renamed[m["tool_call_id"]]


@cache
def _perturbable_rows() -> st.SearchStrategy[list[dict]]:
    return beam_messages(max_exchanges=2, with_weights=False, text=any_text())


@cache
def any_template_kwargs() -> st.SearchStrategy[dict]:
    """The chat template's keyword arguments as ``any_conversations`` draws them (its ``kwargs``)."""
    effort = st.one_of(
        st.sampled_from(sorted(markers.REASONING_EFFORT_LABELS)),
        st.integers(-5, 2000),
        st.sampled_from((None, "none", "MAX", "", "512", 1.5, True)),
    )
    builtin = st.one_of(
        st.lists(st.sampled_from(("search", "browse", "bash", "get_weather", "f")), max_size=3),
        st.sampled_from((None, "search", ("browse",))),
    )
    return st.fixed_dictionaries(
        {"add_generation_prompt": st.booleans()},
        optional={
            "reasoning_effort": effort,
            "model_identity": st.one_of(plain_text(0, 6), st.sampled_from(("", None))),
            "builtin_tools": builtin,
            "allow_missing_thinking": st.sampled_from((True, False, False, None, 0, 1)),
        },
    )


@cache
def _conversation_parts() -> dict[str, st.SearchStrategy]:
    return {
        "random": st.lists(_any_message(), min_size=1, max_size=7),
        "tools": st.one_of(st.lists(any_tools(), max_size=3), st.sampled_from((None, []))),
    }


@st.composite
def any_conversations(draw) -> dict:
    """``{"messages": list, "tools": list | None, "kwargs": dict}`` for differential rendering.

    ``kwargs`` always holds ``add_generation_prompt`` and sometimes ``reasoning_effort``,
    ``model_identity``, ``builtin_tools`` and ``allow_missing_thinking``; pass it as keyword
    arguments to ``apply_chat_template``. Messages come either fully random (any role order, any
    field missing/None/empty) or from :func:`beam_rows` with a couple of realistic mistakes.
    """
    parts = _conversation_parts()
    source = draw(st.integers(0, 40))
    if source == 0:
        messages = []
    elif source % 2:
        messages = draw(parts["random"])
    else:
        messages = draw(_perturbed_valid_messages())
    return {"messages": messages, "tools": draw(parts["tools"]), "kwargs": draw(any_template_kwargs())}


__all__ = [
    "SEARCH_TOOL",
    "any_conversations",
    "any_template_kwargs",
    "any_text",
    "any_tools",
    "beam_messages",
    "beam_rows",
    "json_scalars",
    "json_schemas",
    "json_values",
    "nonblank_text",
    "parameter_names",
    "plain_text",
    "tool_names",
]
