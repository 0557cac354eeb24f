"""A rejection message quotes a row's value bounded (``visible.quoted``): a 1 MB role, name, key or
argument makes a message of a few hundred characters that says how long the value was; the rejects
record keeps the row itself whole."""

from __future__ import annotations

import json
import pickle

import pytest

from beam_sft.convert import ConvertOptions, Rejection, convert_files, convert_row

OPTIONS = ConvertOptions()
BIG = "x" * 1_000_000
SAID = "(1,000,000 characters)"  # how long the value was, as quoted says it
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
USER = {"role": "user", "content": "q"}


def _call(**function):
    return {"role": "assistant", "reasoning_content": "r", "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}", **function}}]}


# (format, row, code): each puts the 1 MB value where a message quotes it
CASES = {
    "openai role": ("openai", {"messages": [{"role": BIG, "content": "q"}]}, "unknown_role"),
    "openai call name": ("openai", {"messages": [USER, _call(name=BIG)], "tools": TOOLS}, "undeclared_tool"),
    "openai argument name": ("openai", {"messages": [USER, _call(arguments=json.dumps({'"' + BIG: 1}))],
                                        "tools": TOOLS}, "bad_argument_name"),
    "openai weight": ("openai", {"messages": [USER, {"role": "assistant", "reasoning_content": "r", "content": "a",
                                                     "weight": BIG}]}, "bad_weight"),
    "openai reasoning effort": ("openai", {"messages": [USER, {"role": "assistant", "reasoning_content": "r",
                                                               "content": "a"}], "reasoning_effort": BIG},
                                "bad_reasoning_effort"),
    "openai tool_call_id": ("openai", {"messages": [USER, _call(), {"role": "tool", "tool_call_id": BIG,
                                                                    "content": "x"}], "tools": TOOLS},
                            "tool_result_unmatched"),
    "openai part type": ("openai", {"messages": [{"role": "user", "content": [{"type": BIG}]}]}, "non_text_content"),
    "openai call type": ("openai", {"messages": [USER, {**_call(), "tool_calls": [
        {"type": BIG, "function": {"name": "f", "arguments": "{}"}}]}], "tools": TOOLS}, "malformed_tool_call"),
    "openai keys found": ("openai", {BIG: 1}, "malformed_row"),
    "openai two lists": ("openai", {BIG: [USER], "y" + BIG: [USER]}, "malformed_row"),
    "sharegpt role": ("sharegpt", {"conversations": [{"from": BIG, "value": "q"}]}, "unknown_role"),
    "sharegpt turn keys": ("sharegpt", {"conversations": [{BIG: "human", "value": "q"}]}, "malformed_row"),
    "hermes text after a call": ("hermes", {"conversations": [
        {"from": "human", "value": "q"},
        {"from": "gpt", "value": '<think>r</think><tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>' + BIG}],
        "tools": TOOLS}, "text_after_tool_call"),
    "harmony author": ("harmony", {"text": f"<|start|>user<|message|>q<|end|><|start|>{BIG}<|message|>r<|end|>"},
                       "harmony_malformed"),
    "bedrock block": ("bedrock", {"messages": [{"role": "user", "content": [{BIG: 1}]}]}, "non_text_content"),
    "chat_log finish reason": ("chat_log", {"request": {"messages": [USER]}, "response": {"choices": [
        {"finish_reason": BIG, "message": {"role": "assistant", "content": "a"}}]}}, "response_cut_off"),
    "glaive call": ("glaive", {"system": "s", "chat": "USER: q\n\n\nASSISTANT: <functioncall> {" + BIG},
                    "malformed_tool_call"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_1mb_value_makes_a_short_message_that_says_its_length(case):
    fmt, raw, expected = CASES[case]
    result = convert_row(raw, format=fmt, options=OPTIONS, source="s.jsonl", row=0)
    assert isinstance(result, Rejection) and result.code == expected
    assert len(result.message) < 700, result.message[:300]
    assert "characters)" in result.message and "\n" not in result.message  # says how long; one line
    assert result.to_json()["raw"] is raw  # the rejects record keeps the row whole


@pytest.mark.parametrize("key", ["weight", "reasoning_effort"])
def test_a_huge_object_is_quoted_bounded(key):
    huge = {"nested": [BIG, {"deeper": [BIG]}]}
    turn = {"role": "assistant", "reasoning_content": "r", "content": "a"}
    raw = {"messages": [USER, {**turn, "weight": huge}]} if key == "weight" else {
        "messages": [USER, turn], "reasoning_effort": huge}
    result = convert_row(raw, format="openai", options=OPTIONS)
    assert result.code in ("bad_weight", "bad_reasoning_effort")
    assert len(result.message) < 400 and "characters as written)" in result.message


def test_a_rows_rejects_line_has_the_row_whole_and_the_message_short(tmp_path):
    src, rej = tmp_path / "a.jsonl", tmp_path / "rej.jsonl"
    src.write_text(json.dumps({"messages": [USER, _call(arguments=json.dumps({'"' + BIG: 1}))], "tools": TOOLS})
                   + "\n", encoding="utf-8")
    convert_files([src], output=tmp_path / "o.jsonl", rejects=rej)
    (record,) = [json.loads(line) for line in rej.read_text(encoding="utf-8").splitlines()]
    assert record["code"] == "bad_argument_name" and SAID.replace("1,000,000", "1,000,001") in record["message"]
    assert len(record["message"]) < 400
    assert json.loads(record["raw"]["messages"][1]["tool_calls"][0]["function"]["arguments"]) == {'"' + BIG: 1}


def test_any_message_past_the_bound_is_cut_once_whatever_built_it():
    """The backstop: a message built from an unbounded text all the same is kept to its start, and
    stays the same when placed or sent to another process."""
    r = Rejection("converter_error", "ValueError: " + BIG)
    assert len(r.message) < 2000 and r.message.endswith("more characters)")
    placed = r.at(source="s", row=1, raw={"x": BIG})
    assert placed.message == r.message == pickle.loads(pickle.dumps(placed)).message
    assert placed.to_json()["raw"] == {"x": BIG}
