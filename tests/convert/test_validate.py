"""Each Beam rule rejects with its own reason code, and the code table is complete."""

from __future__ import annotations

import copy

import pytest

from beam_sft.convert import ConvertOptions, convert_row, validate

OPTIONS = ConvertOptions()
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


def call(call_id="c1", name="f", **arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def base() -> dict:
    return {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Go."},
            {
                "role": "assistant",
                "reasoning_content": "Call f twice.",
                "tool_calls": [call("c1", x=1), call("c2", x=2)],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "one"},
            {"role": "tool", "tool_call_id": "c2", "name": "f", "content": "two"},
            {"role": "assistant", "reasoning_content": "Done.", "content": "1 and 2."},
        ],
        "tools": [copy.deepcopy(TOOL)],
        "chat_template_kwargs": {"reasoning_effort": "high"},
    }


def code_after(change) -> str | None:
    row = base()
    change(row)
    problem = validate(row, options=OPTIONS)
    return problem.code if problem else None


def test_the_base_row_is_valid():
    assert validate(base(), options=OPTIONS) is None


def test_a_user_message_with_a_harmony_marker_has_its_own_code():
    def change(r):
        r["messages"][1]["content"] = "Please print <|end|> for me."

    assert code_after(change) == "harmony_marker_in_text"
    # through the whole pipeline, from a raw OpenAI row
    raw = {
        "messages": [
            {"role": "user", "content": "x <|end|> y"},
            {"role": "assistant", "reasoning_content": "r", "content": "ok"},
        ]
    }
    result = convert_row(raw, format="openai", options=OPTIONS, source="s.jsonl", row=7)
    assert (result.code, result.row, result.raw) == ("harmony_marker_in_text", 7, raw)


def test_an_argument_with_the_parameter_delimiter_has_its_own_code():
    def change(r):
        r["messages"][2]["tool_calls"][0]["function"]["arguments"] = {"x": "a</rfl:parameter>b"}

    assert code_after(change) == "param_delimiter_in_argument"

    def nested(r):
        r["messages"][2]["tool_calls"][0]["function"]["arguments"] = {"x": {"deep": ["</rfl:parameter>"]}}

    assert code_after(nested) == "param_delimiter_in_argument"


@pytest.mark.parametrize(
    "where",
    [
        lambda r: r["messages"][2].__setitem__("reasoning_content", "think <|channel|>"),
        lambda r: r["messages"][3].__setitem__("content", "<|return|>"),
        lambda r: r["messages"][2]["tool_calls"][0]["function"]["arguments"].__setitem__("x", ["<|call|>"]),
        lambda r: r["tools"][0]["function"].__setitem__("description", "<|start|>"),
        lambda r: r["chat_template_kwargs"].__setitem__("model_identity", "I am <|message|>"),
        lambda r: r["messages"][0].__setitem__("content", "<|constrain|>"),
    ],
)
def test_markers_anywhere_rendered(where):
    assert code_after(where) == "harmony_marker_in_text"


def test_markers_in_ids_and_meta_do_not_render():
    def change(r):
        r["meta"] = {"source": "<|end|>", "row": 0}

    assert code_after(change) is None


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda r: r["messages"].insert(3, {"role": "system", "content": "late"}), "system_not_leading"),
        (lambda r: r["messages"].append({"role": "developer", "content": "late"}), "system_not_leading"),
        (lambda r: r["messages"][3].__setitem__("tool_call_id", "zzz"), "tool_result_unmatched"),
        (lambda r: r["messages"][3].__setitem__("tool_call_id", "c2"), "tool_result_order"),
        (lambda r: r["messages"][4].__setitem__("name", "g"), "tool_result_unmatched"),
        (
            lambda r: r["messages"].insert(2, {"role": "tool", "name": "f", "content": "early"}),
            "tool_result_unmatched",
        ),
        (lambda r: r["messages"][3].pop("tool_call_id"), "tool_result_unmatched"),
        (lambda r: r["messages"].pop(4), "tool_call_unanswered"),
        (
            lambda r: r["messages"][2]["tool_calls"][0]["function"].__setitem__("arguments", '{"x": 1}'),
            "arguments_not_object",
        ),
        (
            lambda r: r["messages"][2]["tool_calls"][0]["function"]["arguments"].__setitem__('a"b', 1),
            "bad_argument_name",
        ),
        (
            lambda r: r["messages"][2]["tool_calls"][0]["function"].__setitem__("name", "two words"),
            "bad_tool_name",
        ),
        (lambda r: r["messages"][5].__setitem__("tool_calls", [call("c9")]), "content_with_tool_calls"),
        (lambda r: r["messages"][5].__setitem__("content", "  "), "empty_assistant"),
        (lambda r: r["chat_template_kwargs"].__setitem__("reasoning_effort", "none"), "bad_reasoning_effort"),
        (lambda r: r["chat_template_kwargs"].__setitem__("reasoning_effort", True), "bad_reasoning_effort"),
        (lambda r: r["chat_template_kwargs"].__setitem__("builtin_tools", "search"), "bad_template_kwargs"),
        (
            lambda r: r.__setitem__("tools", [{"type": "function", "function": {"name": "g"}}]),
            "undeclared_tool",
        ),
        (lambda r: r["messages"][5].pop("reasoning_content"), "missing_reasoning"),
        (
            lambda r: [m.__setitem__("weight", 0) for m in r["messages"] if m["role"] == "assistant"],
            "no_trained_turn",
        ),
        (lambda r: r["messages"][5].__setitem__("weight", 2), "bad_weight"),
        (lambda r: r["messages"][1].__setitem__("content", None), "malformed_row"),
        (lambda r: r.__setitem__("tools", [{"type": "code_interpreter"}]), "bad_tool_definition"),
    ],
)
def test_each_rule_has_its_code(change, expected):
    assert code_after(change) == expected


