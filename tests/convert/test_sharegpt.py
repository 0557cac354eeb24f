"""ShareGPT rows: speakers, function_call/observation turns, tools and system columns, column maps."""

from __future__ import annotations

import json

import pytest

from beam_sft.convert import ColumnMap, ConvertOptions, Rejection
from beam_sft.convert.sharegpt import SPEAKERS, convert_sharegpt

LOOSE = ConvertOptions(require_declared_tools=False)


def convert(row, options=LOOSE):
    return convert_sharegpt(row, options=options)


def gpt(text="<think>r</think>ok", **extra):
    return {"from": "gpt", "value": text, **extra}


@pytest.mark.parametrize(
    "speaker, role",
    [
        ("human", "user"),
        ("user", "user"),
        ("gpt", "assistant"),
        ("assistant", "assistant"),
        ("chatgpt", "assistant"),
        ("model", "assistant"),
        ("system", "system"),
    ],
)
def test_speaker_aliases(speaker, role):
    turns = [{"from": speaker, "value": "<think>r</think>x" if role == "assistant" else "x"}]
    assert convert({"conversations": turns})["messages"][0]["role"] == role


def test_every_listed_alias_is_known():
    for speaker in (
        "human",
        "user",
        "gpt",
        "assistant",
        "chatgpt",
        "model",
        "system",
        "function_call",
        "observation",
        "tool",
        "function",
    ):
        assert speaker in SPEAKERS


def test_unknown_speaker():
    assert convert({"conversations": [{"from": "narrator", "value": "x"}]}).code == "unknown_role"


def test_function_call_and_observation_turns_with_tools_as_json_string():
    tools = [{"name": "recipes", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}]
    row = convert_sharegpt(
        {
            "tools": json.dumps(tools),
            "conversations": [
                {"from": "human", "value": "chicken?"},
                {"from": "function_call", "value": '{"name": "recipes", "arguments": {"q": "chicken"}}'},
                {"from": "observation", "value": '{"recipes": ["stir fry"]}'},
                gpt(),
            ],
        },
        options=ConvertOptions(missing_reasoning="unmask"),
    )
    assert row["tools"] == [{"type": "function", "function": tools[0]}]
    assert row["messages"][1] == {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "recipes", "arguments": {"q": "chicken"}},
            }
        ],
    }
    assert row["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "name": "recipes",
        "content": '{"recipes": ["stir fry"]}',
    }


@pytest.mark.parametrize("tools", ["[]", [], None, ""])
def test_empty_tools_columns(tools):
    assert "tools" not in convert({"tools": tools, "conversations": [{"from": "human", "value": "q"}, gpt()]})


def test_gpt_text_then_calls_is_one_turn_and_consecutive_calls_are_parallel():
    row = convert(
        {
            "conversations": [
                {"from": "human", "value": "q"},
                gpt("<think>two lookups</think>"),
                {"from": "function_call", "value": '{"name": "a", "arguments": {}}'},
                {"from": "function_call", "value": {"name": "b", "arguments": "{}"}},
                {"from": "observation", "value": "1"},
                {"from": "tool", "value": "2"},
            ]
        }
    )
    assert len(row["messages"]) == 4
    assert [c["function"]["name"] for c in row["messages"][1]["tool_calls"]] == ["a", "b"]
    assert row["messages"][1]["reasoning_content"] == "two lookups"


def test_a_function_call_value_list_is_parallel_calls():
    value = json.dumps([{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}])
    row = convert(
        {"conversations": [{"from": "human", "value": "q"}, {"from": "function_call", "value": value}]}
    )
    assert [c["function"]["name"] for c in row["messages"][1]["tool_calls"]] == ["a", "b"]


def test_bad_function_call_values():
    assert convert({"conversations": [{"from": "function_call", "value": "{oops"}]}).code == "invalid_json"
    assert (
        convert({"conversations": [{"from": "function_call", "value": '{"arguments": {}}'}]}).code
        == "malformed_tool_call"
    )
    assert (
        convert({"conversations": [{"from": "function_call", "value": "[]"}]}).code == "malformed_tool_call"
    )


def test_observation_envelopes_unwrap_and_invalid_json_stays_text():
    broken = '{"tool_call_id": "call_ur6, "name": "w", "content": {"t": 72}}'
    row = convert(
        {
            "conversations": [
                {"from": "human", "value": "q"},
                gpt(
                    '[{"id": "c1", "function": {"name": "w", "arguments": {}, "type": "function"}}, '
                    '{"id": "c2", "function": {"name": "w", "arguments": {}}}]'
                ),
                {"from": "tool", "value": '{"tool_call_id": "c1", "name": "w", "content": {"t": 72}}'},
                {"from": "tool", "value": broken},
            ]
        }
    )
    assert row["messages"][1]["tool_calls"][1]["id"] == "c2"
    assert row["messages"][2] == {"role": "tool", "tool_call_id": "c1", "name": "w", "content": '{"t": 72}'}
    assert row["messages"][3]["content"] == broken


