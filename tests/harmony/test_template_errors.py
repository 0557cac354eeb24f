"""Errors our chat template raises, with their messages (no reference template needed).

The differential tests prove the same behaviour as the reference on random input; these pin each
rule by name, so a failure says which rule broke, and they run where the reference is absent.
"""

from __future__ import annotations

import jinja2
import pytest

USER = {"role": "user", "content": "Hi"}


def _call(arguments, name="get_weather", call_id="call_1"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _assistant(**fields):
    return {"role": "assistant", "reasoning_content": "Thinking.", **fields}


def _render(tokenizer, messages, **kwargs):
    return tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)


def _raises(tokenizer, messages, message, **kwargs):
    with pytest.raises(jinja2.TemplateError) as info:
        _render(tokenizer, messages, **kwargs)
    assert str(info.value) == message


EFFORT_ERROR = "reasoning_effort must be an int or one of: minimal, low, medium, high, xhigh, max"


@pytest.mark.parametrize("effort", ["none", "MAX", "", "512", "very high"])
def test_unknown_effort_strings_raise(tokenizer, effort):
    _raises(tokenizer, [USER], EFFORT_ERROR, reasoning_effort=effort)


@pytest.mark.parametrize(
    ("effort", "line"),
    [
        ("minimal", "8"),
        ("low", "32"),
        ("medium", "64"),
        ("high", "128"),
        ("xhigh", "256"),
        ("max", "512"),
        (3, "3"),
        (None, "512"),
    ],
)
def test_effort_values(tokenizer, effort, line):
    assert f"\n\nReasoning effort: {line}\n\n" in _render(tokenizer, [USER], reasoning_effort=effort)


def test_missing_reasoning_raises_only_when_serving_strictly(tokenizer):
    history = [USER, {"role": "assistant", "content": "Hello!"}, USER]
    message = (
        "The assistant turn at messages[1] is missing its reasoning. Dropping reasoning from earlier turns "
        "degrades this model's output. Send it back in 'reasoning_content', or set allow_missing_thinking=true "
        "to skip this check."
    )
    _raises(tokenizer, history, message, add_generation_prompt=True, allow_missing_thinking=False)
    # Leading instructions count in the index, since it refers to the caller's list.
    _raises(
        tokenizer,
        [{"role": "system", "content": "S"}, *history],
        message.replace("[1]", "[2]"),
        add_generation_prompt=True,
        allow_missing_thinking=False,
    )
    # Training renders (no generation prompt) and the default never raise.
    assert "<|channel|>analysis<|message|><|end|>" in _render(
        tokenizer, history, allow_missing_thinking=False
    )
    assert "<|channel|>analysis<|message|><|end|>" in _render(tokenizer, history, add_generation_prompt=True)


@pytest.mark.parametrize("field", ["reasoning_content", "thinking", "reasoning"])
def test_reasoning_from_any_field_satisfies_the_check(tokenizer, field):
    history = [USER, {"role": "assistant", field: "Because.", "content": "Hello!"}, USER]
    text = _render(tokenizer, history, add_generation_prompt=True, allow_missing_thinking=False)
    assert "<|channel|>analysis<|message|>Because.<|end|>" in text


@pytest.mark.parametrize("tag", ["<|channel|>analysis<|message|>", "<|channel|>final<|message|>"])
def test_wire_tags_in_content_raise(tokenizer, tag):
    _raises(
        tokenizer,
        [USER, _assistant(content=f"x{tag}y")],
        "Pass plain text in API fields, not Harmony wire tags. Use 'thinking' for analysis and 'content' for "
        "final.",
    )


@pytest.mark.parametrize("field", ["reasoning_content", "thinking", "reasoning"])
def test_wire_tags_in_reasoning_raise(tokenizer, field):
    message = {"role": "assistant", field: "a<|channel|>final<|message|>b", "content": "c"}
    _raises(
        tokenizer,
        [USER, message],
        "Pass plain text in 'thinking'/'reasoning_content'/'reasoning' without Harmony wire tags.",
    )


@pytest.mark.parametrize(
    "value", ["a</rfl:parameter>b", ["x", "</rfl:parameter>"], {"k": "</rfl:parameter>"}]
)
def test_parameter_delimiter_in_arguments_raises(tokenizer, value):
    _raises(
        tokenizer,
        [USER, _assistant(tool_calls=[_call({"city": "Paris", "code": value})])],
        "Tool-call parameter 'code' contains the reserved delimiter </rfl:parameter>",
    )


@pytest.mark.parametrize("arguments", ['{"city": "Paris"}', ["Paris"], 3])
def test_non_dict_arguments_raise(tokenizer, arguments):
    _raises(
        tokenizer,
        [USER, _assistant(tool_calls=[_call(arguments)])],
        "function.arguments must be a dict; parse JSON strings before apply_chat_template",
    )


def test_unresolvable_tool_message_raises(tokenizer):
    message = "Tool message needs 'name' or a matching prior tool_call 'id' / 'tool_call_id'."
    calls = _assistant(tool_calls=[_call({"city": "Paris"})])
    _raises(tokenizer, [USER, calls, {"role": "tool", "tool_call_id": "call_9", "content": "x"}], message)
    _raises(tokenizer, [USER, calls, {"role": "tool", "content": "x"}], message)
    # A tool message before the call it answers cannot resolve either.
    _raises(tokenizer, [USER, {"role": "tool", "tool_call_id": "call_1", "content": "x"}, calls], message)


def test_messages_cannot_be_empty(tokenizer):
    from transformers.utils.chat_template_utils import render_jinja_template

    with pytest.raises(jinja2.TemplateError, match="messages cannot be empty"):
        render_jinja_template(conversations=[[]], chat_template=tokenizer.chat_template)


def test_tool_name_resolution_uses_latest_matching_call(tokenizer):
    messages = [
        USER,
        _assistant(tool_calls=[_call({}, name="first", call_id="call_0")]),
        {"role": "tool", "tool_call_id": "call_0", "content": "1"},
        _assistant(tool_calls=[_call({}, name="second", call_id="call_0")]),
        {"role": "tool", "tool_call_id": "call_0", "content": "2"},
        {"role": "tool", "name": "explicit", "tool_call_id": "call_0", "content": "3"},
    ]
    text = _render(tokenizer, messages)
    assert "<|start|>first to=assistant<|channel|>analysis<|message|>1<|end|>" in text
    assert "<|start|>second to=assistant<|channel|>analysis<|message|>2<|end|>" in text
    assert "<|start|>explicit to=assistant<|channel|>analysis<|message|>3<|end|>" in text
    assert "call_0" not in text


def test_argument_values_keep_order_and_json_types(tokenizer):
    arguments = {"s": "multi\nline é", "n": 1.5, "b": False, "z": None, "o": {"y": [1, "é"], "a": {}}}
    text = _render(tokenizer, [USER, _assistant(tool_calls=[_call(arguments)])])
    body = text[
        text.index("<|constrain|>xml<|message|>") + len("<|constrain|>xml<|message|>") : text.index(
            "<|call|>"
        )
    ]
    assert body == (
        '<rfl:parameter name="s">\nmulti\nline é\n</rfl:parameter>\n'
        '<rfl:parameter name="n">\n1.5\n</rfl:parameter>\n'
        '<rfl:parameter name="b">\nfalse\n</rfl:parameter>\n'
        '<rfl:parameter name="z">\nnull\n</rfl:parameter>\n'
        '<rfl:parameter name="o">\n{"y": [1, "é"], "a": {}}\n</rfl:parameter>'
    )
