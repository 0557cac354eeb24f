"""The chat_log reader: a logged request with its response becomes one conversation, the response's
message the trained turn with its reasoning. Shapes: OpenAI's chat completion (choices[0].message,
reasoning_content, tool_calls, explicit nulls for what is unused) and a proxy's record (the AI
SDK's text / reasoningText / toolCalls with input), as distillation logs keep them."""

from __future__ import annotations

import pytest

from beam_sft.convert.chat_log import convert_chat_log
from beam_sft.convert.options import ConvertOptions
from tests.convert.readers_util import codes, run_source, write_jsonl

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
REQUEST = {"model": "teacher", "messages": [{"role": "system", "content": "Be brief."},
                                            {"role": "user", "content": "Weather in Oslo?"}],
           "tools": TOOLS, "temperature": 0.6}
# An OpenAI chat completion as the API returns it: unused fields explicitly null.
OPENAI = {"request": REQUEST, "response": {
    "id": "chatcmpl-1", "object": "chat.completion", "model": "teacher",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
        "role": "assistant", "content": None, "refusal": None, "function_call": None, "audio": None,
        "reasoning_content": "The user wants the weather: call the tool.",
        "tool_calls": [{"id": "call_abc", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]}}],
    "usage": {"prompt_tokens": 20, "completion_tokens": 12}}}
ANSWER = {"request": {"messages": [{"role": "user", "content": "2+2?"}]}, "response": {"choices": [
    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "4", "tool_calls": None,
                                                      "function_call": None, "reasoning_content": "Add."}}]}}
# A proxy's log of the same exchange (text, reasoningText, toolCalls of {toolCallId, toolName, input}).
PROXY = {"request": REQUEST, "response": {
    "text": "", "reasoningText": "Call the weather tool for Oslo.", "finishReason": "tool-calls",
    "toolCalls": [{"type": "tool-call", "toolCallId": "tc_1", "toolName": "get_weather", "input": {"city": "Oslo"}}],
    "usage": {"inputTokens": 20, "outputTokens": 12}}}


