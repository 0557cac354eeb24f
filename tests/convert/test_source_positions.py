"""A rejection names the entry of the SOURCE row at fault (``conversations[3]``, ``contents[2].parts[1]``,
``traj[4]``), never its index in the converted row, which a system column, a merged call turn, a
split tool result or a dropped tools-only prompt shifts. Each row below is built so that the two
indices differ, and the message must name the source's."""

from __future__ import annotations

import json

import pytest

from beam_sft.convert import ConvertOptions
from beam_sft.convert.pipeline import convert_row
from beam_sft.convert.rows import Rejection

LOOSE = ConvertOptions(require_declared_tools=False)


def rejected(raw, fmt, options=LOOSE) -> Rejection:
    result = convert_row(raw, format=fmt, options=options, source="s.jsonl", row=0)
    assert isinstance(result, Rejection), result
    return result


def call(name="f", args=None):
    return {"name": name, "arguments": args or {}}


def test_sharegpt_system_column_and_merged_call_turn():
    # converted: system, user, assistant (gpt + function_call merged), tool, assistant -> messages[4]
    row = {"system": "Be brief.", "conversations": [
        {"from": "human", "value": "q"},
        {"from": "gpt", "value": "<think>r</think>"},
        {"from": "function_call", "value": json.dumps(call())},
        {"from": "observation", "value": "42"},
        {"from": "gpt", "value": "no reasoning here"}]}
    r = rejected(row, "sharegpt")
    assert r.code == "missing_reasoning"
    assert r.message.startswith("conversations[4] ") and "messages[" not in r.message


def test_sharegpt_merged_turn_names_both_entries():
    row = {"conversations": [
        {"from": "human", "value": "q"},
        {"from": "gpt", "value": "<think>r</think>"},
        {"from": "function_call", "value": json.dumps(call("bad name"))},
        {"from": "observation", "value": "42"},
        {"from": "gpt", "value": "<think>r</think>done"}]}
    r = rejected(row, "sharegpt")
    assert r.code == "bad_tool_name"
    assert r.message.startswith("conversations[1..2].tool_calls[0]"), r.message


def test_sharegpt_finish_row_messages_name_the_source_entry():
    """Rejections raised while the drafts are assembled (text after a call) too."""
    row = {"system": "S", "conversations": [
        {"from": "human", "value": "q"},
        {"from": "gpt", "value": "<think>r</think>", "tool_calls": [{"function": call()}]},
        {"from": "observation", "value": "1"},
        {"from": "gpt", "value": "<think>r</think>", "content": None,
         "tool_calls": [{"function": call()}]}]}
    row["conversations"][3] = {"from": "gpt", "value": [{"type": "tool_call", "value": call()},
                                                        {"type": "text", "text": "after the call"}]}
    r = rejected(row, "sharegpt")
    assert r.code == "text_after_tool_call"
    assert r.message.startswith("conversations[3] "), r.message


def test_gemini_system_instruction_and_split_function_responses():
    # converted: system, user, assistant (2 calls), tool, tool, assistant -> messages[5]; source contents[3]
    row = {"systemInstruction": {"parts": [{"text": "S"}]}, "contents": [
        {"role": "user", "parts": [{"text": "q"}]},
        {"role": "model", "parts": [{"text": "plan", "thought": True},
                                    {"functionCall": {"name": "a", "args": {}}},
                                    {"functionCall": {"name": "b", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "a", "response": {"content": "1"}}},
                                   {"functionResponse": {"name": "b", "response": {"content": "2"}}}]},
        {"role": "model", "parts": [{"text": "no thought"}]}]}
    r = rejected(row, "gemini")
    assert r.code == "missing_reasoning"
    assert r.message.startswith("contents[3] "), r.message


def test_gemini_function_response_part_is_named():
    row = {"contents": [
        {"role": "user", "parts": [{"text": "q"}]},
        {"role": "model", "parts": [{"text": "plan", "thought": True},
                                    {"functionCall": {"name": "a", "args": {}}},
                                    {"functionCall": {"name": "b", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "a", "response": {"content": "1"}}},
                                   {"functionResponse": {"name": "c", "response": {"content": "2"}}}]},
        {"role": "model", "parts": [{"text": "t", "thought": True}, {"text": "done"}]}]}
    r = rejected(row, "gemini")
    assert r.code == "tool_result_unmatched"
    assert r.message.startswith("contents[2].parts[1] "), r.message


def test_bedrock_system_blocks_and_tool_results():
    row = {"system": [{"text": "S"}], "messages": [
        {"role": "user", "content": [{"text": "q"}]},
        {"role": "assistant", "content": [{"reasoningContent": {"reasoningText": {"text": "r"}}},
                                          {"toolUse": {"toolUseId": "t1", "name": "a", "input": {}}},
                                          {"toolUse": {"toolUseId": "t2", "name": "b", "input": {}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "1"}]}},
                                     {"toolResult": {"toolUseId": "t2", "content": [{"text": "2"}]}}]},
        {"role": "assistant", "content": [{"text": "no reasoning"}]}]}
    r = rejected(row, "bedrock")
    assert r.code == "missing_reasoning"
    assert r.message.startswith("messages[3] "), r.message  # converted: messages[5]


