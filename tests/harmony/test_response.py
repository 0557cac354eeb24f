"""The response template: the documented parse/stream examples, edge cases and the strict turn reader."""

from __future__ import annotations

import json

import pytest

from beam_sft.errors import Rejection
from beam_sft.harmony.response import (
    canonical_assistant_message,
    parse_assistant_turn,
    render_argument_value,
    response_template,
    split_harmony_messages,
)
from tests.doc_examples import GET_WEATHER, HELLO, TOOL_LOOP, render

ANSWER = (
    "<|channel|>analysis<|message|>The user is greeting me.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Hi! How can I help?<|return|>"
)
ONE_CALL = (
    "<|channel|>analysis<|message|>I'll call the weather tool.<|end|>"
    "<|start|>assistant to=get_weather<|channel|>analysis <|constrain|>xml<|message|>"
    '<rfl:parameter name="city">\nParis\n</rfl:parameter>\n'
    '<rfl:parameter name="days">\n3\n</rfl:parameter><|call|>'
)
TWO_CALLS = (
    "<|channel|>analysis<|message|>I need both cities.<|end|>"
    "<|start|>assistant to=get_weather<|channel|>analysis <|constrain|>xml<|message|>"
    '<rfl:parameter name="city">\nLondon\n</rfl:parameter><|end|>'
    "<|start|>assistant to=get_weather<|channel|>analysis <|constrain|>xml<|message|>"
    '<rfl:parameter name="city">\nParis\n</rfl:parameter><|call|>'
)


# --- the documented examples ------------------------------------------------------------------------


def test_parse_an_answer(tokenizer):
    message = tokenizer.parse_response(ANSWER, prefix=render(tokenizer, HELLO))
    assert message == {
        "role": "assistant",
        "thinking": "The user is greeting me.",
        "content": "Hi! How can I help?",
    }
    assert list(message) == ["role", "thinking", "content"]


def test_parse_a_tool_call_without_and_with_tools(tokenizer):
    prompt = render(
        tokenizer, [{"role": "user", "content": "3-day forecast for Paris?"}], tools=[GET_WEATHER]
    )
    untyped = tokenizer.parse_response(ONE_CALL, prefix=prompt)["tool_calls"]
    typed = tokenizer.parse_response(ONE_CALL, prefix=prompt, tools=[GET_WEATHER])["tool_calls"]
    assert untyped == [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}}
    ]
    assert typed == [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}
    ]
    assert type(typed[0]["function"]["arguments"]["days"]) is int


def test_parallel_calls_one_entry_each_in_order(tokenizer):
    prompt = render(
        tokenizer, [{"role": "user", "content": "3-day forecast for Paris?"}], tools=[GET_WEATHER]
    )
    calls = tokenizer.parse_response(TWO_CALLS, prefix=prompt, tools=[GET_WEATHER])["tool_calls"]
    assert [call["function"] for call in calls] == [
        {"name": "get_weather", "arguments": {"city": "London"}},
        {"name": "get_weather", "arguments": {"city": "Paris"}},
    ]
    assert all("id" not in call for call in calls)


def test_parse_a_stream(tokenizer):
    chunks = [
        "<|channel|>analysis<|message|>",
        "The user is ",
        "greeting me.",
        "<|end|><|start|>assistant<|channel|>final<|message|>",
        "Hi! How ",
        "can I help?",
        "<|return|>",
    ]
    parser = tokenizer.get_response_parser(prefix=render(tokenizer, HELLO))
    assert parser.initial_events == []
    events = [event for chunk in chunks for event in parser.feed(chunk)]
    message, final_events = parser.finalize()
    assert [(e["field"], e["text"]) for e in events if e["type"] == "region_chunk"] == [
        ("thinking", "The user is "),
        ("thinking", "greeting me."),
        ("content", "Hi! How "),
        ("content", "can I help?"),
    ]
    assert [(e["type"], e["field"]) for e in events if e["type"] != "region_chunk"] == [
        ("region_open", "thinking"),
        ("region_close", "thinking"),
        ("region_open", "content"),
        ("region_close", "content"),
    ]
    assert final_events == []
    assert message == {
        "role": "assistant",
        "thinking": "The user is greeting me.",
        "content": "Hi! How can I help?",
    }


def test_parse_a_tool_loop_continuation(tokenizer):
    """After a tool result the prompt's last header is the new turn's: earlier calls are not re-read."""
    prompt = render(tokenizer, TOOL_LOOP, tools=[GET_WEATHER])
    generated = (
        "<|channel|>analysis<|message|>Report it.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>14 C and cloudy.<|return|>"
    )
    assert tokenizer.parse_response(generated, prefix=prompt, tools=[GET_WEATHER]) == {
        "role": "assistant",
        "thinking": "Report it.",
        "content": "14 C and cloudy.",
    }