def test_openai_shape_the_response_is_the_trained_call_turn():
    row = convert_chat_log(OPENAI, options=ConvertOptions())
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]
    last = row["messages"][-1]
    assert last["reasoning_content"] == "The user wants the weather: call the tool."
    assert last["tool_calls"] == [{"id": "call_abc", "type": "function",
                                   "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]
    assert row["tools"] == TOOLS


def test_explicit_nulls_for_unused_fields_are_no_calls():
    row = convert_chat_log(ANSWER, options=ConvertOptions())
    assert row["messages"][-1] == {"role": "assistant", "reasoning_content": "Add.", "content": "4"}


def test_proxy_shape_reasoning_text_and_tool_calls_with_input():
    row = convert_chat_log(PROXY, options=ConvertOptions())
    last = row["messages"][-1]
    assert last["reasoning_content"] == "Call the weather tool for Oslo."
    assert last["tool_calls"][0]["id"] == "tc_1"
    assert last["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": {"city": "Oslo"}}
    older = {**PROXY, "response": {"text": "Oslo: 3 C.", "reasoningText": "Read it."}}
    assert convert_chat_log(older, options=ConvertOptions())["messages"][-1]["content"] == "Oslo: 3 C."


def test_proxy_history_in_the_ai_sdk_shape():
    """A second turn's log: the request holds the first call and its result as the AI SDK writes them."""
    history = [{"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
               {"role": "assistant", "content": [
                   {"type": "reasoning", "text": "Call the tool."},
                   {"type": "tool-call", "toolCallId": "tc_1", "toolName": "get_weather", "input": {"city": "Oslo"}}]},
               {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "tc_1", "toolName": "get_weather",
                                             "output": {"type": "json", "value": {"temp": 3}}}]}]
    log = {"request": {**REQUEST, "messages": history},
           "response": {"text": "It is 3 C in Oslo.", "reasoningText": "Report it.", "finishReason": "stop"}}
    row = convert_chat_log(log, options=ConvertOptions())
    assert [m["role"] for m in row["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert row["messages"][1]["tool_calls"][0]["id"] == "tc_1" and row["messages"][1]["reasoning_content"] == (
        "Call the tool.")
    assert row["messages"][2] == {"role": "tool", "tool_call_id": "tc_1", "name": "get_weather",
                                  "content": '{"temp": 3}'}
    mixed = {**log, "request": {**REQUEST, "messages": [*history[:2], {"role": "tool", "content": [
        {"type": "text", "text": "x"}, history[2]["content"][0]]}]}}
    assert convert_chat_log(mixed, options=ConvertOptions()).code == "tool_response_mixed"
    # tool-result parts in an assistant (or user) message became tool messages with no role check
    for role in ("assistant", "user"):
        misplaced = {**log, "request": {**REQUEST, "messages": [*history[:2], {**history[2], "role": role}]}}
        out = convert_chat_log(misplaced, options=ConvertOptions())
        assert out.code == "malformed_row" and "request.messages[2].content[0]" in out.message, out


def test_a_tool_the_provider_ran_is_non_text_content_naming_the_part():
    """The AI SDK's provider-executed parts (a hosted web search's call and result in the assistant's own
    message) were malformed_row "a tool-result part in a message of role 'assistant'": they are the
    provider's tool, as Anthropic's server tools are, which the template has no place for."""
    hosted = {"role": "assistant", "content": [
        {"type": "tool-call", "toolCallId": "ws_1", "toolName": "web_search", "input": {"q": "Oslo"},
         "providerExecuted": True},
        {"type": "tool-result", "toolCallId": "ws_1", "toolName": "web_search", "output": {"type": "json", "value": []},
         "providerExecuted": True}]}
    log = {"request": {**REQUEST, "messages": [{"role": "user", "content": "Weather in Oslo?"}, hosted,
                                               {"role": "user", "content": "And now?"}]},
           "response": {"text": "3 C.", "reasoningText": "Say it.", "finishReason": "stop"}}
    out = convert_chat_log(log, options=ConvertOptions())
    assert out.code == "non_text_content" and "request.messages[1].content[0] is a provider-executed" in out.message


def _response(**changes) -> dict:
    choice = {**ANSWER["response"]["choices"][0], **changes}
    return {**ANSWER, "response": {"choices": [choice]}}


@pytest.mark.parametrize("row, code", [
    (_response(finish_reason="length"), "response_cut_off"),
    ({**PROXY, "response": {**PROXY["response"], "finishReason": "length"}}, "response_cut_off"),
    (_response(finish_reason="content_filter"), "response_cut_off"),  # filtered: not the model's whole answer
    ({**PROXY, "response": {**PROXY["response"], "finishReason": "content-filter"}}, "response_cut_off"),
    (_response(finish_reason=3), "response_cut_off"),
    ({**ANSWER, "response": {"choices": ANSWER["response"]["choices"] * 2}}, "ambiguous_conversation"),
    ({**ANSWER, "response": {"choices": []}}, "malformed_row"),
    ({**ANSWER, "response": {"object": "error"}}, "malformed_row"),
    ({"request": {"prompt": "2+2?"}, "response": ANSWER["response"]}, "malformed_row"),
    ({**OPENAI, "request": {**REQUEST, "tools": None}}, "undeclared_tool"),
    (_response(message={"role": "assistant", "content": "4"}), "missing_reasoning"),
])
def test_rejections_with_codes(tmp_path, row, code):
    results, _ = run_source(write_jsonl(tmp_path / "log.jsonl", [OPENAI, row, PROXY]), fill=None)
    assert codes(results) == ["kept", code, "kept"], [getattr(r, "message", "") for r in results]


def test_auto_detects_chat_logs(tmp_path):
    results, conversion = run_source(write_jsonl(tmp_path / "log.jsonl", [OPENAI, ANSWER, PROXY], newline="\r\n",
                                                 blank_between=True), fill=None)
    assert codes(results) == ["kept"] * 3 and dict(conversion.summary.formats) == {"chat_log": 3}
