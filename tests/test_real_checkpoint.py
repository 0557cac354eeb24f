"""Real-checkpoint tier: runs only when $BEAM_MODEL_ID names the Beam checkpoint (a hub id or a
local path), as the README's "Tests" section says. It proves on the real tokenizer what the default tier proves on
the fixture: the tokenizer is fit, the checkpoint's shipped template and ours render the same text
and masks, and the fast encoder equals ``apply_chat_template``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import beam_rows

MODEL_ID = os.environ.get("BEAM_MODEL_ID")
pytestmark = pytest.mark.skipif(not MODEL_ID, reason="BEAM_MODEL_ID is not set: no real Beam checkpoint to test")

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def real_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(MODEL_ID)


@pytest.fixture(scope="module")
def ours_on_real(real_tokenizer):
    from transformers import AutoTokenizer

    from beam_sft.harmony.template import load_chat_template

    tok = AutoTokenizer.from_pretrained(MODEL_ID)
    tok.chat_template = load_chat_template()
    return tok


def test_checkpoint_tokenizer_is_fit(real_tokenizer):
    from beam_sft.harmony.check import check_tokenizer

    assert check_tokenizer(real_tokenizer) == []


@SETTINGS
@given(row=beam_rows())
def test_our_template_matches_the_checkpoint(real_tokenizer, ours_on_real, row):
    kwargs = dict(tools=row.get("tools"), return_dict=True, return_assistant_tokens_mask=True,
                  **row.get("chat_template_kwargs", {}))
    theirs = real_tokenizer.apply_chat_template(row["messages"], **kwargs)
    ours = ours_on_real.apply_chat_template(row["messages"], **kwargs)
    assert ours["input_ids"] == theirs["input_ids"]
    assert ours["assistant_masks"] == theirs["assistant_masks"]


@SETTINGS
@given(rows=st.lists(beam_rows(), min_size=1, max_size=4))
def test_fast_encoder_matches_template_on_checkpoint(real_tokenizer, rows):
    from beam_sft.encode.fast import FastEncoder
    from beam_sft.encode.template_encode import TemplateEncoder

    fast = FastEncoder(real_tokenizer).encode_batch(rows)
    want = TemplateEncoder(real_tokenizer).encode_batch(rows)
    for got, exp in zip(fast, want, strict=True):
        assert np.array_equal(got.input_ids, exp.input_ids)
        assert np.array_equal(got.assistant_masks, exp.assistant_masks)