# --- inputs as a model produces them --------------------------------------------------------------


def test_token_ids_and_skip_special_tokens(tokenizer):
    prompt = render(tokenizer, HELLO)
    expected = tokenizer.parse_response(ANSWER, prefix=prompt)
    ids = tokenizer.encode(ANSWER, add_special_tokens=False)
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
    assert tokenizer.parse_response(ids, prefix=prompt_ids) == expected
    # <|return|> is the only special token: without it the answer is closed at the end of the text.
    stripped = tokenizer.decode(ids, skip_special_tokens=True)
    assert stripped == ANSWER.removesuffix("<|return|>")
    assert tokenizer.parse_response(stripped, prefix=prompt) == expected
    # A batch of generations gives one message each.
    assert tokenizer.parse_response([ANSWER, ONE_CALL], prefix=prompt)[0] == expected


def test_extra_assistant_header_and_trailing_text_are_ignored(tokenizer):
    prompt = render(tokenizer, HELLO)
    expected = tokenizer.parse_response(ANSWER, prefix=prompt)
    assert tokenizer.parse_response("<|start|>assistant" + ANSWER, prefix=prompt) == expected
    assert tokenizer.parse_response(ANSWER + "<|endoftext|><|endoftext|>", prefix=prompt) == expected


def test_prefilled_reasoning_is_part_of_the_message(tokenizer):
    prompt = render(tokenizer, HELLO) + "<|channel|>analysis<|message|>The user"
    parser = tokenizer.get_response_parser(prefix=prompt)
    assert [e["type"] for e in parser.initial_events] == ["region_open", "region_chunk"]
    parser.feed(" is greeting me.<|end|><|start|>assistant<|channel|>final<|message|>Hi!<|return|>")
    message, _ = parser.finalize()
    assert message == {"role": "assistant", "thinking": "The user is greeting me.", "content": "Hi!"}


def test_a_prefilled_tool_call_header(tokenizer):
    prompt = (
        render(tokenizer, HELLO, tools=[GET_WEATHER])
        + "<|channel|>analysis<|message|>Forced.<|end|>"
        + "<|start|>assistant to=get_weather<|channel|>analysis <|constrain|>xml<|message|>"
    )
    message = tokenizer.parse_response(
        '<rfl:parameter name="days">\n2\n</rfl:parameter><|call|>', prefix=prompt, tools=[GET_WEATHER]
    )
    assert message["tool_calls"] == [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"days": 2}}}
    ]


def test_call_or_return_or_nothing_ends_a_message(tokenizer):
    prompt = render(tokenizer, HELLO)
    for generated in (
        ONE_CALL,
        ONE_CALL.removesuffix("<|call|>"),
        ONE_CALL.replace("<|call|>", "<|return|>"),
    ):
        assert tokenizer.parse_response(generated, prefix=prompt)["tool_calls"][0]["function"][
            "arguments"
        ] == {
            "city": "Paris",
            "days": "3",
        }


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("", "\n\n"),
        ("\n", "\n\n\n"),
        ("  padded  ", "\n  padded  \n"),
        ("line 1\nline 2\n", "\nline 1\nline 2\n\n"),
        ("\nleading newline", "\n\nleading newline\n"),
        (
            'a < b <rfl:parameter name="x"> </rfl:parameterx',
            '\na < b <rfl:parameter name="x"> </rfl:parameterx\n',
        ),
        ("naïve 你好 ✓", "\nnaïve 你好 ✓\n"),
    ],
)
def test_argument_values_lose_exactly_one_newline_per_side(tokenizer, value, written):
    generated = (
        "<|channel|>analysis<|message|>x<|end|>"
        "<|start|>assistant to=f<|channel|>analysis <|constrain|>xml<|message|>"
        f'<rfl:parameter name="v">{written}</rfl:parameter>\n<rfl:parameter name="w">\nafter\n</rfl:parameter><|call|>'
    )
    arguments = tokenizer.parse_response(generated, prefix="")["tool_calls"][0]["function"]["arguments"]
    assert arguments == {"v": value, "w": "after"}
    assert parse_assistant_turn(generated)["tool_calls"][0]["function"]["arguments"] == {
        "v": value,
        "w": "after",
    }