def test_bedrock_block_index_counts_skipped_cache_points():
    row = {"messages": [
        {"role": "user", "content": [{"text": "q"}]},
        {"role": "assistant", "content": [{"cachePoint": {"type": "default"}}, {"text": "answer"},
                                          {"reasoningContent": {"reasoningText": {"text": "late"}}}]}]}
    r = rejected(row, "bedrock")
    assert r.code == "interleaved_reasoning"
    assert r.message.startswith("messages[1].content[2]"), r.message


@pytest.mark.parametrize("row, where", [
    ({"task": 1, "traj": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}, "traj[1]"),
    ({"prompt": [{"role": "user", "content": "q"}], "completion": [{"role": "assistant", "content": "a"}]},
     "completion[0]"),
    ({"dialog": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}, "dialog[1]"),
    # a system prompt that only declared tools is dropped (converted: messages[1])
    ({"messages": [{"role": "system", "content": '<tools>[{"type": "function", "function": {"name": "f"}}]</tools>'},
                   {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}, "messages[2]"),
    # a call turn joins the assistant turn before it (converted: messages[3])
    ({"messages": [{"role": "user", "content": "q"},
                   {"role": "assistant", "content": "<think>r</think>"},
                   {"role": "function_call", "content": json.dumps(call())},
                   {"role": "tool", "content": "1"},
                   {"role": "assistant", "content": "a"}]}, "messages[4]"),
])
def test_openai_names_the_list_it_read(row, where):
    r = rejected(row, "openai")
    assert r.code == "missing_reasoning"
    assert r.message.startswith(f"{where} "), r.message


def test_openai_column_map_names_the_mapped_key():
    options = ConvertOptions(columns=ConvertOptions().columns.__class__(messages="dialog"))
    r = rejected({"dialog": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}, "openai",
                 options)
    assert r.message.startswith("dialog[1] "), r.message


def test_hermes_sharegpt_container_with_system_column():
    row = {"system": "S", "conversations": [
        {"from": "human", "value": "q"},
        {"from": "gpt", "value": '<think>r</think><tool_call>{"name": "f", "arguments": {}}</tool_call> late'}]}
    r = rejected(row, "hermes")
    assert r.code == "text_after_tool_call"
    assert r.message.startswith("conversations[1] "), r.message


def test_flat_history_turn():
    row = {"history": [["q0", "a0"]], "instruction": "q", "output": "a", "reasoning": "r"}
    r = rejected(row, "alpaca")
    assert r.code == "missing_reasoning"
    assert r.message.startswith("history[0][1] "), r.message


def test_flat_answer_field_path():
    row = {"instruction": "q", "output": "a", "reasoning": "<think>r</think>"}
    r = rejected(row, "alpaca")
    assert r.code == "reasoning_markup_in_text"
    assert r.message.startswith("output+reasoning (reasoning_content) "), r.message


def test_chat_log_response_and_request_results():
    row = {"request": {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "q"}]},
           "response": {"choices": [{"message": {"role": "assistant", "content": "a"}, "finish_reason": "stop"}]}}
    r = rejected(row, "chat_log")
    assert r.code == "missing_reasoning"
    assert r.message.startswith("response.choices[0].message "), r.message


def test_glaive_turn_counts_from_the_chat_string():
    row = {"system": "SYSTEM: You are helpful.", "chat": "USER: q\n\n\nASSISTANT: a <|endoftext|>\n"}
    r = rejected(row, "glaive")
    assert r.code == "missing_reasoning"
    assert r.message.startswith("chat turn 1 "), r.message  # converted: messages[2]


def test_harmony_turns_are_named_by_their_transcript_messages():
    text = ("<|start|>developer<|message|># Instructions\n\nS<|end|>"
            "<|start|>user<|message|>q<|end|>"
            "<|start|>assistant<|channel|>analysis<|message|>r<|end|>"
            "<|start|>assistant<|channel|>final<|message|>a<|return|>"
            "<|start|>user<|message|>q2<|end|>"
            "<|start|>assistant<|channel|>final<|message|>b<|return|>")
    r = rejected({"text": text}, "harmony")
    assert r.code == "harmony_malformed_turn"  # (the second turn opens without its analysis message)
    assert r.message.startswith("transcript message 5: "), r.message  # was "assistant turn 4": a draft count


@pytest.mark.parametrize("turn, code", [
    ({"from": "gpt", "value": "answer <think>r</think>"}, "interleaved_reasoning"),
    ({"from": "gpt", "value": "<think>r</think>a", "reasoning_content": "other"}, "conflicting_reasoning"),
    ({"from": "gpt", "value": "<think>r"}, "unclosed_reasoning_tag"),
])
def test_reasoning_readers_rejections_name_the_turn(turn, code):
    """reasoning.py reads a text and knows no turn: its rejections are named by the turn they came from."""
    r = rejected({"system": "S", "conversations": [{"from": "human", "value": "q"}, turn]}, "sharegpt")
    assert r.code == code
    assert r.message.startswith("conversations[1]: "), r.message
