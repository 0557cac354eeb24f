"""Property tests: whatever assistant turn the chat template renders, the response template reads back.

Turns are generated (reasoning + answer, or reasoning + one or several calls with typed arguments
that match generated tool schemas), rendered with ``apply_chat_template``, cut after the prompt
prefix and parsed with ``tokenizer.parse_response(generated, prefix=prompt, tools=tools)``.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_sft.harmony import markers
from beam_sft.harmony.response import canonical_assistant_message, parse_assistant_turn

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text that is hard for a parser: marker halves, parameter tags, headers, whitespace, unicode.
FRAGMENTS = [
    "<",
    ">",
    "<|",
    "|>",
    "</rfl:parameter",
    '<rfl:parameter name="x">',
    "</rfl:parameter >",
    "to=f",
    "analysis",
    "final",
    " ",
    "\n",
    "\n\n",
    "\t",
    '"',
    "{",
    "}",
    "é",
    "你好",
    "✓",
    "null",
    "3",
]


def _clean(text: str) -> bool:
    return markers.find_marker(text) is None and markers.PARAM_CLOSE not in text


texts = (
    st.lists(
        st.one_of(st.text(st.characters(exclude_categories=("Cs",)), max_size=6), st.sampled_from(FRAGMENTS)),
        max_size=6,
    )
    .map("".join)
    .filter(_clean)
)
names = st.from_regex(r"[a-z_][a-z0-9_]{0,7}", fullmatch=True)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)

# JSON Schema type -> values of that type.
VALUES = {
    "string": texts,
    "integer": st.integers(),
    "number": st.floats(allow_nan=False, allow_infinity=False),
    "boolean": st.booleans(),
    "null": st.none(),
    "object": st.dictionaries(texts, json_values, max_size=3),
    "array": st.lists(json_values, max_size=3),
}
TYPES = [*VALUES, ("integer", "null")]


def _value_for(schema_type):
    if isinstance(schema_type, tuple):
        return st.one_of(*(VALUES[t] for t in schema_type))
    return VALUES[schema_type]


@st.composite
def tools_and_turn(draw):
    """(tools, history, assistant message) with every call matching its tool's schema."""
    tool_names = draw(st.lists(names, min_size=1, max_size=3, unique=True))
    tools = []
    for name in tool_names:
        params = draw(st.dictionaries(names, st.sampled_from(TYPES), max_size=4))
        properties = {k: {"type": list(t) if isinstance(t, tuple) else t} for k, t in params.items()}
        tools.append(
            {
                "type": "function",
                "function": {"name": name, "parameters": {"type": "object", "properties": properties}},
            }
        )
    message = {"role": "assistant", "reasoning_content": draw(texts)}
    if draw(st.booleans()):
        message["content"] = draw(texts)
    else:
        calls = []
        for i in range(draw(st.integers(1, 3))):
            tool = draw(st.sampled_from(tools))["function"]
            properties = tool["parameters"]["properties"]
            chosen = draw(st.lists(st.sampled_from(sorted(properties)), unique=True)) if properties else []
            arguments = {k: draw(_value_for(_as_key(properties[k]["type"]))) for k in chosen}
            calls.append(
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": tool["name"], "arguments": arguments},
                }
            )
        message["tool_calls"] = calls
    history = [{"role": "user", "content": draw(texts)}]
    if draw(st.booleans()):  # an earlier tool loop, so the prompt holds older assistant headers
        history = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "first"},
            {
                "role": "assistant",
                "reasoning_content": "call",
                "tool_calls": [
                    {"id": "old", "type": "function", "function": {"name": tool_names[0], "arguments": {}}}
                ],
            },
            {"role": "tool", "tool_call_id": "old", "content": "result"},
        ]
    return tools, history, message


def _as_key(schema_type):
    return tuple(schema_type) if isinstance(schema_type, list) else schema_type