def test_whitespace_of_reasoning_and_answer_is_kept(tokenizer):
    generated = (
        "<|channel|>analysis<|message|>\n  think\n\n<|end|>"
        "<|start|>assistant<|channel|>final<|message|> answer \n<|return|>"
    )
    assert tokenizer.parse_response(generated, prefix="") == {
        "role": "assistant",
        "thinking": "\n  think\n\n",
        "content": " answer \n",
    }


def test_empty_fields_are_dropped_by_transformers_but_kept_by_the_turn_reader(tokenizer):
    generated = "<|channel|>analysis<|message|><|end|><|start|>assistant<|channel|>final<|message|><|return|>"
    assert tokenizer.parse_response(generated, prefix="") == {"role": "assistant"}
    assert parse_assistant_turn(generated) == {"role": "assistant", "thinking": "", "content": ""}


def test_schema_types_are_cast_with_tools(tokenizer):
    tool = {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {
                    "s": {"type": "string"},
                    "i": {"type": "integer"},
                    "n": {"type": "number"},
                    "b": {"type": "boolean"},
                    "o": {"type": "object"},
                    "a": {"type": "array", "items": {"type": "integer"}},
                    "z": {"type": "null"},
                    "u": {"type": ["integer", "null"]},
                },
            },
        },
    }
    arguments = {
        "s": "42",
        "i": -7,
        "n": 2.5,
        "b": False,
        "o": {"k": [1, {"x": "é\n"}]},
        "a": [3, 1],
        "z": None,
        "u": None,
    }
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "reasoning_content": "r",
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": arguments}}],
        },
    ]
    prompt = render(tokenizer, messages[:1], tools=[tool])
    full = tokenizer.apply_chat_template(messages, tools=[tool], tokenize=False)
    parsed = tokenizer.parse_response(full[len(prompt) :], prefix=prompt, tools=[tool])
    got = parsed["tool_calls"][0]["function"]["arguments"]
    assert got == arguments
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in arguments.items()}


# --- the template itself ----------------------------------------------------------------------------


def test_template_loads_and_round_trips_through_tokenizer_config(tokenizer, fixture_dir):
    from transformers.utils.chat_parsing.response_templates import load_response_template

    load_response_template(response_template())
    saved = json.loads((fixture_dir / "tokenizer_config.json").read_text(encoding="utf-8"))[
        "response_template"
    ]
    assert saved == response_template()
    assert tokenizer.response_template == response_template()


# --- the strict turn reader, the normal form and the message splitter ------------------------------


def test_parse_assistant_turn_reads_answers_and_calls():
    assert parse_assistant_turn(ANSWER) == {
        "role": "assistant",
        "thinking": "The user is greeting me.",
        "content": "Hi! How can I help?",
    }
    assert parse_assistant_turn(ONE_CALL, [GET_WEATHER])["tool_calls"][0]["function"]["arguments"] == {
        "city": "Paris",
        "days": 3,
    }
    assert [c["function"]["arguments"]["city"] for c in parse_assistant_turn(TWO_CALLS)["tool_calls"]] == [
        "London",
        "Paris",
    ]


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("<|start|>assistant" + ANSWER, "harmony_malformed_turn"),  # the span starts at <|channel|>
        (ANSWER + " ", "harmony_malformed"),  # trailing text
        (ANSWER.replace("<|return|>", "<|end|>"), "harmony_malformed_turn"),  # an answer ends with <|return|>
        (ANSWER.replace("<|end|>", "<|return|>", 1), "harmony_malformed_turn"),  # analysis ends with <|end|>
        ("<|channel|>analysis<|message|>x<|end|>", "harmony_malformed_turn"),  # nothing after the analysis
        (ANSWER.replace("final", "commentary"), "harmony_malformed_turn"),
        (
            TWO_CALLS.replace("<|end|><|start|>assistant to", "<|call|><|start|>assistant to"),
            "harmony_malformed_turn",
        ),
        (
            TWO_CALLS.replace("<|call|>", "<|end|>"),
            "harmony_malformed_turn",
        ),  # the last call ends with <|call|>
        (ONE_CALL.replace("</rfl:parameter>\n<rfl", "</rfl:parameter><rfl"), "harmony_malformed_arguments"),
        (ONE_CALL.replace('"days">\n3', '"city">\n3'), "harmony_malformed_arguments"),  # a key twice
        (ONE_CALL.replace("\nParis\n", "Paris"), "harmony_malformed_arguments"),  # newlines missing
        (ONE_CALL.replace("<|constrain|>xml", "<|constrain|>json"), "harmony_malformed_turn"),
        (ANSWER + ANSWER[ANSWER.index("<|start|>") :], "harmony_malformed_turn"),  # two answers
    ],
)
def test_parse_assistant_turn_rejects_what_the_template_never_writes(text, code):
    with pytest.raises(Rejection) as info:
        parse_assistant_turn(text)
    assert info.value.code == code


