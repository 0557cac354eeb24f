"""Tool definitions and tool calls in their many source shapes -> the BeamRow shapes.

A BeamRow tool is ``{"type": "function", "function": {"name", ...}}``; a call is
``{"id", "type": "function", "function": {"name", "arguments": dict}}``. Everything here raises
``Rejection`` (never anything else) on input it cannot read.

>>> parse_tool_call({"function": {"name": "f", "arguments": '{"x": 1}'}}, "messages[1].tool_calls[0]")
{'type': 'function', 'function': {'name': 'f', 'arguments': {'x': 1}}}
>>> normalize_tools('[{"name": "f", "parameters": {"type": "object"}}]', "tools")
[{'type': 'function', 'function': {'name': 'f', 'parameters': {'type': 'object'}}}]
"""

from __future__ import annotations

import json
import re
from typing import Any

from beam_sft.convert.literals import NOT_JSON, python_literal  # (NOT_JSON's and python_literal's home)
from beam_sft.convert.pytypes import MAX_TYPE_DEPTH, is_parameter_map, parameters_schema
from beam_sft.convert.rows import Rejection
from beam_sft.data import jsontext
from beam_sft.visible import cut, quoted


def parse_json_text(text: str, where: str) -> Any:
    """A JSON string decoded under the one rule of every reader (``beam_sft.data.jsontext``):
    not JSON is ``invalid_json``, NaN/Infinity/1e400 ``non_standard_number``, a key twice
    ``duplicate_key``."""
    try:
        return jsontext.loads(text)
    except (ValueError, RecursionError) as exc:
        raise Rejection(jsontext.reason(exc), f"{where}: {exc}") from None


def maybe_json(text: str, where: str) -> Any:
    """The value of text that may or may not be JSON (an envelope, a call list): ``NOT_JSON`` when
    it is not JSON syntax. JSON syntax that breaks the rule is rejected, never read as plain text
    (else ``1e400`` would ride through as a string beside the rows where it is refused)."""
    try:
        return jsontext.loads(text)
    except (ValueError, RecursionError) as exc:
        if jsontext.semantic(exc):
            raise Rejection(jsontext.reason(exc), f"{where}: {exc}") from None
        return NOT_JSON


# --- tool definitions ---------------------------------------------------------------------------


def normalize_tools(value: Any, where: str) -> list[dict]:
    """A ``tools``/``functions`` value (list, one object, JSON string, or None) -> BeamRow tools.

    Bare function objects (``{"name", "parameters"}``, as in glaive and legacy ``functions``) are
    wrapped; a non-function tool (``{"type": "code_interpreter"}``) is ``bad_tool_definition``.
    ``parameters`` written as xLAM's map of Python type strings (pytypes.is_parameter_map) become the
    JSON Schema they say, in every reader (read as a schema, the tool would show no parameters).
    """
    if value is None:
        return []
    if isinstance(value, str):
        if not value.strip():
            return []
        value = parse_json_text(value, where)
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise Rejection("bad_tool_definition", f"{where} is a {type(value).__name__}, not a list of tools")
    tools = [_normalize_tool(tool, f"{where}[{i}]") for i, tool in enumerate(value)]
    names = [t["function"]["name"] for t in tools]
    for name in names:
        if names.count(name) > 1:
            raise Rejection("bad_tool_definition", f"{where} declares {quoted(name)} twice")
    return tools


