"""OpenAI chat rows: every shape the issue lists, and the messy corpus shapes, one test each."""

from __future__ import annotations

import pytest

from beam_sft.convert import ConvertOptions, Rejection
from beam_sft.convert.openai import convert_openai

LOOSE = ConvertOptions(require_declared_tools=False)


def convert(row, **options):
    return convert_openai(row, options=ConvertOptions(**options) if options else LOOSE)


def code(result) -> str | None:
    return result.code if isinstance(result, Rejection) else None


def turn(**fields):
    return {"role": "assistant", "reasoning_content": "r", **fields}


def call(name="f", arguments="{}", **extra):
    return {**extra, "function": {"name": name, "arguments": arguments}}


def test_content_string_null_and_text_parts():
    row = convert(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}, "c"],
                },
                turn(content=None, tool_calls=[call()]),
                {"role": "tool", "content": None},
                turn(content=[{"type": "output_text", "text": "done"}]),
            ]
        }
    )
    assert row["messages"][0] == {"role": "user", "content": "abc"}
    assert row["messages"][2]["content"] == ""
    assert row["messages"][3]["content"] == "done"


@pytest.mark.parametrize(
    "part",
    [
        {"type": "image_url", "image_url": {"url": "x"}},
        {"type": "video", "video": "v.mp4"},
        {"type": "input_audio", "input_audio": {}},
    ],
)
def test_a_non_text_part_is_a_rejection_not_a_silent_drop(part):
    result = convert(
        {"messages": [{"role": "user", "content": [part, {"type": "text", "text": "hi"}]}, turn(content="x")]}
    )
    assert code(result) == "non_text_content"


def test_reasoning_parts_only_on_assistant_turns():
    user = {"role": "user", "content": [{"type": "reasoning", "text": "x"}]}
    assert code(convert({"messages": [user, turn(content="y")]})) == "non_text_content"


