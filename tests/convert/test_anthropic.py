"""The anthropic reader on rows shaped as Anthropic's Messages API writes them (a system prompt,
thinking blocks with signatures, tool_use and tool_result blocks, tools with input_schema, request
settings beside them): the same BeamRow the OpenAI reader makes of the same conversation, each quirk
rejected with a code naming its block, and a logged messages.create call read as a chat_log row."""

from __future__ import annotations

import copy

import pytest

from beam_sft.convert import convert_row
from beam_sft.convert.anthropic import convert_anthropic
from beam_sft.convert.chat_log import convert_chat_log
from beam_sft.convert.detect import classify
from beam_sft.convert.openai import convert_openai
from beam_sft.convert.options import ColumnMap, ConvertOptions
from tests.convert.readers_util import codes, run_source, write_jsonl

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
ROW = {
    "model": "claude-sonnet-4-5", "max_tokens": 2048, "tool_choice": {"type": "auto"},
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "system": "You are helpful.",
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Use the tool.", "signature": "abc"},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Report.", "signature": "def"},
            {"type": "text", "text": "It is 18 C."}]}],
    "tools": [{"name": "get_weather", "description": "Get weather", "input_schema": SCHEMA}]}
# The same conversation as an OpenAI chat row.
OPENAI = {"tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get weather",
                                                      "parameters": SCHEMA}}],
          "messages": [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "reasoning_content": "Use the tool.", "tool_calls": [
        {"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "18 C"},
    {"role": "assistant", "reasoning_content": "Report.", "content": "It is 18 C."}]}


def test_a_claude_trace_is_the_row_the_openai_reader_makes():
    row = convert_anthropic(ROW, options=ConvertOptions())
    assert row == convert_openai(OPENAI, options=ConvertOptions())
    # system blocks (cache_control ignored) read as the system string; a string content as its text
    blocks = {**ROW, "system": [{"type": "text", "text": "You are helpful.", "cache_control": {"type": "ephemeral"}}]}
    blocks["messages"] = [{"role": "user", "content": "Weather in Paris?"}, *ROW["messages"][1:]]
    assert convert_anthropic(blocks, options=ConvertOptions()) == row


def test_parallel_tool_use_and_their_results_one_tool_message_each():
    row = copy.deepcopy(ROW)
    row["messages"][1]["content"] = [
        {"type": "thinking", "thinking": "Two cities.", "signature": "s"},
        {"type": "text", "text": "Checking both."},
        {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {"city": "Rome"},
         "cache_control": {"type": "ephemeral"}}]
    row["messages"][2]["content"] = [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": [{"type": "text", "text": "18 C"}]},
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "no data", "is_error": True}]
    out = convert_anthropic(row, options=ConvertOptions())
    call_turn = out["messages"][2]
    assert [(c["id"], c["function"]["arguments"]) for c in call_turn["tool_calls"]] == [
        ("toolu_a", {"city": "Paris"}), ("toolu_b", {"city": "Rome"})]
    assert call_turn["reasoning_content"] == "Two cities.\n\nChecking both."  # tool_call_content=reasoning
    assert [(m["role"], m["tool_call_id"], m["content"]) for m in out["messages"][3:5]] == [
        ("tool", "toolu_a", "18 C"), ("tool", "toolu_b", "no data")]
    assert out["meta"]["notes"] == {"status_dropped": 1}  # is_error: counted, as Bedrock's status is


def _with(i: int, content) -> dict:
    row = copy.deepcopy(ROW)
    row["messages"][i]["content"] = content
    return row


def _tool_use(name="get_weather", **kw):
    return {"type": "tool_use", "id": "toolu_1", "name": name, "input": {"city": "Paris"}, **kw}


THINK = {"type": "thinking", "thinking": "Report.", "signature": "def"}