def _normalize_tool(tool: Any, where: str) -> dict:
    if not isinstance(tool, dict):
        raise Rejection("bad_tool_definition", f"{where} is not an object")
    kind = tool.get("type")
    if isinstance(tool.get("function"), dict):
        if kind not in (None, "function"):
            raise Rejection("bad_tool_definition", f"{where} has type {quoted(kind)}")
        fn = tool["function"]
    elif "name" in tool and kind in (None, "function"):
        fn = {k: v for k, v in tool.items() if k != "type"}
    else:
        raise Rejection("bad_tool_definition", f"{where} is not a function tool: {cut(json.dumps(tool, default=repr), 80)}")
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise Rejection("bad_tool_definition", f"{where} has no name")
    if "input_schema" in fn:  # Anthropic's name of the parameters schema: never kept as a key the template ignores
        if "parameters" in fn and fn["parameters"] != fn["input_schema"]:
            raise Rejection("bad_tool_definition", f"{where} writes its parameters twice, differently "
                            "(parameters and input_schema)")
        fn = {**{k: v for k, v in fn.items() if k != "input_schema"}, "parameters": fn["input_schema"]}
    if "description" in fn and not isinstance(fn["description"], (str, type(None))):
        raise Rejection("bad_tool_definition", f"{where}.description is not a string")
    if "parameters" in fn and not isinstance(fn["parameters"], (dict, type(None))):
        raise Rejection("bad_tool_definition", f"{where}.parameters is not an object")
    if is_parameter_map(fn.get("parameters")):  # xLAM's name -> {type: "List[int]"} map kept in this shape
        at = f"{where}.function.parameters" if fn is tool.get("function") else f"{where}.parameters"
        fn = {**fn, "parameters": parameters_schema(fn["parameters"], at)}
    if isinstance(fn.get("parameters"), dict):
        try:
            fn = {**fn, "parameters": normalize_schema(fn["parameters"])}
        except RecursionError:  # (normalize_schema's own bound; a RecursionError is never let out of it)
            raise Rejection("bad_tool_definition", f"{where}.parameters nests schemas past {MAX_SCHEMA_DEPTH} "
                                                   "deep") from None
    return {"type": "function", "function": fn}


# Type names JSON Schema does not have, as public sets write them: Python's (BFCL/ToolACE's
# ``"type": "dict"``, xLAM's ``str``) and Gemini's upper case (``OBJECT``). The template knows only
# JSON Schema's names and would render every other one as ``any``: the model would see no members.
SCHEMA_TYPE_ALIASES: dict[str, str] = {
    "dict": "object", "list": "array", "tuple": "array", "str": "string", "int": "integer",
    "float": "number", "bool": "boolean",
    **{name.upper(): name for name in ("object", "array", "string", "integer", "number", "boolean", "null")},
}
SUBSCHEMA_LISTS = ("oneOf", "anyOf", "allOf")
# Keys whose value is a schema, or a list of them, at any depth (normalize_schema and
# validate._schema_problem walk the same).
SUBSCHEMA_KEYS = ("items", "additionalProperties", *SUBSCHEMA_LISTS)
# Deeper than this, a parameters schema is refused (bad_tool_definition) before a walk of it can
# exhaust Python's stack (a hostile row's 5,000 nested items made a converter_error).
MAX_SCHEMA_DEPTH = MAX_TYPE_DEPTH  # (one bound: a type text nests as deep as the schema it becomes)


def normalize_schema(node: Any, depth: int = 1) -> Any:
    """A parameters schema with its type names in JSON Schema's words (``SCHEMA_TYPE_ALIASES``), at
    every depth of its structure (properties, items, unions); names, enums and defaults untouched.
    Past ``MAX_SCHEMA_DEPTH`` nested schemas it raises ``RecursionError`` itself, before Python's stack
    would (the caller refuses the tool).

    >>> normalize_schema({"type": "dict", "properties": {"type": {"type": "STRING", "enum": ["dict"]}}})
    {'type': 'object', 'properties': {'type': {'type': 'string', 'enum': ['dict']}}}
    """
    if not isinstance(node, dict):
        return node
    if depth > MAX_SCHEMA_DEPTH:
        raise RecursionError(f"schemas nested past {MAX_SCHEMA_DEPTH} deep")
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, str):
            value = SCHEMA_TYPE_ALIASES.get(value, value)
        elif key == "type" and isinstance(value, list):
            value = [SCHEMA_TYPE_ALIASES.get(v, v) if isinstance(v, str) else v for v in value]
        elif key == "properties" and isinstance(value, dict):
            value = {name: normalize_schema(sub, depth + 1) for name, sub in value.items()}
        elif key in ("items", "additionalProperties"):
            value = ([normalize_schema(v, depth + 1) for v in value] if isinstance(value, list)
                     else normalize_schema(value, depth + 1))
        elif key in SUBSCHEMA_LISTS and isinstance(value, list):
            value = [normalize_schema(v, depth + 1) for v in value]
        out[key] = value
    return out


