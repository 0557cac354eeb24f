"""The glaive reader on rows shaped as glaiveai/glaive-function-calling-v2 writes them (a ``system``
string of pretty-printed JSON functions, one ``chat`` string), each quirk handled or rejected with a code."""

from __future__ import annotations

import json

import pytest

from beam_sft.convert.glaive import convert_glaive
from beam_sft.convert.options import ConvertOptions
from beam_sft.convert.rows import Rejection
from tests.convert.readers_util import codes, run_source, write_jsonl

FUNCTION = {"name": "calculate_tip", "description": "Calculate the tip amount for a bill",
            "parameters": {"type": "object", "properties": {
                "bill_amount": {"type": "number", "description": "The total bill amount"},
                "tip_percentage": {"type": "number", "description": "The percentage of tip to give"}},
                "required": ["bill_amount", "tip_percentage"]}}
SYSTEM = ("SYSTEM: You are a helpful assistant with access to the following functions. Use them if required -\n"
          + json.dumps(FUNCTION, indent=4) + "\n")
# The chat string as glaive writes it: heads at line starts, three newlines between turns, each
# assistant turn ending in <|endoftext|>, the arguments single-quoted JSON text inside the JSON call.
CHAT = ("USER: Hi, I need help with calculating the tip for my bill. The total amount is $50 and I want to "
        "give a 20% tip.\n\n\nASSISTANT: <functioncall> {\"name\": \"calculate_tip\", \"arguments\": "
        "'{\"bill_amount\": 50, \"tip_percentage\": 20}'} <|endoftext|>\n\n\nFUNCTION RESPONSE: "
        "{\"tip_amount\": 10}\n\n\nASSISTANT: The tip amount for your bill should be $10. <|endoftext|>\n\n\n"
        "USER: Thank you!\n\n\nASSISTANT: You're welcome! <|endoftext|>\n")
ROW = {"system": SYSTEM, "chat": CHAT}
NO_FUNCTIONS = {"system": "SYSTEM: You are a helpful assistant, with no access to external functions.\n",
                "chat": "USER: Tell me a joke.\n\n\nASSISTANT: Why did the scarecrow win an award? Because he was "
                "outstanding in his field! <|endoftext|>\n"}


def test_a_glaive_call_row_becomes_calls_results_and_tools():
    row = convert_glaive(ROW, options=ConvertOptions())
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant", "tool", "assistant", "user",
                                                     "assistant"]
    assert row["messages"][0]["content"] == ("You are a helpful assistant with access to the following functions. "
                                             "Use them if required")
    call = row["messages"][2]["tool_calls"][0]
    assert call["function"] == {"name": "calculate_tip", "arguments": {"bill_amount": 50, "tip_percentage": 20}}
    assert row["messages"][3] == {"role": "tool", "tool_call_id": call["id"], "name": "calculate_tip",
                                  "content": '{"tip_amount": 10}'}
    assert row["messages"][4]["content"] == "The tip amount for your bill should be $10."  # separator taken off
    assert [t["function"]["name"] for t in row["tools"]] == ["calculate_tip"]
    assert "<|endoftext|>" not in json.dumps(row)


def test_no_functions_and_plain_json_arguments():
    row = convert_glaive(NO_FUNCTIONS, options=ConvertOptions())
    assert "tools" not in row and row["messages"][0]["content"].endswith("no access to external functions.")
    plain = {**ROW, "chat": CHAT.replace("'{\"bill_amount\": 50, \"tip_percentage\": 20}'",
                                         '{"bill_amount": 50, "tip_percentage": 20}')}
    assert convert_glaive(plain, options=ConvertOptions())["messages"][2]["tool_calls"][0]["function"]["arguments"] == {
        "bill_amount": 50, "tip_percentage": 20}


def test_two_functions_in_the_system_string():
    other = {"name": "get_news", "parameters": {"type": "object", "properties": {}}}
    system = SYSTEM + "\n" + json.dumps(other, indent=4) + "\n"
    row = convert_glaive({**ROW, "system": system}, options=ConvertOptions())
    assert [t["function"]["name"] for t in row["tools"]] == ["calculate_tip", "get_news"]


@pytest.mark.parametrize("row, code", [
    ({**ROW, "chat": CHAT.replace("You're welcome!", "You're <|endoftext|> welcome!")}, "separator_in_text"),
    ({**ROW, "chat": CHAT.replace("'{\"bill_amount\": 50, \"tip_percentage\": 20}'", "'{bill_amount: 50}'")},
     "invalid_json"),
    ({**ROW, "chat": CHAT.replace("<functioncall> {\"name\"", "<functioncall> call {\"name\"")},
     "malformed_tool_call"),
    ({**ROW, "system": SYSTEM.replace('"name": "calculate_tip"', '"name": "calculate_tip", "name": "x"')},
     "duplicate_key"),
    ({**ROW, "system": SYSTEM + "\n{not json"}, "bad_tool_definition"),
    ({**ROW, "system": NO_FUNCTIONS["system"]}, "undeclared_tool"),
    ({"system": SYSTEM, "chat": "Hello " + CHAT}, "malformed_row"),
    ({"system": SYSTEM}, "malformed_row"),
])
def test_quirks_rejected_with_their_code(tmp_path, row, code):
    results, conversion = run_source(write_jsonl(tmp_path / "glaive.jsonl", [ROW, row]), fmt="glaive")
    assert codes(results) == ["kept", code], [getattr(r, "message", "") for r in results]


def test_auto_reads_a_crlf_file_with_blank_lines_between_records(tmp_path):
    """glaive's published JSON Lines re-saved on Windows: CRLF, a blank line between records."""
    path = write_jsonl(tmp_path / "glaive.jsonl", [ROW, NO_FUNCTIONS, ROW], newline="\r\n", blank_between=True)
    assert b"\r\n\r\n" in path.read_bytes()
    results, conversion = run_source(path)
    assert codes(results) == ["kept", "kept", "kept"] and conversion.format == "glaive"
    assert dict(conversion.summary.formats) == {"glaive": 3}
    assert [r["meta"]["row"] for r in results] == [0, 1, 2]


def test_without_reasoning_the_policy_decides(tmp_path):
    results, _ = run_source(write_jsonl(tmp_path / "g.jsonl", [ROW, NO_FUNCTIONS]), fill=None)
    assert codes(results) == ["missing_reasoning", "missing_reasoning"]
    assert isinstance(results[0], Rejection) and results[0].source.endswith("g.jsonl") and results[0].row == 0