@pytest.mark.parametrize("arguments", ['{"city": "Paris"}', {"city": "Paris"}, '"{\\"city\\": \\"Paris\\"}"'])
def test_arguments_as_json_string_dict_or_double_encoded(arguments):
    row = convert({"messages": [{"role": "user", "content": "q"}, turn(tool_calls=[call("w", arguments)])]})
    assert row["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}


def test_calls_without_id_or_type_get_ids_in_row_order():
    row = convert(
        {
            "messages": [
                {"role": "user", "content": "q"},
                turn(
                    tool_calls=[
                        call("a"),
                        {"id": "mine", "type": "function", "function": {"name": "b", "arguments": {}}},
                    ]
                ),
                {"role": "tool", "content": "1"},
                {"role": "tool", "content": "2"},
                turn(tool_calls=[{"name": "c", "arguments": {}}]),
            ]
        }
    )
    ids = [c["id"] for m in row["messages"] for c in m.get("tool_calls", [])]
    assert ids == ["call_0", "mine", "call_2"]
    assert row["messages"][2] == {"role": "tool", "tool_call_id": "call_0", "name": "a", "content": "1"}
    assert row["messages"][3] == {"role": "tool", "tool_call_id": "mine", "name": "b", "content": "2"}


@pytest.mark.parametrize(
    "arguments, expected",
    [
        ("l.remove(3.6)", "invalid_json"),
        ("[1, 2]", "arguments_not_object"),
        (5, "arguments_not_object"),
    ],
)
def test_unreadable_arguments(arguments, expected):
    result = convert(
        {"messages": [{"role": "user", "content": "q"}, turn(tool_calls=[call("f", arguments)])]}
    )
    assert code(result) == expected


def test_empty_or_missing_arguments_are_an_empty_object():
    row = convert(
        {
            "messages": [
                {"role": "user", "content": "q"},
                turn(tool_calls=[call("f", ""), {"function": {"name": "g"}}]),
            ]
        }
    )
    assert [c["function"]["arguments"] for c in row["messages"][1]["tool_calls"]] == [{}, {}]


@pytest.mark.parametrize(
    "raw_call",
    [
        {"id": "c1", "name": "f", "args": {"a": 1}},  # Gemini's key
        {"id": "c1", "name": "f", "input": {"a": 1}},  # Anthropic's / the AI SDK's key
        {"id": "c1", "function": {"name": "f", "parameters": {"a": 1}}},  # Llama's key, nested
        {"id": "c1", "function": {"name": "f", "args": '{"a": 1}'}},
    ],
)
def test_arguments_under_another_key_are_read_never_dropped(raw_call):
    # they were read as no arguments at all: the call trained as f({}), the values lost unsaid
    row = convert({"messages": [{"role": "user", "content": "q"}, turn(tool_calls=[raw_call])]})
    assert row["messages"][1]["tool_calls"][0]["function"] == {"name": "f", "arguments": {"a": 1}}


def test_arguments_written_twice_differently_are_refused_not_one_picked():
    both = {"function": {"name": "f", "arguments": '{"a": 1}', "input": {"a": 2}}}
    assert code(convert({"messages": [{"role": "user", "content": "q"}, turn(tool_calls=[both])]})) == \
        "malformed_tool_call"
    same = {"name": "f", "arguments": {"a": 1}, "parameters": {"a": 1}}
    row = convert({"messages": [{"role": "user", "content": "q"}, turn(tool_calls=[same])]})
    assert row["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"a": 1}


def test_legacy_functions_function_call_and_function_role():
    row = convert(
        {
            "functions": [{"name": "price", "parameters": {"type": "object"}}],
            "messages": [
                {"role": "user", "content": "q"},
                turn(content=None, function_call={"name": "price", "arguments": '{\n  "car": "Song"\n}'}),
                {"role": "function", "name": "price", "content": "$1"},
                turn(content="It costs $1."),
            ],
        },
        require_declared_tools=True,
    )
    assert row["tools"] == [
        {"type": "function", "function": {"name": "price", "parameters": {"type": "object"}}}
    ]
    assert row["messages"][1]["tool_calls"] == [
        {"id": "call_0", "type": "function", "function": {"name": "price", "arguments": {"car": "Song"}}}
    ]
    assert row["messages"][2] == {"role": "tool", "tool_call_id": "call_0", "name": "price", "content": "$1"}


def test_both_tool_calls_and_function_call_conflict():
    msg = turn(tool_calls=[call("a")], function_call={"name": "b", "arguments": "{}"})
    assert code(convert({"messages": [{"role": "user", "content": "q"}, msg]})) == "conflicting_tool_calls"


def test_tool_results_by_id_by_name_and_one_id_lists():
    row = convert(
        {
            "messages": [
                {"role": "user", "content": "q"},
                turn(tool_calls=[call("a", id="x1"), call("b", id="x2")]),
                {"role": "tool", "tool_call_ids": ["x1"], "content": "1"},
                {"role": "tool", "name": "b", "content": "2"},
                turn(content="ok"),
            ]
        }
    )
    assert row["messages"][2] == {"role": "tool", "tool_call_id": "x1", "content": "1"}
    assert row["messages"][3] == {"role": "tool", "name": "b", "content": "2"}


def test_one_message_answering_several_calls_is_rejected():
    result = convert(
        {
            "messages": [
                {"role": "user", "content": "q"},
                turn(tool_calls=[call("a", id="x"), call("b", id="y")]),
                {"role": "tool", "tool_call_ids": ["x", "y"], "content": "both"},
            ]
        }
    )
    assert code(result) == "tool_result_unmatched"


def test_reused_ids_are_resolved_by_position():
    # mistral-common: two parallel calls with the same id, two results with that id
    row = convert(
        {
            "messages": [
                {"role": "user", "content": "q"},
                turn(tool_calls=[call("a", id="123"), call("b", id="123")]),
                {"role": "tool", "tool_call_id": "123", "content": "A"},
                {"role": "tool", "tool_call_id": "123", "content": "B"},
                turn(content="done"),
            ]
        }
    )
    # the template would resolve both ids to the last call ("b"): the first result is named "a"
    assert row["messages"][2] == {"role": "tool", "tool_call_id": "123", "name": "a", "content": "A"}
    assert row["messages"][3] == {"role": "tool", "tool_call_id": "123", "content": "B"}


def test_tools_at_row_level_and_on_the_system_message_merge():
    t = lambda n: {"type": "function", "function": {"name": n}}  # noqa: E731
    row = convert(
        {
            "tools": [t("a")],
            "messages": [
                {"role": "system", "content": "s", "tools": [t("a"), t("b")]},
                {"role": "user", "content": "q"},
                turn(content="x"),
            ],
        }
    )
    assert [x["function"]["name"] for x in row["tools"]] == ["a", "b"]


def test_non_function_tool_is_rejected():
    result = convert(
        {
            "tools": [{"type": "code_interpreter"}],
            "messages": [{"role": "user", "content": "q"}, turn(content="x")],
        }
    )
    assert code(result) == "bad_tool_definition"


@pytest.mark.parametrize(
    "flags, weight",
    [
        ({"weight": 0}, 0),
        ({"weight": 1.0}, 1),
        ({"loss": False}, 0),
        ({"train": True}, 1),
        ({"train": False, "loss": False}, 0),
    ],
)
def test_loss_flags_become_weight(flags, weight):
    row = convert(
        {"messages": [{"role": "user", "content": "q", "train": False}, turn(content="x", **flags)]}
    )
    assert row["messages"][1]["weight"] == weight
    assert "weight" not in row["messages"][0]


@pytest.mark.parametrize("flags", [{"weight": 0.5}, {"weight": 1, "loss": False}, {"train": "yes"}])
def test_bad_loss_flags(flags):
    assert (
        code(convert({"messages": [{"role": "user", "content": "q"}, turn(content="x", **flags)]}))
        == "bad_weight"
    )


def test_unknown_extra_keys_are_ignored():
    row = convert(
        {
            "id": 3,
            "metadata": {"a": 1},
            "messages": [
                {"role": "user", "content": "q", "metainfo": {"img": "x"}},
                turn(content="x", cache_control={"type": "e"}),
            ],
        }
    )
    assert row == {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "reasoning_content": "r", "content": "x"},
        ]
    }