def merge_tools(*groups: list[dict]) -> list[dict]:
    """Tools from several places (row column, system message, system prompt text): one tool declared
    in two places is one tool, the first place's wording kept; declared with other parameters, which
    of the two schemas the calls were made against cannot be told: ``bad_tool_definition``.

    >>> t = lambda n, d, p=None: {"type": "function", "function": {"name": n, "description": d, "parameters": p}}
    >>> [x["function"]["description"] for x in merge_tools([t("a", "row")], [t("a", "sys"), t("b", "sys")])]
    ['row', 'sys']
    >>> merge_tools([t("f", "", {"properties": {"a": {}}})], [t("f", "", {"properties": {"b": {}}})])
    Traceback (most recent call last):
    ...
    beam_sft.errors.Rejection: [bad_tool_definition] the tool 'f' is declared twice with different parameters
    """
    out: list[dict] = []
    seen: dict[str, Any] = {}
    for group in groups:
        for tool in group:
            name = tool["function"]["name"]
            params = tool["function"].get("parameters") or {}
            if name not in seen:
                seen[name] = params
                out.append(tool)
            elif _canonical(params) != _canonical(seen[name]):
                raise Rejection("bad_tool_definition", f"the tool {quoted(name)} is declared twice with different parameters")
    return out


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)


# A <tools> block in a system prompt, with the Qwen2.5/Hermes boilerplate that introduces it and
# the instruction after it (that instruction describes a wire format Beam does not use).
_TOOLS_BLOCK_RE = re.compile(r"<tools>(?P<body>.*?)</tools>", re.DOTALL)
_TOOLS_SENTENCES = (
    r"You may call one or more functions to assist with the user query\.",
    r"You are provided with function signatures within <tools>\s*</tools> XML tags[.:]?",
    r"Don't make assumptions about what values to plug into functions\.",  # Hermes function calling
)
_TOOLS_PREAMBLE_RE = re.compile(r"(?:#\s*Tools\s*)?(?:(?:" + "|".join(_TOOLS_SENTENCES) + r")\s*)*\Z")
# Qwen2.5's instruction, and Hermes' (hermes-function-calling-v1: single quotes, "with the following schema").
_TOOLS_SUFFIX_RE = re.compile(
    r"\s*For each function call,? return a json object with function name and arguments within "
    r"<tool_call>\s*</tool_call>(?: XML)? tags(?: with the following schema)?[.:]?\s*<tool_call>\s*"
    r"\{\s*['\"](?:name|arguments)['\"]\s*:\s*<[\w-]+>\s*,\s*['\"](?:name|arguments)['\"]\s*:\s*<[\w-]+>\s*\}"
    r"\s*</tool_call>"
)


