"""Is a tokenizer fit for Beam Harmony training? Every way it is not, named by rule.

Each problem reads ``[rule] ...`` and names the marker where one is involved, so a user can fix
them all in one go. ``check_tokenizer`` lists problems (the tokenizer must not be used for
training); ``tokenizer_warnings`` lists what only matters after training. A missing or wrong
response template is a warning, not a problem: training never reads it (it is only used to parse
generated text), and a base checkpoint may legitimately ship without one.

Rules:

* ``marker-single-token``: each of the 7 markers encodes alone (no special tokens added) to exactly
  one token, which decodes back to the marker.
* ``marker-in-context``: that token also comes out when the marker sits between letters, i.e. it is
  an added token the text is split on, not a BPE piece that merges with its neighbours.
* ``marker-not-special``: only ``<|return|>`` may be special; decoding with
  ``skip_special_tokens=True`` must keep the other markers, or parsers lose message boundaries.
* ``return-special``: ``<|return|>`` is special (it is the end of sequence).
* ``eos``: the eos token is ``<|return|>``.
* ``fast-tokenizer``: a fast tokenizer (assistant masks and offsets need one).
* ``chat-template``: a chat template is set and renders a probe conversation.
* ``generation-blocks``: the template has ``{% generation %}`` blocks, and on the probe
  ``return_assistant_tokens_mask`` marks exactly the assistant turns, each from its first
  ``<|channel|>`` through ``<|call|>``/``<|return|>``, reading back as the probe's message.
* ``text-roundtrip``: decoding the probe's ids gives back the rendered text.
* ``pad-token``: a pad token is set and is not a Harmony marker (a pad equal to ``<|return|>``
  gets masked out of the loss by collators that drop pad ids, so the model never learns to stop).
* ``response-template`` (warning): a response template is set and reads the probe's turns back.
"""

from __future__ import annotations

import re
from typing import Any

from beam_sft.errors import TokenizerError
from beam_sft.harmony import markers
from beam_sft.harmony.response import canonical_assistant_message, parse_assistant_turn

_GENERATION_TAG = re.compile(r"\{%-?\s*generation\s*-?%\}")

