"""Bedrock Converse rows as the Bedrock Converse docs' tool-use example writes them (the top_song
tool: toolUse in an assistant message, toolResult blocks in the next user message, system blocks,
toolConfig.tools of toolSpec), reasoningContent blocks, and their rejections with codes."""

from __future__ import annotations

import pytest

from beam_sft.convert.bedrock import convert_bedrock
from beam_sft.convert.options import ConvertOptions
from tests.convert.readers_util import codes, run_source, write_jsonl

TOOL_CONFIG = {"tools": [{"toolSpec": {
    "name": "top_song", "description": "Get the most popular song played on a radio station.",
    "inputSchema": {"json": {"type": "object", "properties": {
        "sign": {"type": "string", "description": "The call sign for the radio station, e.g. WZPZ."}},
        "required": ["sign"]}}}}]}
ROW = {
    "schemaVersion": "bedrock-conversation-2024",
    "system": [{"text": "You are a radio assistant."}],
    "messages": [
        {"role": "user", "content": [{"text": "What is the most popular song on WZPZ?"}]},
        {"role": "assistant", "content": [
            {"reasoningContent": {"reasoningText": {"text": "The top_song tool answers this.", "signature": "sig"}}},
            {"text": "I'll look it up."},
            {"toolUse": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "name": "top_song", "input": {"sign": "WZPZ"}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
                                                     "content": [{"json": {"song": "Elemental Hotel",
                                                                           "artist": "8 Storey Hike"}}]}}]},
        {"role": "assistant", "content": [
            {"reasoningContent": {"reasoningText": {"text": "Report the result."}}},
            {"text": "The most popular song on WZPZ is Elemental Hotel by 8 Storey Hike."}]}],
    "toolConfig": TOOL_CONFIG}


def test_a_converse_tool_use_row():
    row = convert_bedrock(ROW, options=ConvertOptions())
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    call_turn = row["messages"][2]
    assert call_turn["tool_calls"][0]["id"] == "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"
    assert call_turn["tool_calls"][0]["function"] == {"name": "top_song", "arguments": {"sign": "WZPZ"}}
    # the text said before the call follows the reasoning (tool_call_content=reasoning)
    assert call_turn["reasoning_content"] == "The top_song tool answers this.\n\nI'll look it up."
    assert row["messages"][3] == {"role": "tool", "tool_call_id": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
                                  "content": '{"song": "Elemental Hotel", "artist": "8 Storey Hike"}'}
    assert row["messages"][4]["reasoning_content"] == "Report the result."
    assert row["tools"][0]["function"]["parameters"]["required"] == ["sign"]


def test_several_results_and_text_results_and_cache_points():
    two_calls = {"role": "assistant", "content": [
        {"reasoningContent": {"reasoningText": {"text": "Both."}}},
        {"toolUse": {"toolUseId": "a", "name": "top_song", "input": {"sign": "WZPZ"}}},
        {"toolUse": {"toolUseId": "b", "name": "top_song", "input": {"sign": "WKRP"}}}]}
    results = {"role": "user", "content": [
        {"toolResult": {"toolUseId": "a", "content": [{"text": "Song A"}]}},
        {"toolResult": {"toolUseId": "b", "content": [{"text": "Song B"}], "status": "error"}},
        {"cachePoint": {"type": "default"}}]}
    row = {**ROW, "messages": [ROW["messages"][0], two_calls, results, ROW["messages"][3]]}
    out = convert_bedrock(row, options=ConvertOptions())
    assert [(m["role"], m.get("tool_call_id"), m.get("content")) for m in out["messages"][3:5]] == [
        ("tool", "a", "Song A"), ("tool", "b", "Song B")]


def _with(i: int, message: dict) -> dict:
    messages = list(ROW["messages"])
    messages[i] = message
    return {**ROW, "messages": messages}


