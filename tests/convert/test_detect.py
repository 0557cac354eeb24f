"""--format auto: one decision per file, from the shapes of its first rows."""

from __future__ import annotations

import pytest

from beam_sft.convert import ColumnMap, SourceConversion
from beam_sft.convert.detect import classify, detect_format

COLUMNS = ColumnMap()


@pytest.mark.parametrize(
    "raw, expected",
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, "openai"),
        ([{"role": "user", "content": "hi"}], "openai"),
        ({"conversations": [{"role": "user", "content": "hi"}]}, "openai"),
        ({"answer_generation": {"train_messages": []}}, "openai"),
        ({"conversations": [{"from": "human", "value": "hi"}]}, "sharegpt"),
        # an empty list carries nothing: it does not outvote the turns beside it
        ({"conversations": [{"from": "human", "value": "hi"}], "messages": []}, "sharegpt"),
        ({"messages": [], "conversations": []}, "openai"),
        ({"conversations": [{"from": "gpt", "value": "<tool_call>{}</tool_call>"}]}, "hermes"),
        ({"messages": [{"role": "user", "content": "<tool_response>1</tool_response>"}]}, "hermes"),
        ({"messages": [{"role": "system", "content": "within <tool_call></tool_call> XML tags"}]}, "openai"),
        ({"example": "SYSTEM: x\nUSER: y\nASSISTANT:\n<tool_call>{}</tool_call>"}, "hermes"),
        ("<|start|>user<|message|>hi<|end|>", "harmony"),
        ({"text": "<|start|>user<|message|>hi<|end|>"}, "harmony"),
        # chat-template renderings: ChatML and Llama 3 transcripts are read by the Hermes reader
        ({"text": "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n"}, "hermes"),
        ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>", "hermes"),
        ({"text": "plain prose", "id": 1}, None),
        ({"foo": 1}, None),
        (42, None),
    ],
)
def test_classify(raw, expected):
    assert classify(raw, COLUMNS) == expected


def test_majority_decides_and_says_so():
    rows = [{"conversations": [{"from": "human", "value": "x"}]}] * 3 + [{"messages": []}]
    assert detect_format(rows, COLUMNS) == ("sharegpt", "sharegpt: 3 of 4 sampled rows")


def test_nothing_recognisable_falls_back_to_openai():
    fmt, why = detect_format([{"a": 1}, 3], COLUMNS)
    assert fmt == "openai" and "none of 2" in why


def test_detection_per_file(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"conversations": [{"from": "human", "value": "x"}]}\n')
    (tmp_path / "b.jsonl").write_text('{"messages": [{"role": "user", "content": "x"}]}\n')
    assert SourceConversion(tmp_path / "a.jsonl").format == "sharegpt"
    assert SourceConversion(tmp_path / "b.jsonl").format == "openai"
    assert SourceConversion(tmp_path / "b.jsonl", format="sharegpt").detection == "sharegpt: given"


def test_classify_reads_content_parts_and_never_raises_on_odd_parts():
    tagged = {"messages": [{"role": "assistant", "content": [{"type": "text", "text": "<tool_call>x</tool_call>"}]}]}
    assert classify(tagged, ColumnMap()) == "hermes"
    odd = {"messages": [{"role": "assistant", "content": [{"type": "text", "text": 5}, 3, None]}]}
    assert classify(odd, ColumnMap()) == "openai"
