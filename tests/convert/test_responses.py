"""The responses reader on rows shaped as OpenAI's Responses API writes them (instructions, input and
output items: reasoning with a summary or reasoning_text, parallel function_calls, their
function_call_outputs, flat function tools): the same BeamRow the OpenAI reader makes of the same
conversation, rendered by Beam's template, and every quirk rejected with a code naming its item."""

from __future__ import annotations

import copy

import pytest

from beam_sft.convert.detect import classify
from beam_sft.convert.openai import convert_openai
from beam_sft.convert.options import ColumnMap, ConvertOptions
from beam_sft.convert.responses import convert_responses
from tests.convert.readers_util import codes, run_source, write_jsonl

PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [{"type": "function", "name": "get_weather", "description": "Current weather of a city",
          "parameters": PARAMS, "strict": True}]
# An agent trace as a Responses client keeps it: the earlier turn's items passed back in `input`
# (a reasoning summary beside its encrypted content, two parallel calls, their outputs), then the
# response's `output` (reasoning_text and the final message).
ROW = {
    "model": "gpt-5", "instructions": "You are a travel assistant.", "tools": TOOLS,
    "input": [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"type": "reasoning", "id": "rs_1", "summary": [
            {"type": "summary_text", "text": "**Two cities**"}, {"type": "summary_text", "text": "Call twice."}],
         "encrypted_content": "gAAAAB..."},
        {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "get_weather",
         "arguments": "{\"city\": \"Paris\"}", "status": "completed"},
        {"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "get_weather",
         "arguments": "{\"city\": \"Rome\"}", "status": "completed"},
        {"type": "function_call_output", "call_id": "call_a", "output": "{\"temp_c\": 18}"},
        {"type": "function_call_output", "call_id": "call_b", "output": [{"type": "input_text", "text": "22 C"}]}],
    "output": [
        {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "Answer."}],
         "content": [{"type": "reasoning_text", "text": "Both temperatures are known; answer."}]},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Paris: 18 C. Rome: 22 C.", "annotations": []}]}],
    "status": "completed", "reasoning": {"effort": "medium"}}
# The same conversation as an OpenAI chat row.
OPENAI = {"reasoning_effort": "medium", "tools": [{"type": "function", "function": {k: v for k, v in TOOLS[0].items()
                                                                                  if k != "type"}}],
          "messages": [
    {"role": "system", "content": "You are a travel assistant."},
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {"role": "assistant", "reasoning_content": "**Two cities**\n\nCall twice.", "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
        {"id": "call_b", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
    {"role": "tool", "tool_call_id": "call_a", "content": "{\"temp_c\": 18}"},
    {"role": "tool", "tool_call_id": "call_b", "content": "22 C"},
    {"role": "assistant", "reasoning_content": "Both temperatures are known; answer.",
     "content": "Paris: 18 C. Rome: 22 C."}]}


def test_an_agent_trace_is_the_row_the_openai_reader_makes():
    row = convert_responses(ROW, options=ConvertOptions())
    assert row == convert_openai(OPENAI, options=ConvertOptions())
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [c["function"]["arguments"] for c in row["messages"][2]["tool_calls"]] == [{"city": "Paris"},
                                                                                     {"city": "Rome"}]
    assert row["chat_template_kwargs"] == {"reasoning_effort": "medium"}


def test_the_row_renders_through_beams_template(render_beam):
    row = convert_responses(ROW, options=ConvertOptions())
    text = render_beam(row["messages"], tools=row["tools"], **row["chat_template_kwargs"])
    pieces = ["You are a travel assistant.", "type get_weather = (_: {",
              "<|start|>user<|message|>Weather in Paris and Rome?<|end|>",
              "<|channel|>analysis<|message|>**Two cities**\n\nCall twice.<|end|>",
              "<|start|>assistant to=get_weather<|channel|>analysis <|constrain|>xml<|message|>"
              "<rfl:parameter name=\"city\">\nParis\n</rfl:parameter><|end|>",
              "<rfl:parameter name=\"city\">\nRome\n</rfl:parameter><|call|>",
              "<|start|>get_weather to=assistant<|channel|>analysis<|message|>{\"temp_c\": 18}<|end|>",
              "<|start|>get_weather to=assistant<|channel|>analysis<|message|>22 C<|end|>",
              "<|channel|>analysis<|message|>Both temperatures are known; answer.<|end|>",
              "<|channel|>final<|message|>Paris: 18 C. Rome: 22 C.<|return|>"]
    at = [text.find(p) for p in pieces]
    assert -1 not in at and at == sorted(at), dict(zip(pieces, at, strict=True))


def test_auto_detects_responses_rows_and_names_their_items(tmp_path):
    answer = {"input": "2+2?", "output": [{"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": "4"}]}]}
    results, conversion = run_source(write_jsonl(tmp_path / "trace.jsonl", [ROW, answer]), fill=None)
    assert codes(results) == ["kept", "missing_reasoning"]
    assert dict(conversion.summary.formats) == {"responses": 2}
    assert "output[0]" in results[1].message