def _same_value(got, want, schema_type) -> bool:
    if schema_type == "number":
        # "1e+16" reads back as the int 10**16: the same JSON number, and transformers' documented cast.
        return isinstance(got, (int, float)) and not isinstance(got, bool) and got == want
    # json.dumps compares types strictly (True != 1) and keeps key order.
    return json.dumps(got) == json.dumps(want)


def _render_split(tokenizer, tools, history, message):
    prompt = tokenizer.apply_chat_template(history, tools=tools, tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template([*history, message], tools=tools, tokenize=False)
    assert full.startswith(prompt)
    return prompt, full[len(prompt) :]


@SETTINGS
@given(tools_and_turn())
def test_rendered_turns_parse_back(tokenizer, case):
    tools, history, message = case
    prompt, generated = _render_split(tokenizer, tools, history, message)
    parsed = tokenizer.parse_response(generated, prefix=prompt, tools=tools)

    assert parsed["role"] == "assistant"
    assert parsed.get("thinking", "") == message["reasoning_content"]
    if "content" in message:
        assert parsed.get("content", "") == message["content"]
        assert "tool_calls" not in parsed
        return
    assert "content" not in parsed
    schemas = {t["function"]["name"]: t["function"]["parameters"]["properties"] for t in tools}
    assert len(parsed["tool_calls"]) == len(message["tool_calls"])
    for got, want in zip(parsed["tool_calls"], message["tool_calls"], strict=True):
        assert got["type"] == "function" and "id" not in got
        assert got["function"]["name"] == want["function"]["name"]
        got_args, want_args = got["function"]["arguments"], want["function"]["arguments"]
        assert list(got_args) == list(want_args)
        properties = schemas[want["function"]["name"]]
        for key, value in want_args.items():
            assert _same_value(got_args[key], value, properties[key]["type"]), (key, got_args[key], value)


@SETTINGS
@given(tools_and_turn())
def test_strict_reader_and_untyped_parse_agree_with_the_source(tokenizer, case):
    """Without tools every value is the text the template wrote; the strict reader says the same."""
    tools, history, message = case
    prompt, generated = _render_split(tokenizer, tools, history, message)
    expected = canonical_assistant_message(message, arguments_as_text=True)
    assert parse_assistant_turn(generated) == expected
    untyped = tokenizer.parse_response(generated, prefix=prompt)
    assert untyped.get("thinking", "") == expected["thinking"]
    assert untyped.get("tool_calls") == expected.get("tool_calls")
    assert untyped.get("content", "") == expected.get("content", "")
    # Token ids in, same message out (the prompt/turn boundary is a marker, so ids split cleanly).
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
    ids = tokenizer.encode(prompt + generated, add_special_tokens=False)
    assert ids[: len(prompt_ids)] == prompt_ids
    assert tokenizer.parse_response(ids[len(prompt_ids) :], prefix=prompt_ids) == untyped


@SETTINGS
@given(tools_and_turn(), st.data())
def test_streaming_in_any_chunks_gives_the_same_message(tokenizer, case, data):
    tools, history, message = case
    prompt, generated = _render_split(tokenizer, tools, history, message)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(generated)), max_size=12)))
    chunks = [generated[a:b] for a, b in zip([0, *cuts], [*cuts, len(generated)], strict=True)]

    parser = tokenizer.get_response_parser(prefix=prompt, tools=tools)
    events = [event for chunk in chunks for event in parser.feed(chunk)]
    streamed, final_events = parser.finalize()
    events += final_events

    assert streamed == tokenizer.parse_response(generated, prefix=prompt, tools=tools)
    for field in ("thinking", "content"):
        text = "".join(e["text"] for e in events if e["type"] == "region_chunk" and e["field"] == field)
        assert text == streamed.get(field, "")
    closes = [e["value"] for e in events if e["type"] == "region_close" and e["field"] == "tool_calls"]
    assert closes == streamed.get("tool_calls", [])
    # Every region that opened was closed, in order.
    opened = [e["field"] for e in events if e["type"] == "region_open"]
    assert opened == [e["field"] for e in events if e["type"] == "region_close"]