def test_unknown_role_and_malformed_rows():
    assert code(convert({"messages": [{"role": "narrator", "content": "x"}]})) == "unknown_role"
    assert code(convert({"messages": [{"content": "x"}]})) == "malformed_row"
    assert code(convert({"messages": "hello"})) == "malformed_row"
    assert code(convert("just text")) == "malformed_row"
    assert code(convert({"messages": []})) == "malformed_row"


def test_a_bare_list_and_a_role_content_conversations_column_are_conversations():
    messages = [{"role": "user", "content": "q"}, turn(content="x")]
    assert convert(messages) == convert({"messages": messages}) == convert({"conversations": messages})


def test_qwen3_coder_function_calls_string():
    xml = "<tool_call>\n<function=search>\n<parameter=num>5</parameter>\n<parameter=q>\nmulti\nline\n</parameter>\n</function>\n</tool_call>"
    alone = convert({"messages": [{"role": "user", "content": "q"}, turn(function_calls=xml)]})
    assert alone["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"num": "5", "q": "multi\nline"}
    structured = call("search", {"num": 5, "q": "multi\nline"}, id="c")
    both = convert(
        {"messages": [{"role": "user", "content": "q"}, turn(function_calls=xml, tool_calls=[structured])]}
    )
    assert both["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"num": 5, "q": "multi\nline"}
    other = call("search", {"num": 6, "q": "multi\nline"}, id="c")
    differ = convert(
        {"messages": [{"role": "user", "content": "q"}, turn(function_calls=xml, tool_calls=[other])]}
    )
    assert code(differ) == "conflicting_tool_calls"


def test_a_parameter_twice_in_a_qwen3_coder_call_is_duplicate_key_wherever_it_comes():
    twice = "<tool_call><function=f><parameter=a>1</parameter><parameter=a>2</parameter></function></tool_call>"
    assert code(convert({"messages": [{"role": "user", "content": "q"}, turn(function_calls=twice)]})) == "duplicate_key"
    from beam_sft.convert.hermes import convert_hermes

    hermes = convert_hermes({"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": twice}]},
                            options=LOOSE)
    assert code(hermes) == "duplicate_key"


