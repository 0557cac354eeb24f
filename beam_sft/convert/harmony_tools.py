"""Tool declarations written as TypeScript (Beam's ``# Tools`` block, gpt-oss's ``namespace
functions``) read back into JSON-Schema tools, for transcripts that carry no structured tools.

This is the inverse of the chat template's renderer for the shapes it writes: descriptions from
``//`` comments, optional properties from ``?``, ``string``/``number``/``boolean``/``any``, string
literal unions (enums), ``T[]``, ``Array<any>``, nested objects, ``| null`` and ``// default:``
notes. It is lossy where the rendering is: ``integer`` and ``number`` both render as ``number``,
and ``Examples:`` comments are skipped. A transcript row that has a ``tools`` column uses it
instead.

>>> ts = '''# Tools
...
... // Get the weather.
... type get_weather = (_: {
... // City name
... city: string,
... unit?: "c" | "f", // default: c
... }) => any;'''
>>> parse_typescript_tools(ts)[0]["function"]["parameters"]["properties"]["unit"]
{'type': 'string', 'enum': ['c', 'f'], 'default': 'c'}
"""

from __future__ import annotations

import re
from typing import Any

_DECL_RE = re.compile(
    r"((?:^//[^\n]*\n)*)^type (?P<name>[^\s=]+) = \((?P<params>.*?)\) => any;", re.DOTALL | re.MULTILINE
)
_STRING_TOOL_RE = re.compile(
    r"^## (?P<name>\S+)\n\n(?P<desc>.*?)(?=\n\n## |\n\n// |\n\ntype |\Z)", re.DOTALL | re.MULTILINE
)
_PROP_RE = re.compile(r"^(?P<name>[^\s?:]+)(?P<opt>\??): (?P<type>.*?),(?: // default: (?P<default>.*))?$")


def parse_typescript_tools(text: str) -> list[dict]:
    """Every ``type NAME = (...) => any;`` (and ``## NAME`` string tool) in a ``# Tools`` block."""
    tools = []
    for m in _DECL_RE.finditer(text):
        fn: dict[str, Any] = {"name": m["name"]}
        description = _comment_text(m.group(1))
        if description:
            fn["description"] = description
        params = m["params"].strip()
        if params.startswith("_:"):
            body = params[2:].strip()
            fn["parameters"] = {} if body == "any" else _parse_type(body)
        else:
            fn["parameters"] = {"type": "object", "properties": {}}
        tools.append({"type": "function", "function": fn})
    for m in _STRING_TOOL_RE.finditer(text):
        if m["name"] != "functions":
            fn = {"name": m["name"], "parameters": {"type": "string"}}
            if m["desc"].strip():
                fn["description"] = m["desc"].strip()
            tools.append({"type": "function", "function": fn})
    return tools


def _comment_text(block: str) -> str:
    return "\n".join(line[3:] if line.startswith("// ") else line[2:] for line in block.splitlines() if line)


def _parse_type(text: str) -> dict:
    text = text.strip()
    if text.startswith("{"):
        return _parse_object(text)
    parts = [p.strip() for p in _split_union(text)]
    nullable = "null" in parts
    parts = [p for p in parts if p != "null"]
    if parts and all(p.startswith('"') and p.endswith('"') for p in parts):
        schema: dict[str, Any] = {"type": "string", "enum": [p[1:-1] for p in parts]}
    elif len(parts) == 1:
        schema = _parse_single(parts[0])
    else:
        types = [_parse_single(p).get("type") for p in parts]
        schema = (
            {"type": [t for t in types if isinstance(t, str)]}
            if all(isinstance(t, str) for t in types)
            else {}
        )
    if nullable:
        kind = schema.get("type")
        schema["type"] = ([*kind, "null"] if isinstance(kind, list) else [kind, "null"]) if kind else "null"
    return schema


def _parse_single(text: str) -> dict:
    if text in ("string", "number", "boolean"):
        return {"type": text}
    if text == "Array<any>":
        return {"type": "array"}
    if text.endswith("[]"):
        return {"type": "array", "items": _parse_type(text[:-2])}
    return {}


def _split_union(text: str) -> list[str]:
    parts, depth, start, quoted = [], 0, 0, False
    for i, ch in enumerate(text):
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in "{[<":
            depth += 1
        elif not quoted and ch in "}]>":
            depth -= 1
        elif not quoted and depth == 0 and text.startswith(" | ", i - 1) and ch == "|":
            parts.append(text[start : i - 1])
            start = i + 2
    parts.append(text[start:])
    return parts


_OBJECT_HEAD_RE = re.compile(r"^(?P<name>[^\s?:]+)(?P<opt>\??):(?:\s+//.*)?(?: (?P<brace>\{))?$")


def _parse_object(text: str) -> dict:
    """``{ ... }`` as the template writes an object: comments, then ``name?: type,`` lines; a
    nested object opens with ``name?: {`` (or ``name?:     // description`` and ``{`` on the next
    line) and closes with ``},`` (``}[],`` for an array of objects)."""
    body = text.strip()
    lines = body[1:-1].strip("\n").split("\n") if body.startswith("{") and body.endswith("}") else []
    properties: dict[str, Any] = {}
    required: list[str] = []
    comments: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if line.startswith("//"):
            text_ = line[2:].strip()
            if text_ and text_ != "Examples:" and not text_.startswith("- "):
                comments.append(text_)
            continue
        head = _OBJECT_HEAD_RE.match(line)
        # An object's description is written after the head ("C:     // text") and then "{" on
        # its own line; a description holding line breaks puts its other lines in between.
        brace_at = i
        if head is not None and not head["brace"] and "//" in line:
            while brace_at < len(lines) and lines[brace_at].strip() != "{":
                brace_at += 1
        if head is not None and (head["brace"] or (brace_at < len(lines) and lines[brace_at].strip() == "{")):
            if not head["brace"]:
                i = brace_at + 1  # past the "{" line
            depth, block = 1, []
            while i < len(lines) and depth:
                inner = lines[i]
                depth += inner.count("{") - inner.count("}")
                block.append(inner)
                i += 1
            closing = block.pop().strip() if block else "},"
            schema = _parse_object("{\n" + "\n".join(block) + "\n}")
            if closing.startswith("}[]"):
                schema = {"type": "array", "items": schema}
            name, optional, default = head["name"], bool(head["opt"]), None
        else:
            m = _PROP_RE.match(line)
            if m is None:
                comments = []
                continue
            schema = _parse_type(m["type"])
            name, optional, default = m["name"], bool(m["opt"]), m["default"]
        if comments:
            schema = {"description": "\n".join(comments), **schema}
            comments = []
        if default is not None:
            schema["default"] = _parse_default(default)
        properties[name] = schema
        if not optional:
            required.append(name)
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    return out


def _parse_default(text: str) -> Any:

    from beam_sft.convert.tools import NOT_JSON, maybe_json

    value = maybe_json(text, "a tool declaration's default value")
    return text if value is NOT_JSON else value
