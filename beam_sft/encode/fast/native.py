"""Beam's chat template written out in Python, for the encoder's hot path: same text, same spans.

On real data (every row its own system prompt and tool set) the memoised Jinja render of
``render.py`` has nothing to remember, and running the template is half of what encoding costs.
This module renders the same rows with plain string operations. It is a transcription of
``beam_sft/harmony/chat_template.jinja`` (the template beam-sft ships, which renders what the
checkpoint's own template renders: ``tests/harmony/test_template_differential.py``), and it is only
used for a tokenizer whose chat template *is* one of the sources in ``KNOWN_TEMPLATE_DIGESTS``.

It never decides anything the template would decide differently. It renders only the plain case:
every value where Jinja would quietly take an odd path (an attribute that is missing where the
template concatenates it, text that is not a string, a ``oneOf`` that is not a list, a template
argument the template does not know, any exception at all) makes ``render`` return None, and the
row goes to the Jinja render, which gives the template's own text or its own error. Exactness is
held by a differential test against the template on generated rows and schemas
(``tests/encode/test_native.py``), by the start-up probe (``probe.py``) on the run's own rows, and
by verify, which renders every row again through the tokenizer's template.

Jinja semantics mirrored here: ``is mapping`` is ``isinstance(x, Mapping)``; ``is sequence`` is
"has ``len`` and ``__getitem__``" (strings and dicts too); ``x.key`` on a dict reads the key (no key
used here is named like a dict method); ``in`` and ``==`` are Python's; ``~`` and ``{{ }}`` write
``str(x)``; transformers' ``tojson`` is ``json.dumps(x, ensure_ascii=False)``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from beam_sft.harmony.template import load_chat_template

_MISSING = object()
_ANALYSIS_TAG = "<|channel|>analysis<|message|>"
_FINAL_TAG = "<|channel|>final<|message|>"
_EFFORT_LABELS = {"minimal": 8, "low": 32, "medium": 64, "high": 128, "xhigh": 256, "max": 512}
_DEFAULT_IDENTITY = "You are Beam, an AI assistant trained by Reflection."
_TRAINED_BASH = {
    "name": "bash",
    "description": ("Execute a bash command. The output contains the command's stdout and stderr.\n"
                    "Commands time out after 10 minutes. You can set a shorter timeout within the bash command."),
    "parameters": {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "The command to execute"}},
        "required": ["command"],
    },
}
_BASH_PARAM_KEYS = ("type", "properties", "required", "additionalProperties", "description")
# Template arguments the template reads; any other one (apart from the tokenizer's special tokens,
# which it ignores) could shadow a global such as `namespace` or `raise_exception`: not ours to judge.
_TEMPLATE_ARGS = frozenset({"model_identity", "reasoning_effort", "builtin_tools", "allow_missing_thinking"})
# sha256 of the template sources this module transcribes. The first is the official checkpoint
# template (../shared/reference/chat_template.jinja); beam-sft's own is added at run time
# (``known_digests``). Both render identically (the template differential tests).
REFERENCE_TEMPLATE_SHA256 = "9673f1a64e5f76e03929fe844fc45b04a3b8aee4a05b8f50d85fa7fae0a2d15c"


class Unsupported(Exception):
    """The row is not the plain case this module renders: the template renders it instead."""


def template_digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


@cache
def known_digests() -> frozenset[str]:
    return frozenset({REFERENCE_TEMPLATE_SHA256, template_digest(load_chat_template())})


@cache
def supports(template_source: str) -> bool:
    """Whether ``template_source`` is a template this module renders exactly."""
    return template_digest(template_source) in known_digests()


def _is_sequence(value: Any) -> bool:
    try:
        len(value)
        value.__getitem__  # noqa: B018
    except Exception:
        return False
    return True


def _is_list(value: Any) -> bool:
    """``x is sequence and x is not string`` for the lists JSON gives; any other such sequence (a
    dict, a tuple: iterated or indexed differently) is not the plain case."""
    if isinstance(value, str) or not _is_sequence(value):
        return False
    if type(value) is not list:
        raise Unsupported
    return True


def _text(value: Any) -> str:
    """A value concatenated with ``+``: a string, or not the plain case."""
    if type(value) is not str:
        raise Unsupported
    return value


def _tojson(value: Any, separators=None) -> str:
    return json.dumps(value, ensure_ascii=False, separators=separators)


# JSON Schema -> TypeScript ---------------------------------------------------------------------

def _ts_scalar(name: Any) -> str:
    if name == "integer":
        return "number"
    if name in ("string", "number", "boolean"):
        return str(name)
    return "any"


def _ts_default(node: dict, quote_enum_strings: bool = False) -> str:
    enum_values = node.get("enum")
    has_enum = _is_list(enum_values) and bool(enum_values)
    default = node["default"]
    if isinstance(default, str):
        return default if has_enum and not quote_enum_strings else '"' + default + '"'
    return _tojson(default, (",", ":"))


def _ts_maybe_null(node: Any, pad: int) -> str:
    text = _ts_type(node, pad)
    if isinstance(node, Mapping) and node.get("nullable") and "null" not in text:
        return text + " | null"
    return text


def _ts_variants(variants: list, pad: int) -> str:
    out = []
    for variant in variants:
        out.append("\n" + " " * pad + " | " + _ts_maybe_null(variant, pad + 3))
        if isinstance(variant, Mapping) and isinstance(variant.get("description"), str):
            out.append(" // " + variant["description"])
            if "default" in variant:
                out.append(" default: " + _ts_default(variant, True))
        elif isinstance(variant, Mapping) and "default" in variant:
            out.append(" // default: " + _ts_default(variant, True))
    return "".join(out)


def _ts_type(node: Any, pad: int = 0) -> str:
    if not isinstance(node, Mapping):
        return "any"
    if type(node) is not dict:
        raise Unsupported
    variants = node.get("oneOf")
    enum_values = node.get("enum")
    kind = node.get("type")
    if _is_list(variants):
        return _ts_variants(variants, pad)
    if _is_list(enum_values) and enum_values and kind == "string":
        literals = [_tojson(value) for value in enum_values if isinstance(value, str)]
        return " | ".join(literals) if literals else "string"
    if kind == "object":
        return _ts_object(node, pad)
    if kind == "array":
        if node.get("items"):
            return _ts_type(node["items"], pad) + "[]"
        return "Array<any>"
    if isinstance(kind, str):
        return _ts_scalar(kind)
    if _is_list(kind):
        members = ["number" if member == "integer" else member for member in kind if isinstance(member, str)]
        return " | ".join(members) if members else "any"
    return "any"


def _ts_object(node: dict, pad: int) -> str:
    indent = " " * pad
    out = []
    if isinstance(node.get("description"), str):
        out.append(indent + "// " + node["description"] + "\n")
    out.append("{\n")
    required = node.get("required") or []
    if type(required) not in (list, str, dict):
        raise Unsupported
    properties = node.get("properties")
    if properties:
        if type(properties) is not dict:
            raise Unsupported
        for name, spec in properties.items():
            out.append(_ts_member(_text(name), spec, name not in required, pad))
    out.append(indent + "}")
    return "".join(out)


def _ts_member(name: str, spec: Any, optional: bool, pad: int) -> str:
    indent = " " * pad
    marker = "?" if optional else ""
    out = []
    is_mapping = isinstance(spec, Mapping)
    if is_mapping:
        if type(spec) is not dict:
            raise Unsupported
        if isinstance(spec.get("title"), str):
            out.append(indent + "// " + spec["title"] + "\n" + indent + "//\n")
        if "oneOf" not in spec and isinstance(spec.get("description"), str):
            out.append(indent + "// " + spec["description"] + "\n")
        examples = spec.get("examples")
        if _is_list(examples) and examples:
            out.append(indent + "// Examples:\n")
            out.extend(indent + '// - "' + example + '"\n' for example in examples if isinstance(example, str))
    variants = spec.get("oneOf") if is_mapping else None
    if _is_list(variants):
        own_text = spec.get("description") if isinstance(spec.get("description"), str) else None
        first = variants[0] if variants else {}
        first_text = (first.get("description") if isinstance(first, Mapping)
                      and isinstance(first.get("description"), str) else None)
        text_above = bool(own_text) and own_text != first_text
        if text_above:
            out.append(indent + "// " + own_text + "\n")
        if "default" in spec:
            out.append(indent + "// default: " + _ts_default(spec) + "\n")
        out.append(indent + name + marker + ":\n")
        for index, variant in enumerate(variants):
            out.append(indent + " | " + _ts_maybe_null(variant, pad + 3))
            variant_text = (variant.get("description") if isinstance(variant, Mapping)
                            and isinstance(variant.get("description"), str) else None)
            if variant_text is not None and variant_text != own_text and not (index == 0 and text_above):
                out.append(" // " + variant_text)
                if "default" in variant:
                    out.append(" default: " + _ts_default(variant))
            elif isinstance(variant, Mapping) and "default" in variant:
                out.append(" // default: " + _ts_default(variant))
            out.append("\n")
        out.append(indent + ",\n")
    else:
        out.append(indent + name + marker + ": " + _ts_maybe_null(spec, pad + 4) + ",")
        if is_mapping and "default" in spec:
            out.append(" // default: " + _ts_default(spec))
        out.append("\n")
    return "".join(out)


# Tool declarations -----------------------------------------------------------------------------

def _function_of(tool: Any) -> dict:
    if type(tool) is not dict:
        raise Unsupported
    spec = tool.get("function", _MISSING)
    if spec is _MISSING:
        return tool
    if type(spec) is not dict:
        raise Unsupported
    return spec


def _declare_tool(tool: Any) -> str:
    spec = _function_of(tool)
    params = spec.get("parameters", _MISSING)
    description = spec.get("description", _MISSING)
    if isinstance(params, Mapping) and params.get("type") == "string" and not params.get("properties"):
        text = "## " + _text(spec.get("name")) + "\n\n"
        if description is _MISSING or not description:
            return text
        return text + str(description)
    out = []
    if description is not _MISSING and description:
        out.extend("// " + line + "\n" for line in _text(description).split("\n"))
    params = None if params is _MISSING else params  # Undefined renders like any non-mapping: `any`
    out.append("type " + _text(spec.get("name")) + " = (_: " + _ts_type(params) + ") => any;")
    return "".join(out)


def _declare_tools(tools: list) -> str:
    return "# Tools\n\n" + "\n\n".join(_declare_tool(tool) for tool in tools)


def _sort_tools(tools: Any, builtin_names: Any) -> tuple[list, list]:
    system, developer = [], []
    for tool in tools:
        spec = _function_of(tool)
        params = spec.get("parameters")
        params = params if isinstance(params, Mapping) else {}
        props = params.get("properties")
        props = props if isinstance(props, Mapping) else {}
        command = props.get("command")
        command = command if isinstance(command, Mapping) else {}
        plain = (all(key in _BASH_PARAM_KEYS for key in params)
                 and all(key in ("type", "description") for key in command))
        name = spec.get("name", _MISSING)
        if name is _MISSING:
            raise Unsupported
        if (name == "bash" and plain and params.get("type") == "object" and list(props) == ["command"]
                and command.get("type") == "string" and params.get("required", ["command"]) == ["command"]):
            system.append(_TRAINED_BASH)
        elif name in builtin_names:
            system.append(tool)
        else:
            developer.append(tool)
    return system, developer


# Tool-call arguments ---------------------------------------------------------------------------

def _json_text(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(_tojson(key) + ": " + _json_text(item) for key, item in value.items()) + "}"
    if _is_list(value):
        return "[" + ", ".join(_json_text(item) for item in value) + "]"
    return _tojson(value)


def _xml_arguments(call: dict, fn: dict) -> str:
    args = fn["arguments"] if "arguments" in fn else call.get("arguments", _MISSING)
    if isinstance(args, Mapping):
        if type(args) is not dict:
            raise Unsupported
        out = []
        for key, value in args.items():
            text = value if isinstance(value, str) else _json_text(value)
            if "</rfl:parameter>" in text:
                raise Unsupported  # the template raises: its message, not ours
            out.append('<rfl:parameter name="' + _text(key) + '">\n' + text + "\n</rfl:parameter>")
        return "\n".join(out)
    if args is not _MISSING and args is not None:
        raise Unsupported  # the template raises
    return ""


def _call_target(call: Any) -> tuple[dict, Any, Any]:
    """(fn, target, call_id) as the template reads them from one tool call."""
    if type(call) is not dict:
        raise Unsupported
    fn = call.get("function", _MISSING)
    if fn is _MISSING:
        fn = call
    elif type(fn) is not dict:
        raise Unsupported
    target = fn.get("name", _MISSING) if "name" in fn else call.get("name", _MISSING)
    call_id = call["id"] if "id" in call else fn.get("id")
    return fn, target, call_id


# The conversation ------------------------------------------------------------------------------

def render(messages: list, tools: Any, template_kwargs: dict, special_token_names=()) -> tuple[str, list] | None:
    """``(text, generation spans)`` as the template renders them with ``add_generation_prompt=False``,
    or None when the row is not the plain case (the template then renders it)."""
    try:
        return _render(messages, tools, template_kwargs, special_token_names)
    except Exception:  # Unsupported, or anything the template may treat its own way
        return None


def _render(messages: list, tools: Any, kwargs: dict, special_token_names) -> tuple[str, list]:
    for key in kwargs:
        if key not in _TEMPLATE_ARGS and key not in special_token_names:
            raise Unsupported
    if type(messages) is not list or not messages:
        raise Unsupported
    for message in messages:
        if type(message) is not dict:
            raise Unsupported
    builtin_names = kwargs.get("builtin_tools") or []
    system_tools, developer_tools = _sort_tools(tools or [], builtin_names)

    out: list[str] = ["<|start|>system<|message|>", str(kwargs["model_identity"]) if "model_identity" in kwargs
                      else _DEFAULT_IDENTITY]
    effort = kwargs.get("reasoning_effort")
    if effort is None:
        effort = 512
    elif isinstance(effort, str):
        if effort not in _EFFORT_LABELS:
            raise Unsupported  # the template raises
        effort = _EFFORT_LABELS[effort]
    out.append("\n\nReasoning effort: " + str(effort))
    if system_tools:
        out.append("\n\n" + _declare_tools(system_tools))
    out.append("\n\n# Valid channels: analysis, final. Channel must be included for every message.<|end|>")

    size, texts = 0, []
    for message in messages:
        if message.get("role") not in ("system", "developer"):
            break
        size += 1
        content = message.get("content")
        if content:
            texts.append(_text(content))
    instructions = "\n\n".join(texts)
    if instructions or developer_tools:
        out.append("<|start|>developer<|message|>")
        if instructions:
            out.append("# Instructions\n\n" + instructions)
            if developer_tools:
                out.append("\n\n")
        if developer_tools:
            out.append(_declare_tools(developer_tools))
        out.append("<|end|>")

    spans: list[tuple[int, int]] = []
    position = sum(map(len, out))
    seen: list[tuple[Any, Any]] = []
    for message in messages[size:]:
        role = message.get("role")
        if role == "assistant":
            content = message.get("content")
            if content and (_ANALYSIS_TAG in content or _FINAL_TAG in content):
                raise Unsupported  # the template raises
            reasoning = message.get("thinking") or message.get("reasoning_content") or message.get("reasoning")
            if reasoning and (_ANALYSIS_TAG in reasoning or _FINAL_TAG in reasoning):
                raise Unsupported  # the template raises
            head = "<|start|>assistant"
            parts = ["<|channel|>analysis<|message|>" + _text(reasoning or "") + "<|end|>"]
            calls = message.get("tool_calls")
            if calls:
                if type(calls) is not list:
                    raise Unsupported
                for index, call in enumerate(calls):
                    fn, target, call_id = _call_target(call)
                    if call_id and target:
                        seen.append((call_id, target))
                    parts.append("<|start|>assistant to=" + _text(target)
                                 + "<|channel|>analysis <|constrain|>xml<|message|>" + _xml_arguments(call, fn)
                                 + ("<|call|>" if index == len(calls) - 1 else "<|end|>"))
            else:
                parts.append("<|start|>assistant<|channel|>final<|message|>" + _text(content or "") + "<|return|>")
            body = "".join(parts)
            start = position + len(head)
            spans.append((start, start + len(body)))
            out.append(head)
            out.append(body)
            position = start + len(body)
            continue
        if role == "tool":
            name = message.get("name")
            if not name:
                name = None
                if "tool_call_id" in message:
                    wanted = message["tool_call_id"]
                    for seen_id, seen_name in seen:
                        if seen_id == wanted:
                            name = seen_name
                if name is None:
                    raise Unsupported  # the template raises
            text = ("<|start|>" + _text(name) + " to=assistant<|channel|>analysis<|message|>"
                    + _text(message.get("content") or "") + "<|end|>")
        elif role == "user":
            text = "<|start|>user<|message|>" + _text(message.get("content") or "") + "<|end|>"
        else:
            continue
        out.append(text)
        position += len(text)
    return "".join(out), spans