def test_one_tool_declared_in_two_places_with_other_parameters_is_rejected():
    """Which schema the calls were made against cannot be told: not the first one kept silently."""
    def fn(param):
        return {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {param: {"type": "string"}}}}

    messages = [{"role": "user", "content": "q"}, turn(content="x")]
    both = convert({"messages": messages, "tools": [{"type": "function", "function": fn("a")}], "functions": [fn("b")]})
    assert code(both) == "bad_tool_definition" and "different parameters" in both.message
    in_system = convert({"messages": [{"role": "system", "content": "s", "tools": [{"type": "function", "function": fn("b")}]},
                                      *messages], "tools": [{"type": "function", "function": fn("a")}]})
    assert code(in_system) == "bad_tool_definition"
    # the same tool in both places, worded alike or not, is one tool: the first place's wording kept
    same = convert({"messages": messages, "tools": [{"type": "function", "function": fn("a")}],
                    "functions": [{**fn("a"), "description": "other words"}]})
    assert [t["function"]["description"] for t in same["tools"]] == ["d"]


def test_toolbench_train_messages_take_the_longest_prefix_chain():
    a = [{"role": "user", "content": "q"}]
    b = a + [turn(content="x")]
    nested = {"answer_generation": {"train_messages": [a, b], "function": [{"name": "Finish"}]}}
    row = convert(nested)
    assert row["messages"] == convert({"messages": b})["messages"]
    assert row["tools"][0]["function"]["name"] == "Finish"
    broken = {
        "answer_generation": {
            "train_messages": [a, [{"role": "user", "content": "other"}, turn(content="x")]]
        }
    }
    assert code(convert(broken)) == "ambiguous_conversation"


def test_llama_factory_v1_parts_and_result_lists():
    row = convert(
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "value": "two areas"}]},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "reasoning", "value": "call twice"},
                        {"type": "tool_call", "value": '{"name": "area", "arguments": {"r": 1}}'},
                        {"type": "tool_call", "value": '{"name": "area", "arguments": {"r": 2}}'},
                    ],
                },
                {
                    "role": "tool",
                    "content": [
                        {
                            "type": "text",
                            "value": '[{"tool_call_id": "call_x", "name": "area", "content": "3.14"}, {"name": "area", "content": {"a": 12.6}}]',
                        }
                    ],
                },
            ]
        }
    )
    assert row["messages"][1]["reasoning_content"] == "call twice"
    assert row["messages"][2:] == [
        {"role": "tool", "tool_call_id": "call_0", "name": "area", "content": "3.14"},
        {"role": "tool", "tool_call_id": "call_1", "name": "area", "content": '{"a": 12.6}'},
    ]


def test_text_beside_calls_goes_to_the_reasoning_or_rejects():
    row = {"messages": [{"role": "user", "content": "q"}, turn(content="Let me check.", tool_calls=[call()])]}
    assert convert(row)["messages"][1]["reasoning_content"] == "r\n\nLet me check."
    assert (
        code(convert(row, tool_call_content="reject", require_declared_tools=False))
        == "content_with_tool_calls"
    )
    bare = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "I'll look.", "tool_calls": [call()]},
        ]
    }
    assert convert(bare)["messages"][1]["reasoning_content"] == "I'll look."


def test_template_kwargs_are_carried():
    row = convert(
        {"reasoning_effort": "high", "messages": [{"role": "user", "content": "q"}, turn(content="x")]}
    )
    assert row["chat_template_kwargs"] == {"reasoning_effort": "high"}
    row = convert(
        {
            "chat_template_kwargs": {"reasoning_effort": 100, "builtin_tools": ["search"]},
            "reasoning_effort": 100,
            "messages": [{"role": "user", "content": "q"}, turn(content="x")],
        }
    )
    assert row["chat_template_kwargs"] == {"reasoning_effort": 100, "builtin_tools": ["search"]}


def test_null_filled_keys_from_datasets_are_absent():
    # open-instruct terminal.json: every key on every message, null where unused
    row = convert(
        {
            "messages": [
                {
                    "role": "user",
                    "content": "q",
                    "tool_calls": None,
                    "tool_call_ids": None,
                    "reasoning_content": None,
                },
                {
                    "role": "assistant",
                    "content": "<think>r</think>x",
                    "tool_calls": None,
                    "reasoning_content": None,
                    "tool_call_ids": None,
                },
            ]
        }
    )
    assert row["messages"][1] == {"role": "assistant", "reasoning_content": "r", "content": "x"}


def test_a_participants_name_is_dropped_and_counted_not_lost_unsaid():
    from beam_sft.convert import convert_row

    row = convert_row({"messages": [{"role": "system", "content": "s", "name": "example_user"},
                                    {"role": "user", "name": "alice", "content": "I vote A"},
                                    {"role": "user", "name": "bob", "content": "I vote B"},
                                    turn(content="Tie.", name="judge")]}, format="openai", options=LOOSE)
    assert row["meta"]["notes"] == {"name_dropped": 4}
    assert all("name" not in m for m in row["messages"])