_PROBE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
]
_PROBE: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Paris for 2 days?"},
    {
        "role": "assistant",
        "reasoning_content": "I should call the tool.",
        "tool_calls": [
            {
                "id": "c0",
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c0", "name": "get_weather", "content": "18 C"},
    {"role": "assistant", "reasoning_content": "Report it.", "content": "18 C and sunny."},
]


def _marker_problems(tokenizer) -> list[str]:
    problems = []
    special = set(tokenizer.all_special_tokens)
    added = tokenizer.added_tokens_decoder
    for marker in markers.ALL_MARKERS:
        ids = tokenizer.encode(marker, add_special_tokens=False)
        if len(ids) != 1 or tokenizer.decode(ids) != marker:
            pieces = tokenizer.convert_ids_to_tokens(ids)
            problems.append(
                f"[marker-single-token] {marker} must encode to exactly one token that decodes back to it, "
                f"got {len(ids)}: {pieces}"
            )
            continue
        in_context = tokenizer.encode(f"a{marker}a", add_special_tokens=False)
        if ids[0] not in in_context:
            problems.append(
                f"[marker-in-context] {marker} is not split out of surrounding text ('a{marker}a' encodes "
                f"without its id {ids[0]}): add it as an added token"
            )
        is_special = marker in special or (ids[0] in added and added[ids[0]].special)
        if marker == markers.RETURN and not is_special:
            problems.append(f"[return-special] {marker} must be a special token (it is the end of sequence)")
        elif marker != markers.RETURN and is_special:
            problems.append(
                f"[marker-not-special] {marker} must not be a special token: decoding with "
                "skip_special_tokens=True would drop it and lose message boundaries"
            )
    if tokenizer.eos_token != markers.EOS:
        problems.append(f"[eos] the eos token must be {markers.EOS}, got {tokenizer.eos_token!r}")
    if tokenizer.pad_token is None:
        problems.append("[pad-token] no pad token is set (batches cannot be padded)")
    elif tokenizer.pad_token in markers.ALL_MARKERS:
        problems.append(
            f"[pad-token] the pad token must not be a Harmony marker, got {tokenizer.pad_token}: collators "
            "that mask pad ids would drop that marker from the loss"
        )
    return problems


def _mask_spans(mask: list[int]) -> list[tuple[int, int]]:
    spans, start = [], None
    for i, bit in enumerate([*mask, 0]):
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            spans.append((start, i))
            start = None
    return spans


def _template_problems(tokenizer) -> list[str]:
    template = tokenizer.chat_template
    if not template:
        return ["[chat-template] the tokenizer has no chat template"]
    if not isinstance(template, str):
        return ["[chat-template] the chat template must be a single template, not a named set"]
    problems = []
    if not _GENERATION_TAG.search(template):
        problems.append(
            "[generation-blocks] the chat template has no {% generation %} block, so "
            "return_assistant_tokens_mask cannot mark the assistant turns"
        )
    try:
        text = tokenizer.apply_chat_template(_PROBE, tools=_PROBE_TOOLS, tokenize=False)
    except Exception as exc:  # any template failure is the finding, whatever its type
        return [
            *problems,
            f"[chat-template] rendering the probe conversation raised {type(exc).__name__}: {exc}",
        ]
    ids = tokenizer.encode(text, add_special_tokens=False)
    if tokenizer.decode(ids) != text:
        problems.append("[text-roundtrip] decoding the probe's ids does not give back the rendered text")
    if problems or not tokenizer.is_fast:
        return problems  # the mask probe below needs generation blocks and a fast tokenizer

    try:
        encoded = tokenizer.apply_chat_template(
            _PROBE, tools=_PROBE_TOOLS, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
        )
    except Exception as exc:  # e.g. a tokenizer without offsets: the finding is that masks fail
        return [f"[generation-blocks] return_assistant_tokens_mask raised {type(exc).__name__}: {exc}"]
    spans = _mask_spans(list(encoded["assistant_masks"]))
    expected = [
        canonical_assistant_message(m, arguments_as_text=True) for m in _PROBE if m["role"] == "assistant"
    ]
    if len(spans) != len(expected):
        return [
            f"[generation-blocks] the assistant mask of the probe has {len(spans)} span(s), expected one per "
            f"assistant turn ({len(expected)})"
        ]
    for (start, end), want in zip(spans, expected, strict=True):
        span_text = tokenizer.decode(encoded["input_ids"][start:end])
        try:
            got = parse_assistant_turn(span_text, check_response_template=False)
        except Exception as exc:
            got = f"unreadable ({exc})"
        if got != want:
            problems.append(
                f"[generation-blocks] an assistant mask span must run from {markers.CHANNEL} through "
                f"{markers.CALL}/{markers.RETURN} and read back as its message; span {span_text!r} reads {got!r}"
            )
    return problems


def check_tokenizer(tokenizer) -> list[str]:
    """Every reason ``tokenizer`` is unfit for Beam Harmony training (empty when fit)."""
    problems = []
    if not getattr(tokenizer, "is_fast", False):
        problems.append(
            "[fast-tokenizer] the tokenizer must be a fast tokenizer (assistant masks need offsets)"
        )
    problems += _marker_problems(tokenizer)
    problems += _template_problems(tokenizer)
    return problems


def tokenizer_warnings(tokenizer) -> list[str]:
    """What is wrong only for using the trained model: the response template (see module doc)."""
    template = getattr(tokenizer, "response_template", None)
    if template is None:
        return [
            "[response-template] no response template: tokenizer.parse_response cannot read generated text"
        ]
    warnings = []
    for i, message in enumerate(_PROBE):
        if message["role"] != "assistant":
            continue
        try:
            prompt = tokenizer.apply_chat_template(
                _PROBE[:i], tools=_PROBE_TOOLS, tokenize=False, add_generation_prompt=True
            )
            full = tokenizer.apply_chat_template(_PROBE[: i + 1], tools=_PROBE_TOOLS, tokenize=False)
            got = tokenizer.parse_response(full[len(prompt) :], prefix=prompt, tools=_PROBE_TOOLS)
        except Exception as exc:
            warnings.append(
                f"[response-template] parsing the probe's messages[{i}] raised {type(exc).__name__}: {exc}"
            )
            continue
        want = canonical_assistant_message(message)  # typed arguments, as parse_response gives with tools
        if got != want:
            warnings.append(
                f"[response-template] the probe's messages[{i}] reads back as {got!r}, expected {want!r}"
            )
    return warnings


def require_fit_tokenizer(tokenizer) -> list[str]:
    """Raise ``TokenizerError`` listing every problem; return the warnings when there are none."""
    problems = check_tokenizer(tokenizer)
    if problems:
        raise TokenizerError(problems)
    return tokenizer_warnings(tokenizer)
