"""The fast encoder's own decisions: when it refuses a tokenizer, when a row takes the slow path."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from beam_sft.encode.fast import FastEncoder, piece_mask, unsupported_reasons
from beam_sft.encode.fast.probe import probe, probe_rows
from beam_sft.encode.template_encode import TemplateEncoder
from beam_sft.errors import Rejection

ROW = {"messages": [{"role": "user", "content": "Hi there"},
                    {"role": "assistant", "reasoning_content": "Greet.", "content": "Hello!"}]}


def test_fixture_and_template_are_supported(tokenizer):
    assert unsupported_reasons(tokenizer) == []


def test_stripping_added_token_is_refused(tokenizer):
    from tokenizers import AddedToken

    tok = copy.deepcopy(tokenizer)
    tok.add_tokens([AddedToken("<|strip|>", lstrip=True, normalized=False)])
    assert any("strips" in reason for reason in unsupported_reasons(tok))
    with pytest.raises(ValueError):
        FastEncoder(tok)


def test_span_inside_a_piece_falls_back_exactly(tokenizer):
    """A generation block that opens mid-text: the row goes through apply_chat_template."""
    tok = copy.deepcopy(tokenizer)
    tok.chat_template = (
        "{% for m in messages %}{{ '<|start|>' + m.role + '<|message|>' }}"
        "{% if m.role == 'assistant' %}answer: {% generation %}{{ m.content }} done{% endgeneration %}"
        "{% else %}{{ m.content }}{% endif %}{{ '<|end|>' }}{% endfor %}"
    )
    fast = FastEncoder(tok)
    (got,) = fast.encode_batch([ROW])
    (want,) = TemplateEncoder(tok).encode_batch([ROW])
    assert np.array_equal(got.input_ids, want.input_ids)
    assert np.array_equal(got.assistant_masks, want.assistant_masks)
    assert fast.stats["fallback_rows"] == 1


def test_template_error_is_a_row_error(tokenizer):
    row = {**ROW, "chat_template_kwargs": {"reasoning_effort": "extreme"}}
    (got,) = FastEncoder(tokenizer).encode_batch([row])
    assert isinstance(got, Rejection) and got.code == "template_error"


def test_lone_surrogate_behaves_like_the_template(tokenizer):
    row = {"messages": [{"role": "user", "content": "bad \ud800 text"}, ROW["messages"][1]]}
    (got,) = FastEncoder(tokenizer).encode_batch([row, ROW])[:1]
    (want,) = TemplateEncoder(tokenizer).encode_batch([row])
    assert isinstance(want, Rejection) and isinstance(got, Rejection) and got.code == want.code


def test_repeated_long_pieces_are_cached_from_their_second_sighting(tokenizer):
    system = {"role": "system", "content": "You follow a long house style. " * 20}
    rows = [{"messages": [system, *ROW["messages"]]} for _ in range(3)]
    fast = FastEncoder(tokenizer)
    for row in rows:
        fast.encode_batch([row])
    long_pieces = [p for p in fast.cache if len(p) > 256]
    assert long_pieces and all("house style" in p for p in long_pieces)
    unique = {"messages": [{"role": "user", "content": "unique " * 100}, ROW["messages"][1]]}
    fast.encode_batch([unique])
    assert not any(p.startswith("unique") for p in fast.cache)


def test_piece_mask_refuses_nested_spans():
    assert piece_mask(np.array([0, 4, 8]), 12, [(4, 12), (8, 12)]) is None


def test_probe_passes_on_the_fixture_and_reports_a_mismatch(tokenizer):
    assert probe(FastEncoder(tokenizer), TemplateEncoder(tokenizer), probe_rows()).ok

    class Broken(TemplateEncoder):
        def encode_batch(self, rows, *, plain=False):
            out = super().encode_batch(rows)
            out[0].input_ids = out[0].input_ids[:-1]
            out[0].assistant_masks = out[0].assistant_masks[:-1]
            return out

    result = probe(FastEncoder(tokenizer), Broken(tokenizer), probe_rows())
    assert not result.ok and "probe row 0" in result.mismatch
