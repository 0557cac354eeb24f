"""The fast encoder against ``apply_chat_template``: identical ids, masks and errors, on every row.

Rows: hypothesis-generated valid BeamRows, broad (valid or not) conversations, and every row the
converters make of the shared corpus; with beam-sft's template and with the reference template;
on the fixture tokenizer and (``realistic`` tier) on the 200k-vocabulary gpt-oss tokenizer.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_sft.encode.fast import FastEncoder
from beam_sft.encode.template_encode import TemplateEncoder, encode_row
from beam_sft.errors import Rejection
from tests.strategies import any_conversations, beam_rows

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_same(fast_results, reference_results, rows):
    for row, got, want in zip(rows, fast_results, reference_results, strict=True):
        if isinstance(want, Rejection) or isinstance(got, Rejection):
            assert isinstance(got, Rejection) and isinstance(want, Rejection), (row, got, want)
            assert (got.code, got.detail) == (want.code, want.detail)
            continue
        assert np.array_equal(got.input_ids, want.input_ids), row
        assert np.array_equal(got.assistant_masks, want.assistant_masks), row


def broad_row(conversation: dict) -> dict:
    row = {"messages": conversation["messages"]}
    if conversation.get("tools") is not None:
        row["tools"] = conversation["tools"]
    if conversation.get("kwargs"):
        row["chat_template_kwargs"] = conversation["kwargs"]
    return row


@pytest.fixture(scope="module")
def encoders(tokenizer, reference_tokenizer):
    return {
        "ours": (FastEncoder(tokenizer), TemplateEncoder(tokenizer)),
        "reference": (FastEncoder(reference_tokenizer), TemplateEncoder(reference_tokenizer)),
    }


@pytest.mark.parametrize("template", ["ours", "reference"])
@SETTINGS
@given(rows=st.lists(beam_rows(), min_size=1, max_size=4))
def test_valid_rows_identical(encoders, template, rows):
    fast, reference = encoders[template]
    want = reference.encode_batch(rows)
    assert_same(fast.encode_batch(rows), want, rows)
    # prepare's path: rows decoded from JSON, rendered without the defensive copy
    decoded = [json.loads(json.dumps(row)) for row in rows]
    assert_same(fast.encode_batch(decoded, plain=True), want, rows)


@pytest.mark.parametrize("template", ["ours", "reference"])
@SETTINGS
@given(conversations=st.lists(any_conversations(), min_size=1, max_size=3))
def test_broad_rows_identical_including_errors(encoders, template, conversations):
    fast, reference = encoders[template]
    rows = [broad_row(c) for c in conversations]
    assert_same(fast.encode_batch(rows), reference.encode_batch(rows), rows)


def test_encode_row_is_apply_chat_template(tokenizer):
    row = {"messages": [{"role": "user", "content": "Hi"},
                        {"role": "assistant", "reasoning_content": "Greet.", "content": "Hello"}],
           "chat_template_kwargs": {"reasoning_effort": "low"}}
    out = tokenizer.apply_chat_template(row["messages"], return_dict=True, return_assistant_tokens_mask=True,
                                        reasoning_effort="low")
    assert encode_row(row, tokenizer) == {"input_ids": out["input_ids"], "assistant_masks": out["assistant_masks"]}


def corpus_rows(corpus) -> list[dict]:
    from beam_sft.convert.pipeline import iter_source

    rows = []
    for path in sorted(p for p in corpus.rglob("*") if p.suffix in (".json", ".jsonl")):
        for options in _corpus_options():
            rows.extend(r for r in iter_source(path, options=options) if not isinstance(r, Rejection))
    return rows


def _corpus_options():
    from beam_sft.convert.options import ConvertOptions

    # The default drops rows without reasoning; "unmask" keeps them with weight-0 turns, so the
    # weights are exercised on real data too.
    return [ConvertOptions(), ConvertOptions(missing_reasoning="unmask", require_declared_tools=False),
            ConvertOptions(missing_reasoning="truncate", tool_call_content="reasoning")]


@pytest.fixture(scope="module")
def converted_corpus(shared_corpus):
    rows = corpus_rows(shared_corpus)
    assert len(rows) > 100  # every row the converters keep, under three policies
    return rows


@pytest.mark.parametrize("template", ["ours", "reference"])
def test_every_corpus_row_identical(encoders, converted_corpus, template):
    fast, reference = encoders[template]
    for start in range(0, len(converted_corpus), 64):
        batch = converted_corpus[start:start + 64]
        assert_same(fast.encode_batch(batch), reference.encode_batch(batch), batch)
    assert fast.stats["fallback_rows"] == 0


def test_weights_zero_the_turn_in_both(encoders):
    fast, reference = encoders["ours"]
    row = {"messages": [{"role": "user", "content": "a"},
                        {"role": "assistant", "reasoning_content": "r1", "content": "one", "weight": 0},
                        {"role": "user", "content": "b"},
                        {"role": "assistant", "reasoning_content": "r2", "content": "two"}]}
    (got,), (want,) = fast.encode_batch([row]), reference.encode_batch([row])
    assert np.array_equal(got.assistant_masks, want.assistant_masks)
    unweighted = {**row, "messages": [{k: v for k, v in m.items() if k != "weight"} for m in row["messages"]]}
    (full,) = fast.encode_batch([unweighted])
    assert 0 < got.assistant_masks.sum() < full.assistant_masks.sum()


# ------------------------------------------------------------------ realistic tier (gpt-oss, 200k)

@pytest.mark.realistic
@pytest.mark.parametrize("template", ["ours", "reference"])
def test_realistic_corpus_identical(realistic_tokenizer, realistic_reference_tokenizer, converted_corpus, template):
    tok = realistic_tokenizer if template == "ours" else realistic_reference_tokenizer
    fast, reference = FastEncoder(tok), TemplateEncoder(tok)
    for start in range(0, len(converted_corpus), 64):
        batch = converted_corpus[start:start + 64]
        assert_same(fast.encode_batch(batch), reference.encode_batch(batch), batch)


@pytest.mark.realistic
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(rows=st.lists(beam_rows(), min_size=1, max_size=4), conversations=st.lists(any_conversations(), max_size=2))
def test_realistic_generated_rows_identical(realistic_tokenizer, rows, conversations):
    fast, reference = _realistic_encoders(realistic_tokenizer)
    rows = rows + [broad_row(c) for c in conversations]
    assert_same(fast.encode_batch(rows), reference.encode_batch(rows), rows)


_CACHE: dict = {}


def _realistic_encoders(tok):
    if id(tok) not in _CACHE:
        _CACHE[id(tok)] = (FastEncoder(tok), TemplateEncoder(tok))
    return _CACHE[id(tok)]