def test_a_conversation_may_end_on_a_call_or_part_way_through_its_results():
    assert code_after(lambda r: r["messages"].__delitem__(slice(3, None))) is None
    assert code_after(lambda r: r["messages"].__delitem__(slice(4, None))) is None


def test_integer_efforts_and_labels_are_fine():
    for effort in (8, 100, "minimal", "max", None):
        assert (
            code_after(lambda r, e=effort: r["chat_template_kwargs"].__setitem__("reasoning_effort", e))
            is None
        )


def test_undeclared_tools_can_be_allowed():
    row = base()
    del row["tools"]
    assert validate(row, options=OPTIONS).code == "undeclared_tool"
    assert validate(row, options=ConvertOptions(require_declared_tools=False)) is None


def test_validate_does_not_modify_the_row():
    row = base()
    before = copy.deepcopy(row)
    validate(row, options=OPTIONS)
    assert row == before


@pytest.mark.parametrize("schema, place", [
    ({"type": "object", "properties": {"x": {"type": {"type": "string"}}}}, "tools[0].function.parameters.properties.x.type"),
    ({"type": "object", "properties": {"x": {"type": ["number", {}]}}}, "parameters.properties.x.type"),
    ({"type": "object", "properties": {"x": {"type": "integer"}}, "required": True}, "parameters.required"),
    ({"type": "object", "properties": {"x": {"type": "integer"}}, "required": "x"}, "parameters.required"),
    ({"type": "object", "properties": [{"type": "integer"}]}, "parameters.properties"),
    ({"type": "object", "properties": {"x": {"type": "array", "items": {"type": 1}}}}, "x.items.type"),
    ({"anyOf": [{"type": "object", "required": {}}]}, "parameters.anyOf[0].required"),
])
def test_a_schema_the_template_cannot_read_is_a_bad_tool_definition(schema, place):
    # found by test_reader_fuzz: a dict "type" crashed _typed_numbers (unhashable), "required": true
    # or a list of properties stopped the template; a schema's shape is now a rule with a place
    problem = validate({**base(), "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]},
                       options=OPTIONS)
    assert problem is not None and problem.code == "bad_tool_definition" and place in problem.message, problem
    raw = {"messages": base()["messages"][1:], "tools": [{"type": "function", "function": {"name": "f",
                                                                                         "parameters": schema}}]}
    assert convert_row(raw, format="openai", options=OPTIONS).code == "bad_tool_definition"


def test_a_schema_nested_past_the_bound_is_a_bad_tool_definition_not_a_crash(render_beam):
    """5,000 nested `items` made a converter_error (RecursionError in the schema's walk): refused by
    its depth in the reader (tools.normalize_schema) and in validate for a row built otherwise; a schema
    at the bound is kept and renders."""
    from beam_sft.convert.tools import MAX_SCHEMA_DEPTH

    def row(depth):
        schema = {"type": "string"}
        for _ in range(depth - 2):
            schema = {"type": "array", "items": schema}
        return {"messages": [{"role": "user", "content": "q"},
                             {"role": "assistant", "reasoning_content": "r", "content": "a"}],
                "tools": [{"type": "function", "function": {"name": "f", "parameters": {
                    "type": "object", "properties": {"x": schema}}}}]}

    for deep in (MAX_SCHEMA_DEPTH + 1, 5000):
        result = convert_row(row(deep), format="openai", options=ConvertOptions())
        assert result.code == "bad_tool_definition" and f"past {MAX_SCHEMA_DEPTH} deep" in result.message
        assert validate(row(deep), options=ConvertOptions()).code == "bad_tool_definition"
    kept = convert_row(row(MAX_SCHEMA_DEPTH), format="openai", options=ConvertOptions())
    assert "meta" in kept, kept
    # the template walks it too: x is a string in 62 nested arrays
    assert "x?: string" + "[]" * (MAX_SCHEMA_DEPTH - 2) + "," in render_beam(kept["messages"], tools=kept["tools"])
