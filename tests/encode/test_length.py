"""The length policy: drop, or trim whole trailing turns (never inside one)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from beam_sft.encode.fast import FastEncoder
from beam_sft.encode.length import fit_by_trimming, turn_cuts
from beam_sft.errors import Rejection
from tests.strategies import beam_rows


def turns(n: int, *, tool: bool = False) -> list[dict]:
    messages = [{"role": "system", "content": "Be brief."}]
    for i in range(n):
        messages.append({"role": "user", "content": f"question {i} " * 5})
        if tool and i == n - 1:
            messages.append({"role": "assistant", "reasoning_content": "call", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]})
            messages.append({"role": "tool", "tool_call_id": "c", "name": "f", "content": "result " * 5})
        messages.append({"role": "assistant", "reasoning_content": f"think {i} " * 5, "content": f"answer {i} " * 5})
    return messages


def test_cuts_are_before_user_messages_after_trained_answers():
    messages = turns(3, tool=True)
    assert turn_cuts(messages) == [3, 5, 9]
    messages[4]["weight"] = 0
    assert turn_cuts(messages) == [3, 9]


def test_trim_keeps_the_longest_prefix_that_fits(tokenizer):
    encoder = FastEncoder(tokenizer)
    row = {"messages": turns(4, tool=True), "meta": {"source": "s", "row": 0}}
    full = encoder.encode(row)
    two = encoder.encode({"messages": row["messages"][:5]})
    three = encoder.encode({"messages": row["messages"][:7]})
    trimmed, encoded = fit_by_trimming(row, len(full.input_ids), len(three.input_ids), encoder.encode)
    assert len(trimmed["messages"]) == 7 and trimmed["meta"]["trimmed_messages"] == len(row["messages"]) - 7
    assert list(encoded.input_ids) == list(three.input_ids)
    trimmed, _ = fit_by_trimming(row, len(full.input_ids), len(three.input_ids) - 1, encoder.encode)
    assert len(trimmed["messages"]) == 5 and len(two.input_ids) < len(three.input_ids)


def test_nothing_fits_is_too_long(tokenizer):
    encoder = FastEncoder(tokenizer)
    row = {"messages": turns(2)}
    with pytest.raises(Rejection) as info:
        fit_by_trimming(row, 10_000, 5, encoder.encode)
    assert info.value.code == "too_long"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(row=beam_rows())
def test_trimmed_rows_end_on_a_trained_assistant_and_fit(tokenizer, row):
    encoder = _encoder(tokenizer)
    full = encoder.encode(row)
    limit = max(1, len(full.input_ids) * 2 // 3)
    try:
        trimmed, encoded = fit_by_trimming(row, len(full.input_ids), limit, encoder.encode)
    except Rejection as exc:
        assert exc.code == "too_long"
        return
    kept = trimmed["messages"]
    assert len(encoded.input_ids) <= limit
    assert kept == row["messages"][:len(kept)]
    assert kept[-1]["role"] == "assistant" and kept[-1].get("weight", 1) == 1
    assert row["messages"][len(kept)]["role"] == "user"


_ENCODERS: dict = {}


def _encoder(tok):
    if id(tok) not in _ENCODERS:
        _ENCODERS[id(tok)] = FastEncoder(tok)
    return _ENCODERS[id(tok)]