def test_system_column_and_reasoning_and_weight_keys():
    row = convert(
        {
            "system": "Be kind.",
            "conversations": [
                {"from": "human", "value": "q"},
                gpt("plain", reasoning_content="thought", weight=0),
            ],
        }
    )
    assert row["messages"][0] == {"role": "system", "content": "Be kind."}
    assert row["messages"][2] == {
        "role": "assistant",
        "reasoning_content": "thought",
        "content": "plain",
        "weight": 0,
    }


def test_column_map_covers_non_standard_names():
    options = ConvertOptions(
        columns=ColumnMap(
            conversations="dialog",
            role_key="speaker",
            content_key="text",
            system="preamble",
            tools="functions_json",
        )
    )
    row = convert_sharegpt(
        {
            "preamble": "S",
            "dialog": [{"speaker": "human", "text": "q"}, {"speaker": "gpt", "text": "<think>r</think>a"}],
        },
        options=options,
    )
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]
    assert isinstance(convert_sharegpt({"conversations": []}, options=options), Rejection)


def test_empty_gpt_value_is_an_empty_assistant_turn_for_validation():
    row = convert({"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": ""}]})
    assert row["messages"][1] == {"role": "assistant"}


READ_FILE = [{"type": "function", "function": {"name": "read_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}}}}]


@pytest.mark.parametrize(("observation", "content"), [
    # a result that is itself {"name", "content"}, naming no tool of the row: the whole JSON is the result
    ('{"name": "README.md", "content": "# Project\\nhello"}', '{"name": "README.md", "content": "# Project\\nhello"}'),
    # an envelope naming the called tool: the convention, unwrapped
    ('{"name": "read_file", "content": "# Project\\nhello"}', "# Project\nhello"),
    ('{"name": "read_file", "content": {"lines": 2}}', '{"lines": 2}'),
])
def test_a_result_shaped_like_an_envelope_is_unwrapped_only_when_it_names_a_tool(observation, content):
    row = convert({"conversations": [
        {"from": "human", "value": "show README"},
        {"from": "function_call", "value": '{"name": "read_file", "arguments": {"path": "README.md"}}'},
        {"from": "observation", "value": observation},
        {"from": "gpt", "value": "Here it is."}], "tools": json.dumps(READ_FILE)})
    assert not isinstance(row, Rejection), row
    assert [m["content"] for m in row["messages"] if m["role"] == "tool"] == [content]


def test_an_envelope_naming_another_declared_tool_is_still_unmatched():
    tools = READ_FILE + [{"type": "function", "function": {"name": "list_dir", "parameters": {"type": "object"}}}]
    from beam_sft.convert import convert_row

    row = convert_row({"conversations": [
        {"from": "human", "value": "show README"},
        {"from": "gpt", "value": "<think>Read it.</think>"},
        {"from": "function_call", "value": '{"name": "read_file", "arguments": {"path": "README.md"}}'},
        {"from": "observation", "value": '{"name": "list_dir", "content": "a b"}'},
        {"from": "gpt", "value": "<think>Done.</think>Here it is."}], "tools": json.dumps(tools)},
        format="sharegpt", options=LOOSE)
    assert isinstance(row, Rejection) and row.code == "tool_result_unmatched", row


@pytest.mark.parametrize(("call", "result"), [("function-call", "function_response"),
                                               ("function_call", "function-response"),
                                               ("function_call", "tool_response")])
def test_other_spellings_of_the_call_and_result_speakers(call, result):
    tools = [{"name": "recipes", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}]
    row = convert_sharegpt({"tools": json.dumps(tools), "conversations": [
        {"from": "human", "value": "chicken?"},
        {"from": call, "value": '{"name": "recipes", "arguments": {"q": "chicken"}}'},
        {"from": result, "value": '{"recipes": ["stir fry"]}'}, gpt()]},
        options=ConvertOptions(missing_reasoning="unmask"))
    assert row["messages"][1]["tool_calls"][0]["function"]["name"] == "recipes"
    assert row["messages"][2]["role"] == "tool" and row["messages"][2]["tool_call_id"] == "call_0"


def test_a_structured_observation_is_its_json_text_as_an_openai_tool_message_is():
    """A ShareGPT observation holding the tool's object was malformed_row ("value.content is a dict")
    after OpenAI tool messages were read as their JSON text: one rule (parts.read_result_content)."""
    from beam_sft.convert import ConvertOptions
    from beam_sft.convert.sharegpt import convert_sharegpt

    row = convert_sharegpt({"conversations": [
        {"from": "human", "value": "T?"}, {"from": "function_call", "value": '{"name": "now", "arguments": {}}'},
        {"from": "observation", "value": {"time": "12:00"}}, {"from": "gpt", "value": "<think>r</think>noon"}],
        "tools": '[{"name": "now", "parameters": {"type": "object", "properties": {}}}]'}, options=ConvertOptions())
    assert row["messages"][2]["content"] == '{"time": "12:00"}'
