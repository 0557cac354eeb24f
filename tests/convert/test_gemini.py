"""The gemini reader on rows shaped as the Vertex AI tuning docs' examples (systemInstruction,
contents of role/parts, functionCall/functionResponse, tools of functionDeclarations with Gemini's
upper-case schema types), each quirk handled or rejected with a code."""

from __future__ import annotations

import pytest

from beam_sft.convert.gemini import convert_gemini
from beam_sft.convert.options import ConvertOptions
from tests.convert.readers_util import codes, run_source, write_jsonl

TOOLS = [{"functionDeclarations": [{
    "name": "get_current_weather", "description": "Get the current weather in a given location",
    "parameters": {"type": "OBJECT", "properties": {
        "location": {"type": "STRING", "description": "The city name, e.g. San Francisco"},
        "unit": {"type": "STRING", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"]}}]}]
# The Vertex AI function-calling tuning example's shape: a call, its response, then the text answer.
ROW = {
    "systemInstruction": {"role": "system", "parts": [{"text": "You are a weather assistant."}]},
    "contents": [
        {"role": "user", "parts": [{"text": "What is the weather in Boston?"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "get_current_weather", "args": {"location": "Boston"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "get_current_weather",
                                                          "response": {"temperature": 38, "unit": "F"}}}]},
        {"role": "model", "parts": [{"text": "It is 38 degrees Fahrenheit in Boston."}]}],
    "tools": TOOLS}
THOUGHTS = {"contents": [
    {"role": "user", "parts": [{"text": "2+2?"}]},
    {"role": "model", "parts": [{"text": "Add the numbers.", "thought": True}, {"text": "4",
                                                                                 "thoughtSignature": "c2ln"}]}]}


def test_a_vertex_function_calling_row():
    row = convert_gemini(ROW, options=ConvertOptions())
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert row["messages"][0]["content"] == "You are a weather assistant."
    call = row["messages"][2]["tool_calls"][0]
    assert call["function"] == {"name": "get_current_weather", "arguments": {"location": "Boston"}}
    assert row["messages"][3]["name"] == "get_current_weather"
    assert row["messages"][3]["content"] == '{"temperature": 38, "unit": "F"}'
    params = row["tools"][0]["function"]["parameters"]  # Gemini's OBJECT/STRING in JSON Schema's words
    assert params["type"] == "object" and params["properties"]["location"]["type"] == "string"


def test_thought_parts_are_reasoning_and_signatures_are_ignored():
    row = convert_gemini(THOUGHTS, options=ConvertOptions())
    assert row["messages"][1] == {"role": "assistant", "reasoning_content": "Add the numbers.", "content": "4"}


def test_function_role_and_id_and_content_response():
    row = {**ROW, "contents": [ROW["contents"][0],
                               {"role": "model", "parts": [{"functionCall": {"id": "c9", "name": "get_current_weather",
                                                                             "args": {"location": "Boston"}}}]},
                               {"role": "function", "parts": [{"functionResponse": {
                                   "id": "c9", "name": "get_current_weather", "response": {"content": "38 F"}}}]},
                               ROW["contents"][3]]}
    out = convert_gemini(row, options=ConvertOptions())
    assert out["messages"][2]["tool_calls"][0]["id"] == "c9"
    assert out["messages"][3] == {"role": "tool", "tool_call_id": "c9", "name": "get_current_weather",
                                  "content": "38 F"}


def _with(i: int, content: dict) -> dict:
    contents = list(ROW["contents"])
    contents[i] = content
    return {**ROW, "contents": contents}


@pytest.mark.parametrize("row, code", [
    (_with(0, {"role": "user", "parts": [{"fileData": {"mimeType": "image/png", "fileUri": "gs://b/x.png"}}]}),
     "non_text_content"),
    (_with(2, {"role": "user", "parts": [{"text": "here"}, {"functionResponse": {
        "name": "get_current_weather", "response": {}}}]}), "tool_response_mixed"),
    (_with(0, {"parts": [{"text": "no role"}]}), "malformed_row"),
    (_with(0, {"role": "user", "parts": []}), "missing_content"),
    (_with(0, {"role": "user", "parts": [{"functionCall": {"name": "x", "args": {}}}]}), "malformed_tool_call"),
    ({**ROW, "tools": [{"googleSearch": {}}]}, "bad_tool_definition"),
    ({**ROW, "tools": []}, "undeclared_tool"),
    (_with(0, {"role": "narrator", "parts": [{"text": "x"}]}), "unknown_role"),
])
def test_quirks_rejected_with_their_code(tmp_path, row, code):
    results, _ = run_source(write_jsonl(tmp_path / "vertex.jsonl", [ROW, row, THOUGHTS]))
    assert codes(results) == ["kept", code, "kept"], [getattr(r, "message", "") for r in results]


def test_auto_detects_gemini_rows_in_a_crlf_file(tmp_path):
    path = write_jsonl(tmp_path / "vertex.jsonl", [ROW, THOUGHTS], newline="\r\n", blank_between=True)
    results, conversion = run_source(path)
    assert codes(results) == ["kept", "kept"] and dict(conversion.summary.formats) == {"gemini": 2}