@pytest.mark.parametrize(("role", "weight", "expected"), [
    ("user", 0, None), ("user", 1, "bad_weight"), ("user", 7, "bad_weight"), ("system", True, "bad_weight"),
    ("tool", 1, "bad_weight"), ("tool", "yes", "bad_weight"), ("tool", 0, None),
])
def test_a_loss_weight_on_a_message_that_is_never_trained(role, weight, expected):
    messages = [{"role": "user", "content": "q"}, turn(tool_calls=[call("f", "{}", id="c")]),
                {"role": "tool", "tool_call_id": "c", "content": "r"}, turn(content="a")]
    target = {"user": 0, "tool": 2, "system": None}[role]
    if target is None:
        messages.insert(0, {"role": "system", "content": "s", "weight": weight})
    else:
        messages[target] = {**messages[target], "weight": weight}
    assert code(convert({"messages": messages})) == expected


@pytest.mark.parametrize("key", ["image_url", "input_audio", "file"])
def test_a_text_part_that_also_carries_media_is_not_text_only(key):
    part = {"type": "text", "text": "look", key: {"url": "data:..."}}
    assert code(convert({"messages": [{"role": "user", "content": [part]}, turn(content="ok")]})) == "non_text_content"


def test_trls_conversational_prompt_completion_rows():
    """TRL's prompt-completion format (``prompt`` and ``completion``, each a message list) was rejected
    as two conversations; as in TRL only the completion trains: the prompt's assistant turns are context."""
    from beam_sft.convert import ConvertOptions, convert_row

    raw = {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
                      {"role": "assistant", "content": "4"}, {"role": "user", "content": "and 3+3?"}],
           "completion": [{"role": "assistant", "reasoning_content": "Add.", "content": "6"}]}
    for fmt in ("openai", "auto"):
        row = convert_row(raw, format=fmt, options=ConvertOptions())
        assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant", "user", "assistant"]
        assert row["messages"][2] == {"role": "assistant", "content": "4", "weight": 0}
        assert row["messages"][4] == {"role": "assistant", "reasoning_content": "Add.", "content": "6"}
        assert row["meta"]["notes"] == {"messages_key:prompt+completion": 1}


def test_a_flat_row_with_unmapped_columns_is_told_how_to_map_them():
    # The message pointed only at a message list under another key, where the row is flat text columns
    # (prompt/completion, question/response): the mapping that reads it was never named.
    for raw in ({"prompt": "2+2?", "completion": "4"}, {"question": "q", "response": "a", "reasoning": "r"}):
        result = convert(raw)
        assert code(result) == "malformed_row"
        assert "--columns prompt=COLUMN answer=COLUMN" in result.message
    assert "prompt=COLUMN" not in convert({"id": "x", "turns": 3}).message


def test_an_openai_refusal_is_the_turns_answer():
    # content null beside a refusal (OpenAI's chat completions): the turn was rejected as
    # empty_assistant, "neither an answer nor a tool call", its answer never read
    from beam_sft.convert.pipeline import convert_row

    refused = turn(content=None, refusal="I can't help with that.")
    row = convert({"messages": [{"role": "user", "content": "q"}, refused]})
    assert row["messages"][1] == {"role": "assistant", "reasoning_content": "r", "content": "I can't help with that."}
    log = {"request": {"messages": [{"role": "user", "content": "q"}]},
           "response": {"choices": [{"message": {**refused, "tool_calls": None}, "finish_reason": "stop"}]}}
    assert convert_row(log, format="chat_log", options=LOOSE)["messages"][1]["content"] == "I can't help with that."
    answered = convert({"messages": [{"role": "user", "content": "q"}, turn(content="Sure.", refusal=None)]})
    assert answered["messages"][1]["content"] == "Sure."