@pytest.mark.parametrize("row, code", [
    (_with(1, {"role": "assistant", "content": [
        {"toolUse": {"toolUseId": "t", "name": "top_song", "input": {"sign": "WZPZ"}}}, {"text": "Done, I think."}]}),
     "text_after_tool_call"),
    (_with(2, {"role": "user", "content": [{"text": "result:"}, {"toolResult": {
        "toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "content": [{"text": "x"}]}}]}), "tool_response_mixed"),
    (_with(0, {"role": "user", "content": [{"image": {"format": "png", "source": {"bytes": "AAAA"}}}]}),
     "non_text_content"),
    (_with(3, {"role": "assistant", "content": [{"reasoningContent": {"redactedContent": "ZW5j"}},
                                                {"text": "x"}]}), "kept"),  # no reasoning: the fill writes it
    (_with(3, {"role": "assistant", "content": [{"reasoningContent": {"reasoningText": {"text": "r"}}},
                                                {"reasoningContent": {"redactedContent": "ZW5j"}},
                                                {"text": "x"}]}), "non_text_content"),
    (_with(2, {"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
                                                           "content": [{"document": {"name": "d"}}]}}]}),
     "non_text_content"),
    ({**ROW, "toolConfig": {"tools": [{"cachePoint": {}}]}}, "bad_tool_definition"),
    ({**ROW, "toolConfig": {"tools": []}}, "undeclared_tool"),
    ({**ROW, "system": "not blocks"}, "malformed_row"),
])
def test_quirks_rejected_with_their_code(tmp_path, row, code):
    results, _ = run_source(write_jsonl(tmp_path / "converse.jsonl", [ROW, row]))
    assert codes(results) == ["kept", code], [getattr(r, "message", "") for r in results]


def test_auto_detects_converse_rows_and_plain_text_blocks_stay_openai(tmp_path):
    text_only = {"messages": [{"role": "user", "content": [{"text": "Hi"}]},
                              {"role": "assistant", "content": [{"text": "<think>Greet.</think>Hello"}]}]}
    path = write_jsonl(tmp_path / "converse.jsonl", [ROW, text_only], newline="\r\n", blank_between=True)
    results, conversion = run_source(path)
    assert codes(results) == ["kept", "kept"]
    assert dict(conversion.summary.formats) == {"bedrock": 1, "openai": 1}


def test_a_result_of_status_error_is_counted_not_dropped_unsaid():
    # toolResult.status disappeared without a word; the template has no place for it, so it is counted
    import copy

    row = copy.deepcopy(ROW)
    row["messages"][2]["content"][0]["toolResult"]["status"] = "error"
    out = convert_bedrock(row, options=ConvertOptions())
    assert out["meta"]["notes"] == {"status_dropped": 1}
    assert out["messages"][3]["content"] == '{"song": "Elemental Hotel", "artist": "8 Storey Hike"}'
    row["messages"][2]["content"][0]["toolResult"]["status"] = "success"
    assert "notes" not in (convert_bedrock(row, options=ConvertOptions()).get("meta") or {})


def test_encrypted_only_reasoning_is_no_reasoning_as_in_the_responses_reader():
    """One rule for encrypted reasoning (Bedrock's redactedContent, the Responses API's encrypted_content):
    alone it is no reasoning, so the missing-reasoning policy (a teacher, unmask, drop) decides; it was
    rejected non_text_content here, a row no teacher could save."""
    from beam_sft.convert import convert_row

    row = _with(3, {"role": "assistant", "content": [{"reasoningContent": {"redactedContent": "ZW5j"}},
                                                     {"text": "It is Elemental Hotel."}]})
    unmasked = convert_row(row, format="bedrock", options=ConvertOptions(missing_reasoning="unmask"))
    assert not hasattr(unmasked, "code"), unmasked
    assert unmasked["messages"][-1]["content"] == "It is Elemental Hotel."
    assert "reasoning_content" not in unmasked["messages"][-1]
    responses = {"input": [{"role": "user", "content": "Top song?"}], "output": [
        {"type": "reasoning", "summary": [], "encrypted_content": "ZW5j"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "X."}]}]}
    assert convert_row(responses, format="responses", options=ConvertOptions()).code == \
        convert_row(row, format="bedrock", options=ConvertOptions()).code == "missing_reasoning"


def test_system_cache_points_are_skipped_and_guard_content_is_read_as_text(tmp_path):
    # system blocks holding a cachePoint or guardContent were rejected "system is not a list of text blocks";
    # a cachePoint carries nothing (skipped, as in messages), guardContent is text the model reads
    system = [{"text": "You are a radio assistant."}, {"cachePoint": {"type": "default"}},
              {"guardContent": {"text": {"text": "Never name a rival station.", "qualifiers": ["guard_content"]}}}]
    row = {**ROW, "system": system}
    out = convert_bedrock(row, options=ConvertOptions())
    assert out["messages"][0] == {"role": "system",
                                  "content": "You are a radio assistant.\n\nNever name a rival station."}
    guarded = _with(0, {"role": "user", "content": [
        {"guardContent": {"text": {"text": "What is the most popular song on WZPZ?"}}}]})
    assert convert_bedrock(guarded, options=ConvertOptions())["messages"][1]["content"] == \
        "What is the most popular song on WZPZ?"
    text_only = {"system": [{"cachePoint": {"type": "default"}}, {"text": "Be brief."}],
                 "messages": [{"role": "user", "content": [{"text": "Hi"}]},
                              {"role": "assistant", "content": [{"text": "Hello"}]}]}
    results, conversion = run_source(write_jsonl(tmp_path / "converse.jsonl", [row, text_only]))
    assert codes(results) == ["kept", "kept"], [getattr(r, "message", "") for r in results]
    assert dict(conversion.summary.formats) == {"bedrock": 2}


@pytest.mark.parametrize("system, code, place", [
    ([{"guardContent": {"image": {"format": "png", "source": {"bytes": "AAAA"}}}}], "non_text_content",
     "system[0].guardContent"),
    ([{"text": "x"}, {"guardContent": {"text": "not an object"}}], "malformed_row", "system[1].guardContent"),
    ([{"text": "x"}, {"document": {"name": "d"}}], "malformed_row", "system[1]"),
    ([{"text": "x"}, {"type": "text", "text": "y"}], "malformed_row", "system[1]"),
])
def test_system_blocks_that_cannot_be_read_are_rejected_naming_the_block(system, code, place):
    out = convert_bedrock({**ROW, "system": system}, options=ConvertOptions())
    assert (out.code, place in out.message) == (code, True), out.message


def test_a_tool_result_outside_a_user_message_is_rejected_naming_it():
    # a toolResult in an assistant message became a tool message (or tool_response_mixed): no role check
    use = {"toolUse": {"toolUseId": "t", "name": "top_song", "input": {"sign": "WZPZ"}}}
    result = {"toolResult": {"toolUseId": "t", "content": [{"text": "Song A"}]}}
    for content in ([use, result], [result]):
        out = convert_bedrock(_with(1, {"role": "assistant", "content": content}), options=ConvertOptions())
        assert out.code == "malformed_row", out.message
        assert f"messages[1].content[{len(content) - 1}]" in out.message and "'assistant'" in out.message