@pytest.mark.parametrize("row, code, place", [
    (_with(0, [{"type": "text", "text": "This?"}, {"type": "image", "source": {"type": "base64", "data": "AAAA"}}]),
     "non_text_content", "messages[0].content[1]"),
    (_with(0, [{"type": "document", "source": {"type": "text", "data": "x"}}]), "non_text_content",
     "messages[0].content[0]"),
    (_with(1, [{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "w"}},
               _tool_use()]), "non_text_content", "messages[1].content[0]"),
    (_with(3, [THINK, {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
               {"type": "text", "text": "18 C."}]), "non_text_content", "messages[3].content[1]"),
    (_with(2, [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"},
               {"type": "text", "text": "Go on."}]), "tool_response_mixed", "messages[2]"),
    (_with(2, [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
        {"type": "image", "source": {"type": "base64", "data": "AAAA"}}]}]), "non_text_content",
     "messages[2].content[0].content[0]"),
    (_with(3, [THINK, {"type": "redacted_thinking", "data": "ZW5j"}, {"type": "text", "text": "x"}]),
     "non_text_content", "messages[3].content[1]"),
    (_with(1, [_tool_use(), {"type": "text", "text": "Done, I think."}]), "text_after_tool_call", "messages[1]"),
    (_with(3, [{"type": "text", "text": "x"}, THINK]), "interleaved_reasoning", "messages[3].content[1]"),
    (_with(1, [_tool_use(input=[1])]), "arguments_not_object", "messages[1]"),
    (_with(1, [_tool_use(name="get_time")]), "undeclared_tool", "get_time"),
    (_with(2, [{"type": "tool_result", "tool_use_id": "toolu_zzz", "content": "18 C"}]), "tool_result_unmatched",
     "messages[2].content[0]"),
    ({**ROW, "tools": [*ROW["tools"], {"type": "bash_20250124", "name": "bash"}]}, "bad_tool_definition",
     "tools[1]"),
    ({**ROW, "tools": [*ROW["tools"], {"type": "web_search_20250305", "name": "web_search"}]},
     "bad_tool_definition", "'web_search_20250305'"),
    ({**ROW, "system": 3}, "malformed_row", "system"),
    ({**ROW, "system": [{"type": "image", "source": {}}]}, "non_text_content", "system[0]"),
])
def test_quirks_rejected_with_their_code_naming_the_block(tmp_path, row, code, place):
    results, _ = run_source(write_jsonl(tmp_path / "claude.jsonl", [ROW, row]))
    assert codes(results) == ["kept", code], [getattr(r, "message", "") for r in results]
    assert place in results[1].message, results[1].message


@pytest.mark.parametrize("raw, expected", [
    (ROW, "anthropic"),
    ({"messages": [{"role": "assistant", "content": [{"type": "redacted_thinking", "data": "x"}]}]}, "anthropic"),
    ({"system": [{"type": "text", "text": "Be brief."}], "messages": [{"role": "user", "content": "hi"}]}, "anthropic"),
    ({"messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "f", "input_schema": {}}]}, "anthropic"),
    # other formats' rows stay theirs: OpenAI's plain text parts and thinking parts of "text" (the OpenAI
    # reader's, as in data/samples/chat_openai.jsonl), Bedrock's untyped blocks (system blocks too)
    ({"messages": [{"role": "user", "content": "Name a colour"}, {"role": "assistant", "content": [
        {"type": "thinking", "text": "Blue will do."}, {"type": "text", "text": "Blue."}]}]}, "openai"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                   {"role": "assistant", "content": [{"type": "text", "text": "yo"}]}]}, "openai"),
    ({"system": [{"text": "Be brief."}], "messages": [{"role": "user", "content": [{"text": "hi"}]}]}, "bedrock"),
    ({"messages": [{"role": "assistant", "content": [{"toolUse": {"toolUseId": "t", "name": "f", "input": {}}}]}]},
     "bedrock"),
])
def test_detection_takes_anthropic_rows_and_no_other_formats(raw, expected):
    assert classify(raw, ColumnMap()) == expected


def test_auto_detects_claude_rows_beside_other_formats(tmp_path):
    openai_row = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                               {"role": "assistant", "content": "<think>Greet.</think>Hello"}]}
    results, conversion = run_source(write_jsonl(tmp_path / "mixed.jsonl", [ROW, openai_row]))
    assert codes(results) == ["kept", "kept"]
    assert dict(conversion.summary.formats) == {"anthropic": 1, "openai": 1}


def test_encrypted_only_thinking_is_no_reasoning_as_bedrock_and_responses_read_it():
    """redacted_thinking alone: no reasoning, so the missing-reasoning policy decides (a teacher, unmask,
    drop), the one rule of every reader for encrypted reasoning."""
    row = _with(3, [{"type": "redacted_thinking", "data": "ZW5j"}, {"type": "text", "text": "It is 18 C."}])
    unmasked = convert_row(row, format="auto", options=ConvertOptions(missing_reasoning="unmask"))
    assert unmasked["messages"][-1] == {"role": "assistant", "content": "It is 18 C.", "weight": 0}
    bedrock = {"messages": [{"role": "user", "content": [{"text": "Weather?"}]}, {"role": "assistant", "content": [
        {"reasoningContent": {"redactedContent": "ZW5j"}}, {"text": "18 C."}]}]}
    refused = convert_row(row, format="anthropic", options=ConvertOptions())
    assert refused.code == convert_row(bedrock, format="bedrock", options=ConvertOptions()).code == "missing_reasoning"
    assert "messages[3]" in refused.message