def test_a_reasoning_effort_given_twice_differently_is_refused_not_one_picked():
    # chat_template_kwargs' value won without a word
    base = {"messages": [{"role": "user", "content": "q"}, turn(content="a")]}
    assert code(convert({**base, "reasoning_effort": "low",
                         "chat_template_kwargs": {"reasoning_effort": "high"}})) == "conflicting_template_kwargs"
    same = convert({**base, "reasoning_effort": "low", "chat_template_kwargs": {"reasoning_effort": "low"}})
    assert same["chat_template_kwargs"] == {"reasoning_effort": "low"}
    assert convert({**base, "reasoning_effort": "low"})["chat_template_kwargs"] == {"reasoning_effort": "low"}


# NVIDIA's Llama-Nemotron-Post-Training-Dataset writes a row as `input` (the messages) and `output`
# (the answer, with its <think> block), beside `reasoning: "on"` and `system_prompt` (layout of its
# SFT split, text shortened). Before, `input` was read as the conversation and `output` dropped unsaid:
# a prompt with no answer, or, where `input` held an earlier assistant turn, a kept row without its answer.
NEMOTRON = {"input": [{"role": "user", "content": "What is 2+2?"}],
            "output": "<think>\nAdd them.\n</think>\n\n4", "category": "math", "reasoning": "on",
            "system_prompt": "detailed thinking on"}


def test_a_conversation_with_its_answer_in_the_partner_column_ends_with_that_answer():
    row = convert_openai(NEMOTRON, options=ConvertOptions())
    assert row["messages"] == [{"role": "user", "content": "What is 2+2?"},
                               {"role": "assistant", "reasoning_content": "Add them.", "content": "4"}]
    assert row["meta"]["notes"] == {"messages_key:input+output": 1}
    row = convert_openai({"prompt": [{"role": "user", "content": "q"}], "response": "<think>r</think>a"},
                         options=ConvertOptions())
    assert row["messages"][-1] == {"role": "assistant", "reasoning_content": "r", "content": "a"}
    assert row["meta"]["notes"] == {"messages_key:prompt+response": 1}


@pytest.mark.parametrize(("row", "words"), [
    ({**NEMOTRON, "output": {"text": "4"}}, "output: the answer to the conversation under 'input' is a dict"),
    ({**NEMOTRON, "input": [*NEMOTRON["input"], {"role": "Assistant", "content": "<think>a</think>4"}]},
     "input[1] is an assistant turn and 'output' holds another answer"),
    ({"prompt": [{"role": "user", "content": "q"}], "completion": "a", "response": "b"},
     "has two answer columns, 'completion' and 'response'"),
])
def test_an_answer_column_that_cannot_follow_the_conversation_is_refused(row, words):
    found = convert_openai(row, options=ConvertOptions())
    assert isinstance(found, Rejection) and found.code == "malformed_row" and words in found.message


def test_an_answer_column_is_named_when_its_text_is_refused():
    found = convert_openai({**NEMOTRON, "output": "<think>a</think>4 and </think>"}, options=ConvertOptions())
    assert isinstance(found, Rejection) and found.message.startswith("output")


def test_cohere_chatbot_is_the_assistant():
    row = convert_openai({"messages": [{"role": "System", "content": "s"}, {"role": "User", "content": "q"},
                                       {"role": "Chatbot", "content": "<think>r</think>a"}]}, options=ConvertOptions())
    assert row["messages"][-1] == {"role": "assistant", "reasoning_content": "r", "content": "a"}


def test_openassistant_prompter_and_an_ai_speaker_are_read():
    """OpenAssistant's oasst1/oasst2 conversations name the user ``prompter``; some exports name the
    assistant ``ai``: both were unknown_role (the row rejected whole)."""
    row = convert_openai({"messages": [{"role": "prompter", "content": "q"},
                                       {"role": "assistant", "content": "<think>r</think>a"},
                                       {"role": "Prompter", "content": "q2"}, {"role": "AI", "content": "<think>s</think>b"}]},
                         options=ConvertOptions())
    assert [m["role"] for m in row["messages"]] == ["user", "assistant", "user", "assistant"]
    assert row["messages"][3] == {"role": "assistant", "reasoning_content": "s", "content": "b"}


