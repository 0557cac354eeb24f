"""Hermes/Qwen tags: <tool_call> in assistant text, <tool_response> in user/tool text, <tools> in the prompt."""

from __future__ import annotations

import json

from beam_sft.convert import ConvertOptions
from beam_sft.convert.hermes import convert_hermes
from beam_sft.convert.pipeline import convert_row

OPTIONS = ConvertOptions()
CALC = {"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}
QWEN_SYSTEM = (
    "You are helpful.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    + json.dumps(CALC)
    + "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


def test_openai_shaped_hermes_trajectory():
    row = convert_hermes(
        {
            "messages": [
                {"role": "system", "content": QWEN_SYSTEM},
                {"role": "user", "content": "2+2?"},
                {
                    "role": "assistant",
                    "content": '<think>\nUse calc.\n</think>\n\n<tool_call>\n{"name": "calc", "arguments": {"e": "2+2"}}\n</tool_call>',
                },
                {"role": "user", "content": "<tool_response>\nOBSERVATION:\n4\n</tool_response>"},
                {"role": "assistant", "content": "<think>It is 4.</think>\n\n4"},
            ]
        },
        options=OPTIONS,
    )
    assert row["messages"][0] == {"role": "system", "content": "You are helpful."}
    assert row["tools"] == [CALC]
    assert row["messages"][2] == {
        "role": "assistant",
        "reasoning_content": "Use calc.",
        "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "calc", "arguments": {"e": "2+2"}}}
        ],
    }
    assert row["messages"][3] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "name": "calc",
        "content": "OBSERVATION:\n4",
    }
    assert row["messages"][4] == {"role": "assistant", "reasoning_content": "It is 4.", "content": "4"}


def test_sharegpt_shaped_rows_with_python_literal_and_xml_calls():
    row = convert_hermes(
        {
            "conversations": [
                {"from": "system", "value": "<tools>[" + json.dumps(CALC["function"]) + "]</tools>"},
                {"from": "human", "value": "q"},
                {
                    "from": "gpt",
                    "value": "<think>two</think><tool_call>\n{'name': 'calc', 'arguments': {'e': '1'}}\n</tool_call>"
                    "<tool_call><function=calc><parameter=e>\n2\n</parameter></function></tool_call>",
                },
                {
                    "from": "tool",
                    "value": '<tool_response>\n{"name": "calc", "content": 1}\n</tool_response>\n'
                    "<tool_response>2</tool_response>",
                },
            ]
        },
        options=OPTIONS,
    )
    assert [m["role"] for m in row["messages"]] == ["user", "assistant", "tool", "tool"]
    assert [c["function"]["arguments"] for c in row["messages"][1]["tool_calls"]] == [{"e": "1"}, {"e": "2"}]
    assert [m["content"] for m in row["messages"][2:]] == ["1", "2"]


def test_mixed_tool_responses_and_bad_calls_are_rejected():
    mixed = {"messages": [{"role": "user", "content": "hi <tool_response>1</tool_response>"}]}
    assert convert_hermes(mixed, options=OPTIONS).code == "tool_response_mixed"
    bad = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "<tool_call>not json</tool_call>"},
        ]
    }
    assert convert_hermes(bad, options=OPTIONS).code == "malformed_tool_call"
    unclosed = {
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<tool_call>{}"}]
    }
    assert convert_hermes(unclosed, options=OPTIONS).code == "malformed_tool_call"


def test_few_shot_transcript_strings():
    example = (
        "```\nSYSTEM: You help.\n<tools>[" + json.dumps(CALC["function"]) + "]\n\n</tools>\nUSER: 3*3?\n"
        'ASSISTANT:\n<tool_call>\n{"arguments": {"e": "3*3"},\n "name": "calc"}\n</tool_call>\n```\n'
    )
    row = convert_hermes({"example": example}, options=ConvertOptions(missing_reasoning="unmask"))
    assert row["messages"][0] == {"role": "system", "content": "You help."}
    assert row["messages"][2]["tool_calls"][0]["function"] == {"name": "calc", "arguments": {"e": "3*3"}}
    assert convert_hermes(example, options=OPTIONS) == convert_hermes({"text": example}, options=OPTIONS)
    assert convert_hermes("no speakers here", options=OPTIONS).code == "malformed_row"


def test_a_tools_and_a_system_column_beside_a_transcript_are_read():
    # they were dropped unsaid: the call then named an undeclared tool, the system prompt was lost
    text = 'USER: 3*3?\nASSISTANT:\n<think>Use calc.</think>\n<tool_call>\n{"name": "calc", "arguments": {"e": "3*3"}}\n</tool_call>'
    row = convert_hermes({"text": text, "tools": [CALC], "system": "Be exact."}, options=OPTIONS)
    assert row["tools"] == [CALC]
    assert row["messages"][:2] == [{"role": "system", "content": "Be exact."}, {"role": "user", "content": "3*3?"}]
    assert convert_row({"text": text}, format="hermes", options=OPTIONS, source="s", row=0).code == "undeclared_tool"
    assert convert_hermes({"text": text, "tools": 3}, options=OPTIONS).code == "bad_tool_definition"
    assert convert_hermes({"text": text, "tools": [CALC], "system": 3}, options=OPTIONS).code == "malformed_row"