def test_one_turn_of_several_items_and_what_each_item_may_hold():
    row = {"input": [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be kind."}]},
                     {"role": "user", "content": [{"type": "input_text", "text": "Can you "},
                                                  {"type": "input_text", "text": "help?"}]}],
           "output": [{"type": "reasoning", "summary": [{"type": "summary_text", "text": "Decline."}]},
                      {"type": "reasoning", "summary": [], "encrypted_content": "gAAA"},
                      {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
                      {"type": "message", "role": "assistant", "content": "Sorry."}]}
    out = convert_responses(row, options=ConvertOptions())
    assert out["messages"] == [{"role": "developer", "content": "Be kind."}, {"role": "user", "content": "Can you help?"},
                               {"role": "assistant", "reasoning_content": "Decline.", "content": "No.\n\nSorry."}]


def test_encrypted_only_reasoning_is_no_reasoning_and_the_policy_applies(tmp_path):
    row = copy.deepcopy(ROW)
    row["output"][0] = {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAAB..."}
    assert "reasoning_content" not in convert_responses(row, options=ConvertOptions())["messages"][-1]
    results, _ = run_source(write_jsonl(tmp_path / "enc.jsonl", [row]), fill=None)
    assert codes(results) == ["missing_reasoning"] and "output[0..1]" in results[0].message


def _set(path: str, value) -> dict:
    """ROW with ``value`` at ``input.3`` / ``output.0`` (``None``: the entry removed); ``key`` for a row key."""
    row = copy.deepcopy(ROW)
    key, _, index = path.partition(".")
    if not index:
        row[key] = value
    elif value is None:
        del row[key][int(index)]
    else:
        row[key][int(index)] = value
    return row


def _call(call_id="call_a", arguments="{\"city\": \"Paris\"}"):
    return {"type": "function_call", "call_id": call_id, "name": "get_weather", "arguments": arguments}


@pytest.mark.parametrize("row, code, place", [
    (_set("input.2", _call(arguments="{\"city\": ")), "invalid_json", "input[2].arguments"),
    (_set("input.2", _call(arguments="[1]")), "arguments_not_object", "input[2].arguments"),
    (_set("input.2", {**_call(), "call_id": None}), "malformed_tool_call", "input[2]"),
    (_set("input.4", {"type": "function_call_output", "call_id": "call_zzz", "output": "18"}),
     "tool_result_unmatched", "input[4]"),
    (_set("input.4", {"type": "function_call_output", "output": "18"}), "tool_result_unmatched", "input[4]"),
    (_set("input.5", {"type": "function_call_output", "call_id": "call_b", "output": [
        {"type": "input_image", "image_url": "https://x/y.png"}]}), "non_text_content", "input[5].output[0]"),
    (_set("input.0", {"role": "user", "content": [{"type": "input_text", "text": "This?"},
                                                  {"type": "input_image", "image_url": "data:..."}]}),
     "non_text_content", "input[0].content[1]"),
    (_set("input.1", {"type": "web_search_call", "id": "ws_1", "status": "completed",
                      "action": {"type": "search", "query": "weather"}}), "non_text_content", "input[1]"),
    (_set("input.3", {"type": "custom_tool_call", "call_id": "call_b", "name": "sh", "input": "ls"}),
     "non_text_content", "input[3]"),
    (_set("input.3", {"type": "reasoning", "summary": [{"type": "summary_text", "text": "More."}]}),
     "interleaved_reasoning", "input[3]"),
    (_set("output.1", {**ROW["output"][1], "status": "incomplete"}), "response_cut_off", "output[1].status"),
    (_set("status", "incomplete"), "response_cut_off", "status"),
    (_set("previous_response_id", "resp_123"), "malformed_row", "previous_response_id"),
    (_set("input.1", {"type": "item_reference", "id": "rs_1"}), "malformed_row", "input[1]"),
    (_set("input.1", {"type": "thought", "text": "x"}), "malformed_row", "input[1]"),
    (_set("input.0", {"role": "narrator", "content": "x"}), "unknown_role", "input[0]"),
    (_set("output.1", {**ROW["output"][1], "reasoning_content": "r"}), "malformed_row", "output[1]"),
    (_set("tools", [*TOOLS, {"type": "web_search"}]), "bad_tool_definition", "tools[1]"),
    (_set("input", None), "malformed_row", "no input"),
    (_set("output.1", {**ROW["output"][1], "content": [{"type": "output_text", "text": "x"},
                                                       {"type": "output_audio", "data": "..."}]}),
     "malformed_row", "output[1].content[1]"),
])
def test_quirks_rejected_with_their_code_naming_the_item(tmp_path, row, code, place):
    results, _ = run_source(write_jsonl(tmp_path / "trace.jsonl", [ROW, row]))
    assert codes(results) == ["kept", code], [getattr(r, "message", "") for r in results]
    assert place in results[1].message, results[1].message


@pytest.mark.parametrize("raw, expected", [
    (ROW, "responses"),
    ({"input": "hi", "output": [{"type": "message", "role": "assistant", "content": "yo"}]}, "responses"),
    ({"input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}, "responses"),
    # other formats' rows stay theirs: Alpaca's input/output strings, OpenAI's messages with input_text parts,
    # a trajectory under `input` of plain role/content messages, a chat log, Gemini, Bedrock
    ({"instruction": "Add", "input": "2+2", "output": "4"}, "alpaca"),
    ({"instructions": "Add", "input": "2+2", "output": "4"}, None),
    ({"messages": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}, "openai"),
    ({"input": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}, "openai"),
    ({"request": {"messages": []}, "response": {"output": [{"type": "message"}]}}, "chat_log"),
    ({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}, "gemini"),
    ({"messages": [{"role": "user", "content": [{"text": "hi"}]}], "toolConfig": {"tools": []}}, "bedrock"),
])
def test_detection_takes_responses_rows_and_no_other_formats(raw, expected):
    assert classify(raw, ColumnMap()) == expected


def test_a_row_without_its_text_is_refused_not_read_as_nothing():
    for item in ({"type": "reasoning", "summary": "text"}, {"type": "message", "role": "assistant"}):
        row = _set("output.0", item)
        out = convert_responses(row, options=ConvertOptions())
        assert out.code == "malformed_row" and "output[0]" in out.message, out


def _logged(response: dict) -> dict:
    """ROW as a proxy logs a responses.create call: the request's body beside the response object."""
    request = {k: v for k, v in ROW.items() if k not in ("output", "status")}
    return {"request": request, "response": response}


RESPONSE = {"id": "resp_1", "object": "response", "status": "completed", "output": ROW["output"],
            "usage": {"input_tokens": 90, "output_tokens": 20}}


def test_a_logged_responses_call_reads_as_the_row(tmp_path):
    results, conversion = run_source(write_jsonl(tmp_path / "log.jsonl", [
        _logged(RESPONSE),
        _logged({**RESPONSE, "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}),
        _logged({**RESPONSE, "output": [{"type": "web_search_call", "id": "ws_1"}]}),
        _logged({"id": "resp_1", "object": "response"})]))
    assert codes(results) == ["kept", "response_cut_off", "non_text_content", "malformed_row"]
    assert {k: v for k, v in results[0].items() if k != "meta"} == convert_responses(ROW, options=ConvertOptions())
    assert "response.status is 'incomplete' (max_output_tokens)" in results[1].message
    assert "response.output[0]" in results[2].message and "response.output" in results[3].message
    assert dict(conversion.summary.formats) == {"chat_log": 4}


def test_a_batch_api_pair_of_responses_calls(tmp_path):
    from beam_sft.data.batch_api import BatchPair

    body = {k: v for k, v in ROW.items() if k not in ("output", "status")}
    pair = BatchPair(str(write_jsonl(tmp_path / "in.jsonl", [{"custom_id": "r1", "method": "POST",
                                                              "url": "/v1/responses", "body": body}])),
                     str(write_jsonl(tmp_path / "out.jsonl", [{"id": "b1", "custom_id": "r1", "error": None,
                                                               "response": {"status_code": 200, "body": RESPONSE}}])))
    results, _ = run_source(pair)
    assert codes(results) == ["kept"]
    assert results[0]["messages"][-1]["content"] == "Paris: 18 C. Rome: 22 C."