def test_parse_assistant_turn_checks_the_shipped_response_template(monkeypatch):
    """A response template that reads a turn differently from the strict reader is caught."""
    import beam_sft.harmony.response as response

    def stripping_template():
        template = response_template()
        template["fields"]["thinking"]["content_args"] = {"strip": True}
        return template

    monkeypatch.setattr(response, "response_template", stripping_template)
    response._compiled_template.cache_clear()
    try:
        text = ANSWER.replace("The user", " The user")
        with pytest.raises(Rejection) as info:
            parse_assistant_turn(text)
        assert info.value.code == "harmony_response_template_mismatch"
        assert (
            parse_assistant_turn(text, check_response_template=False)["thinking"]
            == " The user is greeting me."
        )
    finally:
        monkeypatch.undo()
        response._compiled_template.cache_clear()


def test_canonical_assistant_message_matches_the_template_rules():
    call = {
        "id": "c",
        "type": "function",
        "function": {"name": "f", "arguments": {"n": 3, "s": "x", "o": {"a": [1.5]}}},
    }
    source = {
        "role": "assistant",
        "reasoning": "r",
        "content": "dropped with calls",
        "tool_calls": [call],
        "weight": 0,
    }
    assert canonical_assistant_message(source) == {
        "role": "assistant",
        "thinking": "r",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "f", "arguments": {"n": 3, "s": "x", "o": {"a": [1.5]}}},
            }
        ],
    }
    as_text = canonical_assistant_message(source, arguments_as_text=True)
    assert as_text["tool_calls"][0]["function"]["arguments"] == {"n": "3", "s": "x", "o": '{"a": [1.5]}'}
    # thinking wins over reasoning_content, which wins over reasoning; missing content is "".
    assert canonical_assistant_message({"role": "assistant", "thinking": "t", "reasoning_content": "rc"}) == {
        "role": "assistant",
        "thinking": "t",
        "content": "",
    }
    assert (
        canonical_assistant_message({"role": "assistant", "reasoning_content": "rc", "reasoning": "r"})[
            "thinking"
        ]
        == "rc"
    )


def test_render_argument_value_matches_the_chat_template(tokenizer):
    values = ["plain", 3, -2.5, 1e20, True, None, [1, "two", {"k": None}], {"b": 1, "a": 'é"\n'}]
    arguments = {f"p{i}": value for i, value in enumerate(values)}
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "reasoning_content": "r",
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": arguments}}],
        },
    ]
    full = tokenizer.apply_chat_template(messages, tokenize=False)
    body = "\n".join(
        f'<rfl:parameter name="{k}">\n{render_argument_value(v)}\n</rfl:parameter>'
        for k, v in arguments.items()
    )
    assert full.endswith(body + "<|call|>")


def test_split_harmony_messages(tokenizer):
    messages = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "reasoning_content": "Call.",
            "tool_calls": [
                {
                    "id": "c",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "Oslo"}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "3 C"},
    ]
    text = tokenizer.apply_chat_template(messages, tools=[GET_WEATHER], tokenize=False)
    split = split_harmony_messages(text)
    assert [(m.author, m.recipient, m.channel, m.constrain, m.end) for m in split] == [
        ("system", None, None, None, "<|end|>"),
        ("developer", None, None, None, "<|end|>"),
        ("user", None, None, None, "<|end|>"),
        ("assistant", None, "analysis", None, "<|end|>"),
        ("assistant", "get_weather", "analysis", "xml", "<|call|>"),
        ("get_weather", "assistant", "analysis", None, "<|end|>"),
    ]
    assert split[-1].body == "3 C"
    # built without the dataclass's __init__: the same objects as with it, every field set
    import dataclasses

    from beam_sft.harmony.response import HarmonyMessage

    rebuilt = [HarmonyMessage(**{f.name: getattr(m, f.name) for f in dataclasses.fields(m)}) for m in split]
    assert split == rebuilt and [hash(m) for m in split] == [hash(m) for m in rebuilt]
    assert all(vars(m).keys() == vars(r).keys() for m, r in zip(split, rebuilt, strict=True))
    with pytest.raises(Rejection):
        split_harmony_messages(text + "<|start|>assistant")


def test_docstring_examples():
    import doctest

    import beam_sft.harmony.response as module

    result = doctest.testmod(module)
    assert result.attempted >= 5 and result.failed == 0