def extract_system_tools(text: str, where: str) -> tuple[str, list[dict]]:
    """Split a system prompt into ``(prompt without the tools block, tools)``.

    The first ``<tools>`` block with something in it is taken (an empty ``<tools></tools>`` is a
    mention in the prose). It holds a JSON list, one JSON object, or one JSON object per line
    (Qwen2.5). The Qwen/Hermes sentences around it go with it.

    >>> extract_system_tools('Be kind.\\n<tools>[{"name": "f"}]</tools>', "messages[0]")
    ('Be kind.', [{'type': 'function', 'function': {'name': 'f'}}])
    """
    m = next((b for b in _TOOLS_BLOCK_RE.finditer(text) if b["body"].strip()), None)
    if m is None:
        return text, []
    body = m["body"].strip()
    value: Any = maybe_json(body, f"{where}: <tools> block")
    if value is NOT_JSON:
        value = _literal_tools(body, where)
    if value is NOT_JSON:
        lines = [line for line in body.splitlines() if line.strip()]
        value = [parse_json_text(line, f"{where}: <tools> block") for line in lines]
    tools = normalize_tools(value, f"{where}: <tools> block")
    head = text[: m.start()]
    start = _TOOLS_PREAMBLE_RE.search(head).start()  # matches (possibly empty) at the end at least
    suffix = _TOOLS_SUFFIX_RE.match(text, m.end())
    end = suffix.end() if suffix else m.end()
    before, after = text[:start].rstrip(), text[end:].lstrip()
    return (before + "\n\n" + after if before and after else before or after), tools


# Llama 3.1's chat template (transformers' tokenizer_config.json) declares custom tools in the first user
# turn (tools_in_user_message, its default) or in the system turn, in these words, then each tool as
# ``tojson`` and a blank line. Meta's own prompt format writes " Do not use variables." (a space).
_LLAMA_TOOL_HEADS = {
    "user": "Given the following functions, please respond with a JSON for a function call with its proper "
            "arguments that best answers the given prompt.\n\n",
    "system": "You have access to the following functions. To call a function, please respond with JSON for a "
              "function call.",
}
_LLAMA_TOOL_FORMAT = 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.'
_LLAMA_NO_VARIABLES = ("Do not use variables.\n\n", " Do not use variables.\n\n")


def extract_llama_tools(text: str, role: str, where: str) -> tuple[str, list[dict]]:
    r"""Split Llama 3.1's tool block off a system turn (anywhere in it) or the first user turn (at its
    start): ``(text without the block, tools)``; ``(text, [])`` where the template's sentences are not
    there exactly. Each tool is read up to the first value that is no tool (``{"type": "function",
    "function": ...}`` or a function with a ``name``): that is the user's own text. The one JSON rule
    holds in the block (a duplicate key, a non-standard number: refused by its code); text that is not
    JSON, or too deep to read, ends it.

    >>> head = ("Given the following functions, please respond with a JSON for a function call with its proper "
    ...         "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, "
    ...         "\"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n")
    >>> text, tools = extract_llama_tools(head + '{"type": "function", "function": {"name": "f", "parameters": '
    ...     '{"type": "object", "properties": {}}}}\n\nCall f.', "user", "messages[0]")
    >>> text, [t["function"]["name"] for t in tools]
    ('Call f.', ['f'])
    """
    head = _LLAMA_TOOL_HEADS.get(role)
    if head is None:
        return text, []
    start = text.find(head) if role == "system" else (0 if text.startswith(head) else -1)
    pos = start + len(head)
    if start < 0 or not text.startswith(_LLAMA_TOOL_FORMAT, pos):
        return text, []
    pos += len(_LLAMA_TOOL_FORMAT)
    tail = next((t for t in _LLAMA_NO_VARIABLES if text.startswith(t, pos)), None)
    if tail is None:
        return text, []
    pos += len(tail)
    values: list[Any] = []
    while text.startswith("{", pos):
        try:
            value, end = jsontext.decoder().raw_decode(text, pos)
        except (ValueError, RecursionError) as exc:
            if jsontext.semantic(exc):
                raise Rejection(jsontext.reason(exc), f"{where}: Llama 3.1's function block: {exc}") from None
            break
        if not _is_tool(value) or not text.startswith("\n\n", end):
            break
        values.append(value)
        pos = end + 2
    tools = normalize_tools(values, f"{where}: Llama 3.1's function block")
    rest = text[pos:]
    return text[:start] + (rest.strip() if role == "user" else rest), tools