def _logged(stop_reason: str) -> dict:
    """ROW as a proxy logs its last messages.create call: the request, then the response message."""
    row = copy.deepcopy(ROW)  # tests change the record in place: ROW stays as it is
    request = {**row, "messages": row["messages"][:3]}
    return {"request": request, "response": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": row["messages"][3]["content"], "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": 90, "output_tokens": 12}}}


def test_a_logged_messages_call_is_the_same_row():
    assert classify(_logged("end_turn"), ColumnMap()) == "chat_log"
    assert convert_chat_log(_logged("end_turn"), options=ConvertOptions()) == \
        convert_anthropic(ROW, options=ConvertOptions())


@pytest.mark.parametrize("stop_reason", ["max_tokens", "pause_turn", "refusal"])
def test_a_logged_call_cut_off_is_response_cut_off(stop_reason):
    out = convert_chat_log(_logged(stop_reason), options=ConvertOptions())
    assert out.code == "response_cut_off" and "response.stop_reason" in out.message, out


def test_a_logged_calls_blocks_are_named_in_the_record():
    bad = _logged("end_turn")
    bad["response"]["content"] = [THINK, {"type": "image", "source": {}}]
    out = convert_chat_log(bad, options=ConvertOptions())
    assert out.code == "non_text_content" and "response.content[1]" in out.message, out
    bad = _logged("end_turn")
    bad["request"]["messages"][2]["content"].append({"type": "text", "text": "more"})
    out = convert_chat_log(bad, options=ConvertOptions())
    assert out.code == "tool_response_mixed" and "request.messages[2]" in out.message, out


def test_input_schema_tools_in_an_openai_row_keep_their_parameters():
    """Anthropic-shaped tools read by the OpenAI reader kept the schema as an `input_schema` key the
    template ignores: the model was shown a tool without parameters, unsaid."""
    out = convert_openai({**OPENAI, "tools": ROW["tools"]}, options=ConvertOptions())
    assert out["tools"] == convert_openai(OPENAI, options=ConvertOptions())["tools"]
    both = [{**ROW["tools"][0], "parameters": {"type": "object"}}]
    assert convert_openai({**OPENAI, "tools": both}, options=ConvertOptions()).code == "bad_tool_definition"


def test_an_empty_system_is_no_system_message():
    """`system: ""` or `[]` is the API's "no system prompt" (as leaving it out); it became an empty system message."""
    turns = [{"role": "user", "content": "hi"},
             {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}, {"type": "text", "text": "yo"}]}]
    rows = [convert_row({"system": system, "messages": turns}, format="anthropic", options=ConvertOptions())
            for system in ("", [], None)]
    assert [m["role"] for m in rows[0]["messages"]] == ["user", "assistant"]
    assert rows[0]["messages"] == rows[1]["messages"] == rows[2]["messages"]


def test_a_tool_result_outside_a_user_message_is_rejected_naming_it():
    # a tool_result in an assistant message became a tool message with no role check
    out = convert_anthropic(_with(1, [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"}]),
                            options=ConvertOptions())
    assert out.code == "malformed_row", out.message
    assert "messages[1].content[0]" in out.message and "'assistant'" in out.message
    mixed = _with(3, [THINK, {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"}])
    assert convert_anthropic(mixed, options=ConvertOptions()).message.startswith("messages[3].content[1] is a tool_result")


@pytest.mark.parametrize("kind", [[], ["text"], {"type": "text"}, 1, None])
def test_a_block_type_that_is_no_name_is_rejected_naming_the_block(kind):
    # found by test_reader_fuzz: a list or object type was looked up as a key (TypeError: unhashable)
    row = copy.deepcopy(ROW)
    row["messages"][3]["content"][1] = {"type": kind, "text": "It is 18 C."}
    result = convert_row(row, format="anthropic", options=ConvertOptions())
    assert result.code == "non_text_content" and "messages[3].content[1]" in result.message, result
