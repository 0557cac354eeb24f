"""Reading token ids back into messages, turns and mask spans, by marker ids alone."""

from __future__ import annotations

import pytest

from beam_sft.harmony import markers
from beam_sft.harmony.spans import mask_runs
from beam_sft.verify.spans import MarkerIds, group_turns, parse_header, parse_messages


@pytest.fixture(scope="session")
def marker_ids(tokenizer) -> MarkerIds:
    return MarkerIds.from_tokenizer(tokenizer)


def parse(ids, marker_ids, tokenizer):
    """parse_messages with the row's text read as ``(start, end) -> text of tokens [start, end)``."""
    return parse_messages(ids, marker_ids, lambda a, b: tokenizer.decode(list(ids[a:b]), skip_special_tokens=False))



def test_labels_of_a_tool_loop(clean_records, tokenizer, marker_ids):
    messages, problems = parse(clean_records[1]["input_ids"], marker_ids, tokenizer)
    assert problems == []
    assert [m.label for m in messages] == [
        "system", "developer", "user", "assistant:analysis", "assistant→get_weather",
        "get_weather→assistant", "assistant:analysis", "assistant:final"]
    assert [m.role for m in messages] == ["system", "developer", "user", "assistant", "assistant", "tool",
                                          "assistant", "assistant"]
    assert [m.part for m in messages][3:5] == ["analysis", "tool_call"]


def test_turns_line_up_with_the_template_mask(clean_records, tokenizer, marker_ids):
    # Row 1 has two trained turns; the template's own mask (the conftest encoding) is the oracle.
    record = clean_records[1]
    messages, _ = parse(record["input_ids"], marker_ids, tokenizer)
    turns, problems = group_turns(messages)
    assert problems == []
    assert [(t.span_start, t.end + 1) for t in turns] == mask_runs(record["assistant_masks"])
    ids = record["input_ids"]
    assert all(ids[t.span_start] == marker_ids.channel for t in turns)
    assert [ids[t.end] for t in turns] == [marker_ids.call, marker_ids.ret]
    assert [len(t.messages) for t in turns] == [2, 2]


def test_parallel_calls_are_one_turn(clean_records, tokenizer, marker_ids):
    messages, _ = parse(clean_records[2]["input_ids"], marker_ids, tokenizer)
    turns, _ = group_turns(messages)
    assert [m.label for m in turns[0].messages] == [
        "assistant:analysis", "assistant→get_weather", "assistant→get_weather"]
    assert turns[0].messages[1].terminator == markers.END and turns[0].complete


def test_malformed_streams_become_problems(tokenizer, marker_ids):
    ids = tokenizer.encode("oops<|start|>user<|message|>hi<|end|><|start|>user<|message|>no end",
                           add_special_tokens=False)
    messages, problems = parse(ids, marker_ids, tokenizer)
    assert [m.label for m in messages] == ["user"]
    assert [p.message for p in problems] == ["tokens outside any message",
                                             "message without <|end|>, <|call|> or <|return|>"]
    assert problems[0].start == 0 and problems[-1].end == len(ids)


def test_unclosed_turn_is_a_problem(tokenizer, marker_ids):
    ids = tokenizer.encode("<|start|>assistant<|channel|>analysis<|message|>x<|end|>"
                           "<|start|>user<|message|>y<|end|>", add_special_tokens=False)
    messages, _ = parse(ids, marker_ids, tokenizer)
    turns, problems = group_turns(messages)
    assert len(turns) == 1 and not turns[0].complete
    assert [p.message for p in problems] == ["assistant turn not closed by <|return|> or <|call|>"]


@pytest.mark.parametrize(("header", "expected"), [
    ("assistant<|channel|>final", ("assistant", None, "final")),
    ("assistant to=a.b<|channel|>analysis <|constrain|>xml", ("assistant", "a.b", "analysis")),
    ("browse to=assistant<|channel|>analysis", ("browse", "assistant", "analysis")),
    ("developer", ("developer", None, None)),
])
def test_parse_header(header, expected):
    assert parse_header(header) == expected


def test_markers_must_be_single_tokens():
    from beam_sft.errors import VerificationError

    class Split:
        def encode(self, text, add_special_tokens=False):
            return [1, 2]

    with pytest.raises(VerificationError, match="not a single token"):
        MarkerIds.from_tokenizer(Split())