def _is_tool(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    if value.get("type") == "function" and isinstance(value.get("function"), dict):
        return True
    return isinstance(value.get("name"), str) and ("parameters" in value or "description" in value)


def _literal_tools(body: str, where: str) -> Any:
    """A ``<tools>`` block written as a Python literal (hermes-function-calling-v1 writes
    ``[{'type': 'function', ...}]``, as it writes its ``<tool_call>`` bodies), else ``NOT_JSON``."""
    if not body.startswith(("[", "{")) or len(body) > MAX_LITERAL_CHARS:
        return NOT_JSON
    return python_literal(body, f"{where}: <tools> block")


MAX_LITERAL_CHARS = 1_000_000  # ast's time and recursion on hostile text


# --- tool calls -----------------------------------------------------------------------------------


def parse_arguments(args: Any, where: str) -> dict:
    """Arguments as a dict: a dict, a JSON string (once or twice encoded), or nothing (``{}``).

    >>> parse_arguments('"{\\\\"a\\\\": 1}"', "x"), parse_arguments("", "x")
    ({'a': 1}, {})
    """
    if args is None:
        return {}
    if isinstance(args, str):
        if not args.strip():
            return {}
        args = parse_json_text(args, f"{where}.arguments")
        if isinstance(args, str):  # double-encoded: a JSON string holding the JSON object
            args = parse_json_text(args, f"{where}.arguments (decoded once)")
    if not isinstance(args, dict):
        raise Rejection("arguments_not_object", f"{where}.arguments is a {type(args).__name__}, not an object")
    return args


# Where a call's arguments are written, in the order they are looked for: OpenAI's ``arguments``,
# Llama's ``parameters``, Gemini's ``args``, Anthropic's and the AI SDK's ``input``. A call that
# writes them under any of these keys keeps them (never read as no arguments at all).
ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")


def _call_arguments(where: str, *holders: dict) -> Any:
    """The arguments of a call: the one of ``ARGUMENT_KEYS`` present, in the function object first,
    then in the call around it; None when none is. Two of them in one object that differ are
    ``malformed_tool_call``: which one the writer meant cannot be told, and keeping either loses the
    other unsaid."""
    for holder in holders:
        found = [key for key in ARGUMENT_KEYS if key in holder]
        if found:
            if any(holder[key] != holder[found[0]] for key in found[1:]):
                raise Rejection("malformed_tool_call",
                                f"{where} writes its arguments twice, differently ({' and '.join(found)})")
            return holder[found[0]]
    return None


def parse_tool_call(call: Any, where: str) -> dict:
    """One call in OpenAI (``function: {name, arguments}``) or flat (``name, arguments``) shape.

    The id is kept when it is a string or an int (written as a string); ids are assigned later
    for calls without one.
    """
    if not isinstance(call, dict):
        raise Rejection("malformed_tool_call", f"{where} is not an object")
    fn = call.get("function")
    if isinstance(fn, dict):
        name = fn.get("name")
        args = _call_arguments(where, fn, call)
        kind = call.get("type") or fn.get("type")
    elif fn is None:
        name = call.get("name")
        args = _call_arguments(where, call)
        kind = call.get("type")
    else:
        raise Rejection("malformed_tool_call", f"{where}.function is not an object")
    if kind not in (None, "function"):
        raise Rejection("malformed_tool_call", f"{where} has type {quoted(kind)}, not a function call")
    if not isinstance(name, str) or not name:
        raise Rejection("malformed_tool_call", f"{where} has no function name")
    out: dict[str, Any] = {}
    call_id = call.get("id")
    if isinstance(call_id, bool):
        call_id = None
    if isinstance(call_id, int):
        call_id = str(call_id)
    if isinstance(call_id, str) and call_id:
        out["id"] = call_id
    out["type"] = "function"
    out["function"] = {"name": name, "arguments": parse_arguments(args, where)}
    return out


# Qwen3-coder XML calls: <tool_call><function=NAME><parameter=KEY>VALUE</parameter></function></tool_call>
_XML_CALL_RE = re.compile(r"<function=(?P<name>[^>\n]*)>(?P<body>.*?)</function>", re.DOTALL)
_XML_PARAM_RE = re.compile(r"<parameter=(?P<key>[^>\n]*)>(?P<value>.*?)</parameter>", re.DOTALL)


def parse_xml_function(text: str, where: str) -> dict:
    """A Qwen3-coder ``<function=...>`` call; values stay strings (one newline trimmed each side).

    Strings are what Beam writes as-is, so a value renders exactly as the source wrote it.

    >>> parse_xml_function("<function=f>\\n<parameter=n>\\n5\\n</parameter>\\n</function>", "x")
    {'type': 'function', 'function': {'name': 'f', 'arguments': {'n': '5'}}}
    >>> parse_xml_function("<function=f><parameter=n>1</parameter><parameter=n>2</parameter></function>", "x")
    Traceback (most recent call last):
    ...
    beam_sft.errors.Rejection: [duplicate_key] x: parameter 'n' given twice
    """
    m = _XML_CALL_RE.fullmatch(text.strip())
    if m is None or not m["name"].strip():
        raise Rejection("malformed_tool_call", f"{where}: not a <function=NAME>...</function> call")
    body = m["body"]
    args: dict[str, str] = {}
    pos = 0
    for p in _XML_PARAM_RE.finditer(body):
        if body[pos : p.start()].strip():
            raise Rejection("malformed_tool_call", f"{where}: text between parameters")
        value = p["value"]
        value = value[1:] if value.startswith("\n") else value
        value = value[:-1] if value.endswith("\n") else value
        key = p["key"].strip()
        if key in args:  # as the JSON and Harmony readers do: a key twice is never settled silently
            raise Rejection("duplicate_key", f"{where}: parameter {quoted(key)} given twice")
        args[key] = value
        pos = p.end()
    if body[pos:].strip():
        raise Rejection("malformed_tool_call", f"{where}: text after the last parameter")
    return {"type": "function", "function": {"name": m["name"].strip(), "arguments": args}}


_TOOL_CALL_BLOCK_RE = re.compile(r"<tool_call>(?P<body>.*?)</tool_call>", re.DOTALL)


def parse_xml_function_calls(text: str, where: str) -> list[dict]:
    """All ``<tool_call>`` blocks of a Qwen3-coder ``function_calls`` string."""
    calls = []
    pos = 0
    for m in _TOOL_CALL_BLOCK_RE.finditer(text):
        if text[pos : m.start()].strip():
            raise Rejection("malformed_tool_call", f"{where}: text outside <tool_call> blocks")
        calls.append(parse_xml_function(m["body"], f"{where}[{len(calls)}]"))
        pos = m.end()
    if text[pos:].strip() or not calls:
        raise Rejection("malformed_tool_call", f"{where}: not a sequence of <tool_call> blocks")
    return calls


def same_calls(structured: list[dict], textual: list[dict]) -> bool:
    """Whether XML-parsed calls (string values) say what the structured calls say.

    >>> c = lambda v: [{"type": "function", "function": {"name": "f", "arguments": {"n": v}}}]
    >>> same_calls(c(5), c("5")), same_calls(c(5), c("6"))
    (True, False)
    """
    if len(structured) != len(textual):
        return False
    for a, b in zip(structured, textual, strict=True):
        fa, fb = a["function"], b["function"]
        if fa["name"] != fb["name"] or list(fa["arguments"]) != list(fb["arguments"]):
            return False
        for key, value in fa["arguments"].items():
            text = fb["arguments"][key]
            if value == text:
                continue
            try:
                if jsontext.loads(text) == value:
                    continue
            except (ValueError, TypeError, RecursionError):
                pass
            return False
    return True
