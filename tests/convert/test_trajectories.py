"""Agent trajectories as found: messages under another key (tau-bench's ``traj``), tools called but
never declared (``--infer-tools``), and pythonic calls in assistant text (ToolACE style)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_sft.cli import main
from beam_sft.convert.options import ConvertOptions
from beam_sft.convert.pipeline import convert_row
from beam_sft.convert.pythonic import parse_pythonic_calls
from beam_sft.convert.rows import Rejection
from tests.convert.readers_util import codes, run_source, write_jsonl


def tau_row(task: int, email: str, *, key: str = "traj", extra_arg: bool = False) -> dict:
    """A tau-bench retail trajectory's shape: task_id, reward, info, and the messages under ``traj``;
    the tools it calls are declared nowhere in the row."""
    args = {"email": email, **({"limit": 2} if extra_arg else {})}
    return {"task_id": task, "reward": 1.0, "info": {"task": {"user_id": "u1"}}, key: [
        {"role": "system", "content": "# Retail agent policy\nHelp the user."},
        {"role": "user", "content": "I want to check my order."},
        {"role": "assistant", "content": "<think>Find the user first.</think>", "tool_calls": [
            {"id": f"call_{task}", "type": "function",
             "function": {"name": "find_user_id_by_email", "arguments": json.dumps(args)}}]},
        {"role": "tool", "tool_call_id": f"call_{task}", "name": "find_user_id_by_email", "content": "u1"},
        {"role": "assistant", "content": "<think>Found.</think>I found your account."}]}


# --- messages under any key ---------------------------------------------------------------------------

def test_messages_under_traj_are_read_and_the_key_is_named_in_the_summary(tmp_path):
    path = write_jsonl(tmp_path / "tau.jsonl", [tau_row(1, "a@x.com"), tau_row(2, "b@x.com", key="trajectory")])
    results, conversion = run_source(path, fill=None, require_declared_tools=False)
    assert codes(results) == ["kept", "kept"]
    assert dict(conversion.summary.notes) == {"messages_key:traj": 1, "messages_key:trajectory": 1}
    assert "messages_key:traj=1" in "\n".join(conversion.summary.remarks())


def test_two_candidate_keys_are_malformed_naming_both(tmp_path):
    row = tau_row(1, "a@x.com")
    row["dialog"] = row["traj"]
    results, _ = run_source(write_jsonl(tmp_path / "two.jsonl", [tau_row(2, "b@x.com"), row]), fill=None,
                            require_declared_tools=False)
    assert codes(results) == ["kept", "malformed_row"]
    assert "under 'traj' and 'dialog'" in results[1].message


# --- tools declared by use ------------------------------------------------------------------------------

def test_without_the_flag_undeclared_tool_stays_the_default(tmp_path):
    results, _ = run_source(write_jsonl(tmp_path / "tau.jsonl", [tau_row(1, "a@x.com")]), fill=None)
    assert codes(results) == ["undeclared_tool"]


def test_infer_tools_declares_from_the_calls_of_the_source(tmp_path):
    rows = [tau_row(1, "a@x.com"), tau_row(2, "b@x.com", extra_arg=True), tau_row(3, "c@x.com")]
    results, conversion = run_source(write_jsonl(tmp_path / "tau.jsonl", rows), fill=None, infer_tools=True)
    assert codes(results) == ["kept"] * 3
    tool = results[1]["tools"][0]["function"]
    assert tool["name"] == "find_user_id_by_email"
    assert tool["parameters"] == {"type": "object", "properties": {"email": {"type": "string"},
                                                                   "limit": {"type": "integer"}},
                                  "required": ["email"]}  # limit is in one call of three
    assert all(r["meta"]["inferred_tools"] == ["find_user_id_by_email"] for r in results)
    assert conversion.summary.notes["inferred_tools"] == 3


def test_a_rows_own_declaration_wins(tmp_path):
    declared = {**tau_row(4, "d@x.com"), "tools": [{"type": "function", "function": {
        "name": "find_user_id_by_email", "description": "own", "parameters": {"type": "object"}}}]}
    results, conversion = run_source(write_jsonl(tmp_path / "tau.jsonl", [tau_row(1, "a@x.com"), declared]),
                                     fill=None, infer_tools=True)
    assert codes(results) == ["kept", "kept"]
    assert results[1]["tools"][0]["function"]["description"] == "own" and "inferred_tools" not in results[1]["meta"]
    assert conversion.summary.notes["inferred_tools"] == 1


def test_convert_cli_infer_tools_flag(tmp_path, capsys):
    src = write_jsonl(tmp_path / "tau.jsonl", [tau_row(1, "a@x.com"), tau_row(2, "b@x.com")])
    out = tmp_path / "rows.jsonl"
    assert main(["convert", str(src), "-o", str(out), "--infer-tools"]) == 0
    assert len(out.read_text().splitlines()) == 2
    assert "inferred_tools=2" in capsys.readouterr().out
    assert main(["convert", str(src), "-o", str(tmp_path / "o2.jsonl")]) == 1  # undeclared_tool, nothing kept


# --- pythonic calls -------------------------------------------------------------------------------------

TOOLACE_TOOLS = [{"name": "get_weather", "description": "Weather of a city", "parameters": {
    "type": "dict", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]}}]


def toolace_row(call: str, reasoning: str | None = "Ask the weather tool.") -> dict:
    """ToolACE's shape: ShareGPT turns, the assistant's call a Python list of calls in its text."""
    turn = {"from": "assistant", "value": call, **({"reasoning_content": reasoning} if reasoning else {})}
    return {"tools": json.dumps(TOOLACE_TOOLS), "conversations": [
        {"from": "user", "value": "Weather in Paris, in celsius?"}, turn,
        {"from": "tool", "value": "[{\"name\": \"get_weather\", \"results\": {\"temp\": 18}}]"},
        {"from": "assistant", "value": "It is 18 C in Paris.", "reasoning_content": "Report it."}]}


def test_pythonic_calls_become_calls_with_the_option(tmp_path):
    rows = [toolace_row('[get_weather(city="Paris", unit="celsius")]'),
            toolace_row("<think>Weather tool.</think>\nI will ask. [get_weather(city='Paris')]", reasoning=None)]
    results, _ = run_source(write_jsonl(tmp_path / "toolace.jsonl", rows), fill=None, pythonic_tool_calls=True)
    assert codes(results) == ["kept", "kept"]
    assert results[0]["messages"][1]["tool_calls"][0]["function"] == {
        "name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
    assert results[1]["messages"][1]["reasoning_content"] == "Weather tool.\n\nI will ask."
    # "type": "dict" is JSON Schema's object: the template shows the members
    assert results[0]["tools"][0]["function"]["parameters"]["type"] == "object"
    without, _ = run_source(write_jsonl(tmp_path / "plain.jsonl", rows[:1]), fill=None)
    assert codes(without) == ["tool_result_unmatched"]


def test_several_pythonic_calls_and_toolace_results_in_one_message(tmp_path):
    row = toolace_row('[get_weather(city="Paris"), get_weather(city="Rome")]')
    row["conversations"][2]["value"] = json.dumps([{"name": "get_weather", "results": {"temp": 18}},
                                                   {"name": "get_weather", "results": {"temp": 24}}])
    results, _ = run_source(write_jsonl(tmp_path / "toolace.jsonl", [row]), fill=None, pythonic_tool_calls=True)
    assert codes(results) == ["kept"]
    calls = results[0]["messages"][1]["tool_calls"]
    assert [c["function"]["arguments"]["city"] for c in calls] == ["Paris", "Rome"]
    assert [(m["tool_call_id"], m["content"]) for m in results[0]["messages"][2:4]] == [
        (calls[0]["id"], '{"temp": 18}'), (calls[1]["id"], '{"temp": 24}')]


@pytest.mark.parametrize("text", [
    "[__import__('os').system(cmd='ls')]",  # not a name call
    "[get_weather('Paris')]",  # positional
    "[get_weather(**{'city': 'Paris'})]",
    "[get_weather(city=open('x'))]",  # not a literal
    "[get_weather(city='Paris', city='Rome')]",
    "[get_weather(city={1, 2})]",  # a set has no JSON form
    "[get_weather(city='Paris')] and more",
    "See [1] and [2]",
    "[]",
])
def test_anything_else_stays_text(text):
    assert parse_pythonic_calls(text) is None
    row = convert_row({"messages": [{"role": "user", "content": "q"},
                                    {"role": "assistant", "reasoning_content": "r", "content": text}]},
                      format="openai", options=ConvertOptions(pythonic_tool_calls=True))
    assert not isinstance(row, Rejection) and "tool_calls" not in row["messages"][1]


literals = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8)
                        | st.floats(allow_nan=False, allow_infinity=False),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                    max_size=3), max_leaves=6)
names = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda s: s not in {"None", "True", "False"} and not __import__("keyword").iskeyword(s))


@settings(max_examples=60, deadline=None)
@given(calls=st.lists(st.tuples(names, st.dictionaries(names, literals, max_size=3)), min_size=1, max_size=3))
def test_pythonic_calls_round_trip(calls):
    """Any list of calls with literal keyword arguments, written as Python, reads back as itself."""
    text = "[" + ", ".join(f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls) + "]"
    said, parsed = parse_pythonic_calls(text)
    assert said == "" and [(c["function"]["name"], c["function"]["arguments"]) for c in parsed] == calls