def test_an_assistant_refusal_part_is_its_answer_as_the_refusal_field_is():
    """OpenAI's assistant content may be parts of type text or refusal (a logged request's history):
    a refusal part was non_text_content, while the same words in the `refusal` field were the answer."""
    row = convert_openai({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "reasoning_content": "r",
                                        "content": [{"type": "refusal", "refusal": "I can't help with that."}]}]},
                         options=ConvertOptions())
    assert row["messages"][1]["content"] == "I can't help with that."
    for part, code in (({"type": "refusal", "refusal": None}, "malformed_row"),
                       ({"type": "refusal", "refusal": "no"}, "non_text_content")):  # the second: on a user message
        role = "assistant" if code == "malformed_row" else "user"
        found = convert_openai({"messages": [{"role": role, "content": [part]}, {"role": "assistant", "content": "a"}]}
                               if role == "user" else
                               {"messages": [{"role": "user", "content": "q"}, {"role": role, "content": [part]}]},
                               options=ConvertOptions())
        assert isinstance(found, Rejection) and found.code == code, found


@pytest.mark.parametrize(("content", "text"), [
    ({"time": "12:00", "zone": "Zürich"}, '{"time": "12:00", "zone": "Zürich"}'),
    ([{"id": 1}, {"id": 2}], '[{"id": 1}, {"id": 2}]'),
    (12, "12"),
    (True, "true"),
    ([{"type": "text", "text": "12:00"}], "12:00"),  # content parts stay parts
])
def test_a_structured_tool_result_is_its_json_text(content, text):
    """An agent log's tool message holding the tool's object was malformed_row ("content is a dict"),
    while Gemini's functionResponse, Bedrock's json blocks and result envelopes were written as JSON text."""
    row = convert_openai({"messages": [
        {"role": "user", "content": "Time?"},
        {"role": "assistant", "reasoning_content": "r", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "now", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": content},
        {"role": "assistant", "reasoning_content": "r", "content": "Noon."}],
        "tools": [{"type": "function", "function": {"name": "now"}}]}, options=ConvertOptions())
    assert row["messages"][2]["content"] == text


def test_a_structured_tool_result_json_cannot_write_is_refused():
    import datetime

    row = {"messages": [{"role": "user", "content": "q"},
                        {"role": "assistant", "reasoning_content": "r", "tool_calls": [
                            {"id": "a", "type": "function", "function": {"name": "now", "arguments": "{}"}}]},
                        {"role": "tool", "tool_call_id": "a", "content": {"at": datetime.date(2026, 1, 1)}}]}
    found = convert_openai(row, options=ConvertOptions())
    assert isinstance(found, Rejection) and found.code == "malformed_row" and "messages[2].content" in found.message


def _details_row(details, **fields):
    return {"messages": [{"role": "user", "content": "2+2?"},
                         {"role": "assistant", "content": "4", "reasoning_details": details, **fields}]}


@pytest.mark.parametrize(("details", "reasoning"), [
    ([{"type": "reasoning.text", "text": "Add ", "signature": "s", "index": 0},
      {"type": "reasoning.text", "text": "them.", "index": 1}], "Add them."),
    ([{"type": "reasoning.summary", "summary": "Added."}, {"type": "reasoning.encrypted", "data": "gAAA"}], "Added."),
])
def test_openrouter_reasoning_details_are_the_reasoning(details, reasoning):
    """OpenRouter logs a message's reasoning in `reasoning_details` (and sometimes also `reasoning`):
    alone, the row was missing_reasoning, its reasoning unread."""
    row = convert_openai(_details_row(details), options=ConvertOptions())
    assert row["messages"][1]["reasoning_content"] == reasoning
    # beside a reasoning field, the field is read (the details are its structured form)
    row = convert_openai(_details_row(details, reasoning="Sum."), options=ConvertOptions())
    assert row["messages"][1]["reasoning_content"] == "Sum."


@pytest.mark.parametrize(("details", "code"), [
    ([{"type": "reasoning.encrypted", "data": "gAAA"}], "missing_reasoning"),  # encrypted only: none to read
    ([{"type": "reasoning.text", "text": "a"}, {"type": "reasoning.encrypted", "data": "x"}], "non_text_content"),
    ([{"type": "reasoning.other", "text": "a"}], "malformed_row"),
    ([{"type": "reasoning.text", "text": 4}], "malformed_row"),
    ("Add.", "malformed_row"),
])
def test_openrouter_reasoning_details_that_cannot_be_read_are_refused(details, code):
    from beam_sft.convert import convert_row

    found = convert_row(_details_row(details), format="openai", options=ConvertOptions())
    assert isinstance(found, Rejection) and found.code == code, found
