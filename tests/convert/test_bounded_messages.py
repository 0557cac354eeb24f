"""A rejection message quotes a row's value bounded (``visible.quoted``): a 1 MB role, name, key or
argument makes a message of a few hundred characters that says how long the value was; the rejects
record keeps the row itself whole. And the late number check names the source's own entry."""

from __future__ import annotations

import json
import pickle

import pytest

from beam_sft.convert import ConvertOptions, Rejection, convert_files, convert_row
from beam_sft.convert.pipeline import late_rejection
from beam_sft.prepare.batch import row_column

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
    # the readers written beside the bounded quoting (found in the last review: they quoted with !r)
    "responses stored conversation": ("responses", {"input": [USER], "previous_response_id": BIG}, "malformed_row"),
    "responses status": ("responses", {"input": [USER], "status": BIG}, "response_cut_off"),
    "responses item type": ("responses", {"input": [USER, {"type": BIG}]}, "malformed_row"),
    "responses part type": ("responses", {"input": [{"role": "user", "content": [{"type": BIG}]}]},
                            "non_text_content"),
    "responses item reference": ("responses", {"input": [USER, {"type": "item_reference", "id": BIG}]},
                                 "malformed_row"),
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


# --- the late number check names the source's entry ------------------------------------------

HERMES_INF = {"conversations": [
    {"from": "human", "value": "q"},
    {"from": "gpt", "value": "<think>r</think><tool_call>\n{'name': 'f', 'arguments': {'x': 1e400}}\n</tool_call>"}],
    "tools": TOOLS}


def test_a_late_infinity_names_the_source_entry_not_the_converted_path():
    result = convert_row(HERMES_INF, format="hermes", options=OPTIONS, source="s.jsonl", row=0)
    assert result.code == "non_standard_number"
    assert result.message == "conversations[1].tool_calls[0].function.arguments.x is inf, which JSON cannot hold"


def test_prepare_names_the_late_infinity_by_the_source_entry_too():
    """prepare checks a kept row where it serializes it (``row_column``): the places travel there on
    the row's meta, and are taken off before anything is written."""
    row = convert_row(HERMES_INF, format="hermes", options=OPTIONS, source="s.jsonl", row=0, late_check=False)
    assert row["meta"]["places"] == ["conversations[0]", "conversations[1]"]
    found = row_column(row)
    assert isinstance(found, Rejection)
    assert found.message == "conversations[1].tool_calls[0].function.arguments.x is inf, which JSON cannot hold"
    assert "places" not in row["meta"]


def test_a_kept_rows_places_are_never_written():
    good = {"messages": [USER, {"role": "assistant", "reasoning_content": "r", "content": "a"}]}
    row = convert_row(good, format="openai", options=OPTIONS, source="s.jsonl", row=0, late_check=False)
    assert "places" not in json.loads(row_column(row))["meta"]


def test_what_only_the_converted_row_holds_is_named_so():
    """Tools read from a system prompt's text have no source entry of their own: the message says the
    path is the converted row's."""
    system = "<tools>[{'type': 'function', 'function': {'name': 'f', 'parameters': {'default': 1e400}}}]</tools>"
    raw = {"conversations": [{"from": "system", "value": system}, {"from": "human", "value": "q"},
                             {"from": "gpt", "value": "<think>r</think>a"}]}
    result = convert_row(raw, format="hermes", options=OPTIONS, source="s.jsonl", row=0)
    assert result.code == "non_standard_number"
    assert result.message == "the converted row's tools[0].function.parameters.default is inf, which JSON cannot hold"


def test_a_1mb_key_names_no_1mb_place():
    row = {"messages": [USER, {"role": "assistant", "content": "a", "tool_calls": [
        {"function": {"name": "f", "arguments": {BIG: float("nan")}}}]}]}
    assert len(late_rejection(row, ["conversations[0]", "conversations[1]"]).message) < 300
