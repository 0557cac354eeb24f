"""Beam Harmony response template: generated text -> assistant message.

``response_template()`` is the declarative spec that transformers' ``parse_response`` and
``get_response_parser`` run (``transformers/utils/chat_parsing``); the fixture stores it as
``tokenizer.response_template`` so it lands in ``tokenizer_config.json``.

For the pipeline:

* ``parse_assistant_turn(text, tools=None)``: the strict reader of one rendered assistant turn (the
  text of a trained span, from its first ``<|channel|>`` through ``<|call|>``/``<|return|>``). It
  checks the exact shape the chat template writes, then checks that the shipped response template
  reads the same message, so every trained turn is known to parse back with ``parse_response``.
* ``canonical_assistant_message(message)``: the same normal form computed from a source message, so
  a verifier compares ``parse_assistant_turn(span) == canonical_assistant_message(source, ...)``.
* ``split_harmony_messages(text)``: raw Harmony messages of a transcript (for converters).

How the spec is shaped, and why
-------------------------------
transformers' parser keeps one "current region" and scans for the delimiters that can end it
(or, outside any region, for the delimiters that open one). Text outside every region goes to a
"null sink" and is dropped, unless one field has no ``open`` (the *implicit* field).

* No implicit field. Between Beam messages the model writes headers (``<|start|>assistant``,
  ``<|start|>assistant to=NAME``) that are not part of any field; with an implicit ``content``
  field those headers would leak into the answer. So every field has an explicit ``open`` and
  header text falls into the sink. The price: output with no channel at all parses to
  ``{'role': 'assistant'}``; Beam writes a channel on every message, so that is a broken output.
* Opens start at ``<|channel|>`` (or ``to=NAME``), not at ``<|start|>assistant``. The prompt
  already ends with the generation header ``<|start|>assistant`` (it is also the ``start_anchor``
  the parser truncates the prefix at), so the first message of the output starts at
  ``<|channel|>``, while later ones repeat the header. Starting the opens after the header
  handles both, and a model that writes an extra ``<|start|>assistant`` at the very beginning.
* ``thinking`` opens on ``<|channel|>analysis<|message|>``: the tool-call header has
  ``analysis <|constrain|>xml`` (a space, then the constraint), so it can never match a tool call.
  It uses ``repeats`` + ``join`` so that a (malformed) second analysis message is appended
  instead of silently replacing the first.
* ``tool_calls`` opens on ``to=NAME<|channel|>analysis <|constrain|>xml<|message|>`` with the
  name captured; every call is its own region (``repeats``) so parallel calls come back one entry
  each, in order. The transform writes ``{'type': 'function', 'function': {...}}`` with no ``id``:
  the format has no call ids (results are matched by position).
* Arguments: the chat template writes each as
  ``<rfl:parameter name="K">\\nVALUE\\n</rfl:parameter>``, joined by ``\\n``; strings raw,
  everything else as JSON. ``xml-inline`` with a ``text`` value parser and ``strip: False`` keeps
  the value exactly: the tag pattern consumes exactly one newline after the open tag and one before
  the close tag (both optional, for a model that omits them), and a non-greedy value ends at the
  first ``</rfl:parameter>``, which the template guarantees no value contains. Values therefore
  stay strings; with ``tools=`` transformers casts them to the schema types (``_coerce``: integer,
  number, boolean, null, object, array). ``strip`` must be off everywhere: transformers' ``text``
  parser strips by default, which would eat leading/trailing whitespace of reasoning, answers
  and string arguments.
* Closes are literal lists of every marker that can end a Beam message (``<|end|>``,
  ``<|return|>``, ``<|call|>``) plus ``<|start|>``, so a message the model forgot to end is still
  closed by the next header. Literals (none a prefix of another) let the streaming parser emit
  text up to a possible marker at once, instead of holding it back as a regex close would.
  ``<|return|>`` is the only special token, so text decoded with ``skip_special_tokens=True``
  lacks it: the answer region is then closed by ``finalize()`` at the end of the input.

What the format itself leaves ambiguous (no template can recover it):

* transformers drops empty fields from the message, so an empty analysis or answer gives no
  ``thinking``/``content`` key. ``parse_assistant_turn`` puts them back as ``""``.
* Strings are written raw and other values as JSON, so only the tool schema tells ``"3"`` from
  ``3``; without ``tools=`` every value is the written text. A union such as
  ``["string", "null"]`` reads the string ``"null"`` as ``None``, and a whole float such as
  ``1e+16`` comes back as an int (transformers' documented casts).
* A tool name must not contain whitespace or ``<``, and a parameter name must not contain ``"``:
  the template writes both raw, so such names cannot be read back (validation should reject them).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from beam_sft.errors import Rejection
from beam_sft.harmony import markers

# Everything that can end a message, plus the next header's <|start|> (see the module docstring).
_MESSAGE_END = [markers.END, markers.RETURN, markers.CALL, markers.START]

# One rfl:parameter element as the response template reads it: one optional newline is dropped on
# each side of the value (the template always writes both).
PARAMETER_PATTERN = r'<rfl:parameter name="(?P<key>[^"]*)">\n?(?P<value>.*?)\n?</rfl:parameter>'
# A tool name is what the template writes between `to=` and `<|channel|>`.
TOOL_NAME_PATTERN = r"[^\s<]+"

_ANALYSIS_HEADER = markers.CHANNEL + "analysis"
_FINAL_HEADER = markers.CHANNEL + "final"
_CALL_HEADER_TAIL = markers.CHANNEL + "analysis " + markers.CONSTRAIN + "xml"
_VERBATIM = {"strip": False}


def response_template() -> dict:
    """The Beam Harmony response template, in transformers' ``response_template`` format (v1).

    >>> from transformers.utils.chat_parsing import parse_response
    >>> parse_response(
    ...     "<|channel|>analysis<|message|>Greeting.<|end|>"
    ...     "<|start|>assistant<|channel|>final<|message|>Hi!<|return|>",
    ...     response_template(), prefix="")
    {'role': 'assistant', 'thinking': 'Greeting.', 'content': 'Hi!'}
    """
    return {
        "version": 1,
        "defaults": {"role": "assistant"},
        "start_anchor": markers.START + "assistant",
        "fields": {
            "thinking": {
                "open": _ANALYSIS_HEADER + markers.MESSAGE,
                "close": list(_MESSAGE_END),
                "content": "text",
                "content_args": dict(_VERBATIM),
                "repeats": True,
                "join": "\n\n",
            },
            "content": {
                "open": _FINAL_HEADER + markers.MESSAGE,
                "close": list(_MESSAGE_END),
                "content": "text",
                "content_args": dict(_VERBATIM),
            },
            "tool_calls": {
                # Written out (not re.escape'd) so it reads plainly in tokenizer_config.json.
                "open_pattern": (
                    r"to=(?P<name>"
                    + TOOL_NAME_PATTERN
                    + r")<\|channel\|>analysis <\|constrain\|>xml<\|message\|>"
                ),
                "close": list(_MESSAGE_END),
                "repeats": True,
                "content": "xml-inline",
                "content_args": {
                    "tag_pattern": PARAMETER_PATTERN,
                    "value_parser": {"name": "text", "args": dict(_VERBATIM)},
                },
                "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
            },
        },
    }


# --- raw Harmony messages --------------------------------------------------------------------------

# Text with no Harmony marker in it (unrolled loop: fast on long bodies, no backtracking blow-up).
_NO_MARKER = r"[^<]*(?:<(?!\|(?:start|end|message|channel|constrain|call|return)\|>)[^<]*)*"
_MESSAGE_RE = re.compile(
    re.escape(markers.START)
    + r"(?P<header>(?P<author>[^<]*)"
    + r"(?:"
    + re.escape(markers.CHANNEL)
    + r"(?P<channel>[^<]*))?"
    + r"(?:"
    + re.escape(markers.CONSTRAIN)
    + r"(?P<constrain>[^<]*))?)"
    + re.escape(markers.MESSAGE)
    + r"(?P<body>"
    + _NO_MARKER
    + r")"
    + r"(?P<end>"
    + "|".join(re.escape(m) for m in (markers.END, markers.CALL, markers.RETURN))
    + r")",
    re.DOTALL,
)


@dataclass(frozen=True)
class HarmonyMessage:
    """One ``<|start|>HEADER<|message|>BODY(<|end|>|<|call|>|<|return|>)`` message.

    ``header`` is the raw text between ``<|start|>`` and ``<|message|>`` (markers included);
    ``author``/``recipient`` split its first part on `` to=``; ``channel``/``constrain`` are stripped.
    """

    header: str
    author: str
    recipient: str | None
    channel: str | None
    constrain: str | None
    body: str
    end: str


def split_harmony_messages(text: str) -> list[HarmonyMessage]:
    """Split a rendered Harmony transcript into its messages; any text between or around them fails.

    >>> [(m.author, m.recipient, m.channel, m.body, m.end) for m in split_harmony_messages(
    ...     "<|start|>user<|message|>Hi<|end|>"
    ...     "<|start|>assistant to=f<|channel|>analysis <|constrain|>xml<|message|><|call|>")]
    [('user', None, None, 'Hi', '<|end|>'), ('assistant', 'f', 'analysis', '', '<|call|>')]
    """
    return _split(text, shift=0)


def _split(text: str, *, shift: int) -> list[HarmonyMessage]:
    # `shift` corrects error offsets when the caller prepended a header to its text.
    out: list[HarmonyMessage] = []
    pos = 0
    size = len(text)
    match, new = _MESSAGE_RE.match, object.__new__
    while pos < size:
        m = match(text, pos)
        if m is None:
            raise Rejection(
                "harmony_malformed",
                f"no well-formed Harmony message at offset {max(pos - shift, 0)}: {text[pos : pos + 60]!r}",
            )
        header, author, channel, constrain, body, end = m.group("header", "author", "channel", "constrain", "body", "end")
        author, _, recipient = author.partition(" to=")
        message = new(HarmonyMessage)  # every field set below: the frozen dataclass's __init__, without its setattr calls
        message.__dict__.update(
            header=header,
            author=author.strip(),
            recipient=recipient.strip() or None,
            channel=channel.strip() if channel is not None else None,
            constrain=constrain.strip() if constrain is not None else None,
            body=body,
            end=end,
        )
        out.append(message)
        pos = m.end()
    return out


# --- strict reading of one rendered assistant turn -------------------------------------------------

_PARAM_STRICT_RE = re.compile(
    r'<rfl:parameter name="(?P<key>[^"]*)">\n(?P<value>(?:(?!'
    + re.escape(markers.PARAM_CLOSE)
    + r").)*)\n"
    + re.escape(markers.PARAM_CLOSE),
    re.DOTALL,
)
_CALL_HEADER_RE = re.compile(
    r"assistant to=(?P<name>" + TOOL_NAME_PATTERN + r")" + re.escape(_CALL_HEADER_TAIL)
)


def _strict_arguments(body: str, where: str) -> dict[str, str]:
    """Arguments of one call body, exactly as the template writes them (parameters joined by "\\n")."""
    args: dict[str, str] = {}
    pos = 0
    while pos < len(body):
        if args:
            if body[pos] != "\n":
                raise Rejection(
                    "harmony_malformed_arguments", f"{where}: expected a newline between parameters at {pos}"
                )
            pos += 1
        m = _PARAM_STRICT_RE.match(body, pos)
        if m is None:
            raise Rejection(
                "harmony_malformed_arguments",
                f"{where}: no rfl:parameter element at {pos}: {body[pos : pos + 60]!r}",
            )
        if m["key"] in args:
            raise Rejection("harmony_malformed_arguments", f"{where}: parameter {m['key']!r} given twice")
        args[m["key"]] = m["value"]
        pos = m.end()
    return args


def _strict_turn(text: str) -> dict:
    if not text.startswith(markers.CHANNEL):
        raise Rejection(
            "harmony_malformed_turn", f"an assistant turn starts at {markers.CHANNEL}, got {text[:40]!r}"
        )
    header = markers.START + "assistant"
    messages = _split(header + text, shift=len(header))
    first, rest = messages[0], messages[1:]
    if first.header != "assistant" + _ANALYSIS_HEADER or first.end != markers.END:
        raise Rejection(
            "harmony_malformed_turn", f"the turn must open with an analysis message ending {markers.END}"
        )
    if not rest:
        raise Rejection(
            "harmony_malformed_turn", "the analysis message is followed by neither an answer nor a call"
        )
    message: dict[str, Any] = {"role": "assistant", "thinking": first.body}
    if rest[0].header == "assistant" + _FINAL_HEADER:
        if len(rest) != 1 or rest[0].end != markers.RETURN:
            raise Rejection(
                "harmony_malformed_turn",
                f"the final message must be the last one and end with {markers.RETURN}",
            )
        message["content"] = rest[0].body
        return message
    calls = []
    for i, msg in enumerate(rest):
        call_header = _CALL_HEADER_RE.fullmatch(msg.header)
        if call_header is None:
            raise Rejection(
                "harmony_malformed_turn",
                f"message {i + 1} is neither a final answer nor a tool call: {msg.header!r}",
            )
        expected_end = markers.CALL if i == len(rest) - 1 else markers.END
        if msg.end != expected_end:
            raise Rejection(
                "harmony_malformed_turn", f"tool call {i} must end with {expected_end}, got {msg.end}"
            )
        name = call_header["name"]
        arguments = _strict_arguments(msg.body, f"tool call {i} ({name})")
        calls.append({"type": "function", "function": {"name": name, "arguments": arguments}})
    message["tool_calls"] = calls
    return message


def _normal_form(message: dict) -> dict:
    """transformers drops empty fields; the normal form always has ``thinking`` and either
    ``tool_calls`` or ``content`` (what the chat template renders)."""
    out: dict[str, Any] = {"role": "assistant", "thinking": message.get("thinking", "")}
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    else:
        out["content"] = message.get("content", "")
    return out


@lru_cache(maxsize=1)
def _compiled_template():
    from transformers.utils.chat_parsing.response_templates import load_response_template

    return load_response_template(response_template())


def _template_parse(text: str, tools: list | None) -> dict:
    from transformers.utils.chat_parsing import parse_response

    return _normal_form(parse_response(text, _compiled_template(), prefix="", tools=tools))


def parse_assistant_turn(
    text: str, tools: list | None = None, *, check_response_template: bool = True
) -> dict:
    """The message of one rendered assistant turn, read strictly (raises ``Rejection`` otherwise).

    ``text`` starts at the turn's first ``<|channel|>`` (where the training mask starts) and ends
    with its ``<|return|>`` or ``<|call|>``. The result is the normal form of
    ``canonical_assistant_message``: ``role``, ``thinking`` (possibly empty) and either ``content``
    or ``tool_calls`` (no ids). Argument values are the raw strings the template wrote, or, with
    ``tools``, cast to the schema types the way ``tokenizer.parse_response(..., tools=tools)`` does.
    With ``check_response_template`` the shipped response template must read the same message.

    >>> parse_assistant_turn(
    ...     "<|channel|>analysis<|message|>Check it.<|end|>"
    ...     "<|start|>assistant to=f<|channel|>analysis <|constrain|>xml<|message|>"
    ...     '<rfl:parameter name="n">\\n3\\n</rfl:parameter><|call|>')
    {'role': 'assistant', 'thinking': 'Check it.', 'tool_calls': [{'type': 'function', 'function': {'name': 'f', 'arguments': {'n': '3'}}}]}
    """
    strict = _strict_turn(text)
    if check_response_template:
        read = _template_parse(text, None)
        if read != strict:
            raise Rejection(
                "harmony_response_template_mismatch",
                f"the response template reads {read!r}, the turn is {strict!r}",
            )
    return _template_parse(text, tools) if tools else strict


# --- the same normal form from a source message -----------------------------------------------------


def render_argument_value(value: Any) -> str:
    """An argument value as the chat template writes it: strings raw, everything else JSON.

    >>> render_argument_value("Paris"), render_argument_value({"a": [1, 2.5, None, "é"]})
    ('Paris', '{"a": [1, 2.5, null, "é"]}')
    """
    # The template's tojson is json.dumps(ensure_ascii=False) with the default ", " / ": " separators,
    # and its recursion keeps key order, which json.dumps also does.
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def canonical_assistant_message(message: dict, *, arguments_as_text: bool = False) -> dict:
    """The normal form of a source assistant message, as the chat template renders it.

    Reasoning is read like the template does (``thinking``, else ``reasoning_content``, else
    ``reasoning``); tool calls lose their ids; ``content`` is dropped when there are tool calls
    (the template does not render it). ``arguments_as_text`` writes values the way the template
    does, to compare with ``parse_assistant_turn(span)`` without tools.

    >>> canonical_assistant_message({"role": "assistant", "reasoning_content": "r", "tool_calls": [
    ...     {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"n": 3}}}]},
    ...     arguments_as_text=True)
    {'role': 'assistant', 'thinking': 'r', 'tool_calls': [{'type': 'function', 'function': {'name': 'f', 'arguments': {'n': '3'}}}]}
    """
    thinking = message.get("thinking") or message.get("reasoning_content") or message.get("reasoning") or ""
    out: dict[str, Any] = {"role": "assistant", "thinking": thinking}
    if message.get("tool_calls"):
        calls = []
        for call in message["tool_calls"]:
            fn = call.get("function", call)
            args = fn.get("arguments", call.get("arguments")) or {}
            if arguments_as_text:
                args = {k: render_argument_value(v) for k, v in args.items()}
            calls.append(
                {
                    "type": "function",
                    "function": {"name": fn.get("name", call.get("name")), "arguments": dict(args)},
                }
            )
        out["tool_calls"] = calls
    else:
        out["content"] = message.get("content") or ""
    return out
