"""Packing keeps sequences apart on every attention implementation we allow, shown by logits.

The measured problem: with only position_ids, a sequence packed after another gets different logits
than alone under sdpa, eager and flex_attention. The cause is the KV cache (on by default), which
makes transformers skip building the block-diagonal mask from the position-id restarts. Training
turns the cache off; the pre-flight compares logits on the trainer's own first packed batch.
"""

from __future__ import annotations

import pytest
import torch

from beam_sft.errors import PreflightError
from beam_sft.train.packing import check_isolation, disable_cache, isolation_diff, segments
from beam_sft.train.preflight import first_batches
from beam_sft.train.recipe import recipe_from_dict
from beam_sft.train.trainer import build

from .conftest import recipe_dict

IMPLEMENTATIONS = ["sdpa", "eager", "flex_attention"]
LEAKY = "beam_test_leaky"


def _packed_run(fixture_dir, prepared_dir, tmp_path, attn):
    recipe = recipe_from_dict(recipe_dict(
        fixture_dir, prepared_dir, tmp_path / "out",
        model={"attn_implementation": attn}, sft={"packing": True, "max_length": 384},
    ))
    return build(recipe)


def _packed_vs_alone(model, a, b):
    """Max logit difference of ``b`` packed after ``a`` (position ids only) against ``b`` alone,
    with the model's default forward (cache as configured)."""
    packed = torch.cat([a, b]).unsqueeze(0)
    positions = torch.cat([torch.arange(len(a)), torch.arange(len(b))]).unsqueeze(0)
    with torch.no_grad():
        alone = model(input_ids=b.unsqueeze(0)).logits[0]
        after = model(input_ids=packed, position_ids=positions).logits[0, len(a):]
    return float((alone - after).abs().max())


@pytest.mark.parametrize("attn", ["sdpa", "eager", pytest.param("flex_attention", marks=pytest.mark.slow)])
def test_the_cache_is_what_leaks_and_training_turns_it_off(fixture_dir, attn):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(fixture_dir, attn_implementation=attn).eval()
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randint(10, 800, (30,), generator=generator), torch.randint(10, 800, (20,), generator=generator)
    assert _packed_vs_alone(model, a, b) > 0.05  # the measured leak
    disable_cache(model)
    assert _packed_vs_alone(model, a, b) < 1e-4


@pytest.mark.parametrize("attn", IMPLEMENTATIONS)
def test_trainer_first_packed_batch_is_isolated(fixture_dir, prepared_dir, tmp_path, attn):
    run = _packed_run(fixture_dir, prepared_dir, tmp_path, attn)
    batch = first_batches(run.trainer, 1)[0]
    assert "position_ids" in batch and "attention_mask" not in batch
    assert len([s for s in segments(batch["position_ids"][0]) if s[1] - s[0] > 1]) >= 2
    result = check_isolation(run.trainer.model, batch, pad_token_id=run.tokenizer.pad_token_id,
                             attn_implementation=attn)
    assert result.compared_sequences >= 1
    assert result.max_abs_diff < 1e-4 and result.leak_diff == 0.0


@pytest.fixture
def leaky_attention():
    """An attention implementation that ignores sequence boundaries (plain causal attention over the
    whole packed row), registered only for this test."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def leaky(module, query, key, value, attention_mask, **kwargs):
        return sdpa_attention_forward(module, query, key, value, None, is_causal=True,
                                      **{k: v for k, v in kwargs.items() if k != "is_causal"})

    AttentionInterface.register(LEAKY, leaky)
    return LEAKY


def test_isolation_check_refuses_a_leaking_set_up(fixture_dir, prepared_dir, tmp_path, leaky_attention):
    from transformers import AutoModelForCausalLM

    run = _packed_run(fixture_dir, prepared_dir, tmp_path, "sdpa")
    batch = first_batches(run.trainer, 1)[0]
    leaky = AutoModelForCausalLM.from_pretrained(fixture_dir, attn_implementation=leaky_attention)
    disable_cache(leaky)
    result = isolation_diff(leaky, batch, pad_token_id=run.tokenizer.pad_token_id)
    assert result.max_abs_diff > 0.05 and result.leak_diff > 0.05  # both proofs see it
    with pytest.raises(PreflightError, match="packing leaks attention"):
        check_isolation(leaky, batch, pad_token_id=run.tokenizer.pad_token_id, attn_implementation=leaky_attention)


def test_training_stops_before_step_one_when_packing_leaks(fixture_dir, prepared_dir, tmp_path, leaky_attention):
    import dataclasses

    from beam_sft.train.callbacks import read_losses
    from beam_sft.train.trainer import train

    recipe = recipe_from_dict(recipe_dict(fixture_dir, prepared_dir, tmp_path / "out",
                                          sft={"packing": True, "max_length": 384}))
    # The recipe schema refuses unknown implementations; slip the leaky one past it to test the pre-flight.
    recipe = dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, attn_implementation=leaky_attention))
    with pytest.raises(PreflightError, match="packing leaks attention"):
        train(recipe)
    assert read_losses(tmp_path / "out") == []
