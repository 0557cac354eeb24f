"""Comparing a parsed turn with its source message."""

from __future__ import annotations

from beam_sft.verify.compare import compare_turn, content_beside_tool_calls


def call(name, args):
    return {"type": "function", "function": {"name": name, "arguments": args}}



def test_reasoning_is_read_like_the_template():
    parsed = {"thinking": "from thinking", "content": "a"}
    source = {"thinking": "from thinking", "reasoning_content": "ignored", "content": "a"}
    assert compare_turn(parsed, source) == []
    assert compare_turn({"thinking": "r", "content": "a"}, {"reasoning": "r", "content": "a"}) == []
    assert compare_turn({"thinking": "x", "content": "a"}, {"reasoning": "r", "content": "a"})


def test_arguments_match_by_value_or_by_rendered_text():
    source = {"reasoning_content": "r", "tool_calls": [call("f", {"n": 3, "flag": True, "o": {"a": [1]}})]}
    typed = {"thinking": "r", "tool_calls": [call("f", {"n": 3, "flag": True, "o": {"a": [1]}})]}
    as_text = {"thinking": "r", "tool_calls": [call("f", {"n": "3", "flag": "true", "o": '{"a": [1]}'})]}
    assert compare_turn(typed, source) == []
    assert compare_turn(as_text, source) == []
    wrong = {"thinking": "r", "tool_calls": [call("f", {"n": "4", "flag": "true", "o": '{"a": [1]}'})]}
    assert compare_turn(wrong, source) == ["tool call 0: argument 'n' parsed '4', source 3"]


def test_tool_call_names_counts_and_keys():
    source = {"reasoning_content": "r", "tool_calls": [call("f", {"a": "1"}), call("g", {})]}
    assert compare_turn({"thinking": "r", "tool_calls": [call("f", {"a": "1"})]}, source) == [
        "tool calls: parsed 1, source 2"]
    diffs = compare_turn({"thinking": "r", "tool_calls": [call("h", {"b": "1"}), call("g", {})]}, source)
    assert diffs == ["tool call 0: name parsed 'h', source 'f'", "tool call 0: arguments parsed ['b'], source ['a']"]


def test_content_beside_tool_calls_is_a_note_not_a_diff():
    source = {"reasoning_content": "r", "content": "Let me check.", "tool_calls": [call("f", {})]}
    assert content_beside_tool_calls(source)
    assert compare_turn({"thinking": "r", "tool_calls": [call("f", {})]}, source) == []
    # ...but an answer parsed out of a tool-call turn is not what the template writes.
    assert compare_turn({"thinking": "r", "content": "x", "tool_calls": [call("f", {})]}, source)