# NousResearch/hermes-function-calling-v1 (func_calling_singleturn.json, its dataset card's example, cut
# to one tool): the <tools> block and the call schema are Python literals, and the instruction after
# the block names another schema and other wording than Qwen's.
HERMES_V1_SYSTEM = (
    "You are a function calling AI model. You are provided with function signatures within <tools> </tools> "
    "XML tags. You may call one or more functions to assist with the user query. Don't make assumptions about "
    "what values to plug into functions.\n<tools>\n[{'type': 'function', 'function': {'name': 'get_camera_live_feed', "
    "'description': 'Retrieves the live feed from a specified security camera.', 'parameters': {'type': 'object', "
    "'properties': {'camera_id': {'type': 'string', 'description': 'The unique identifier for the camera.'}, "
    "'stream_quality': {'type': 'string', 'enum': ['720p', '1080p', '4k']}}, 'required': ['camera_id']}}}]\n</tools>\n"
    "For each function call return a json object with function name and arguments within <tool_call> </tool_call> "
    "tags with the following schema:\n<tool_call>\n{'arguments': <args-dict>, 'name': <function-name>}\n</tool_call>\n"
)


def test_hermes_function_calling_v1_tools_block_is_a_python_literal():
    row = convert_hermes({"conversations": [
        {"from": "system", "value": HERMES_V1_SYSTEM},
        {"from": "human", "value": "Show camera cam001 in 1080p."},
        {"from": "gpt", "value": "<think>Call it.</think>\n<tool_call>\n{'arguments': {'camera_id': 'cam001', "
                                 "'stream_quality': '1080p'}, 'name': 'get_camera_live_feed'}\n</tool_call>\n"},
    ]}, options=OPTIONS)
    assert row["messages"][0] == {"role": "system", "content": "You are a function calling AI model."}
    (tool,) = row["tools"]
    assert tool["function"]["name"] == "get_camera_live_feed"
    assert tool["function"]["parameters"]["properties"]["stream_quality"]["enum"] == ["720p", "1080p", "4k"]
    assert row["messages"][2]["tool_calls"][0]["function"]["arguments"] == {"camera_id": "cam001",
                                                                           "stream_quality": "1080p"}


def test_a_python_literal_tools_block_with_a_key_twice_or_a_set_is_refused():
    from beam_sft.convert import Rejection

    def system(block):
        return {"conversations": [{"from": "system", "value": f"<tools>\n{block}\n</tools>"},
                                  {"from": "human", "value": "hi"}, {"from": "gpt", "value": "<think>r</think>yo"}]}

    twice = convert_hermes(system("[{'type': 'function', 'function': {'name': 'f', 'name': 'g'}}]"), options=OPTIONS)
    assert isinstance(twice, Rejection) and twice.code == "duplicate_key"
    a_set = convert_hermes(system("[{'type': 'function', 'function': {'name': 'f', 'x': {1}}}]"), options=OPTIONS)
    assert isinstance(a_set, Rejection) and a_set.code == "invalid_json"


def test_a_tool_message_keeps_its_own_id_and_name_around_its_tool_response_block():
    # The message's tool_call_id and name were dropped with the <tool_response> wrapper: results given
    # in another order than their calls were then matched by position, each to the other's call, unsaid.
    calls = [{"id": "c1", "function": {"name": "f", "arguments": {}}},
             {"id": "c2", "function": {"name": "g", "arguments": {}}}]
    tools = [{"name": "f"}, {"name": "g"}]

    def row(*results):
        return {"messages": [{"role": "user", "content": "q"},
                             {"role": "assistant", "reasoning_content": "r", "tool_calls": calls}, *results,
                             {"role": "assistant", "reasoning_content": "r", "content": "done"}], "tools": tools}

    def result(call_id, name, text):
        return {"role": "tool", "tool_call_id": call_id, "name": name,
                "content": f"<tool_response>\n{text}\n</tool_response>"}

    swapped = convert_row(row(result("c2", "g", "G"), result("c1", "f", "F")), format="hermes", options=OPTIONS)
    assert swapped.code == "tool_result_order"
    kept = convert_hermes(row(result("c1", "f", "F"), result("c2", "g", "G")), options=OPTIONS)
    assert kept["messages"][2:4] == [{"role": "tool", "tool_call_id": "c1", "name": "f", "content": "F"},
                                     {"role": "tool", "tool_call_id": "c2", "name": "g", "content": "G"}]
    both = {"role": "tool", "tool_call_id": "c1", "content": "<tool_response>F</tool_response>"
                                                             "<tool_response>G</tool_response>"}
    assert convert_hermes(row(both), options=OPTIONS).code == "tool_result_unmatched"
    named = {"from": "observation", "name": "g", "value": "<tool_response>G</tool_response>"}
    share = {"conversations": [{"from": "human", "value": "q"},
                               {"from": "function_call", "value": json.dumps([{"name": "f", "arguments": {}},
                                                                              {"name": "g", "arguments": {}}]),
                                "reasoning_content": "r"},
                               named, {**named, "name": "f", "value": "<tool_response>F</tool_response>"}],
             "tools": tools}
    assert convert_row(share, format="hermes", options=OPTIONS).code == "tool_result_order"


def test_a_row_whose_only_value_is_the_transcript_reads_no_column_beside_it():
    """A `system` key holding the transcript itself (the row's only value) was also read as the system
    prompt beside it (the Harmony reader had the same rule mended)."""
    text = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>Greet.</think>Hello!<|im_end|>\n"
    row = convert_hermes({"system": text}, options=ConvertOptions())
    assert [m["role"] for m in row["messages"]] == ["user", "assistant"]
