"""Mixture-of-experts training in one process on Beam's own architecture (the ``beam`` fixture): its
routers found, no aux loss, fp32 routing, the correction bias unchanged; LoRA on attention and experts
with frozen routers, merge, ZeRO-3 leaf marking, packing isolation on sliding windows (and on gpt_oss's
sinks, and its softmax router's aux loss, which Beam does not have)."""

from __future__ import annotations

import argparse
import json

import pytest
import torch

from beam_sft.errors import ConfigError, PreflightError
from beam_sft.train.callbacks import read_losses
from beam_sft.train.moe import moe_layout
from beam_sft.train.packing import check_isolation, disable_cache, isolation_diff
from beam_sft.train.preflight import first_batches
from beam_sft.train.recipe import recipe_from_dict
from beam_sft.train.trainer import build, train

from .conftest import recipe_dict

ARCHES = ["beam", "deepseek_v3"]  # deepseek_v3: shared experts and MLA, which Beam does not have
ATTN = {"beam": "sdpa", "gpt_oss": "eager", "deepseek_v3": "sdpa"}  # gpt-oss has no sdpa path in transformers


def _recipe(model_dir, prepared, out, arch, **sections):
    model = {"attn_implementation": ATTN[arch], **sections.pop("model", {})}
    return recipe_from_dict(recipe_dict(model_dir, prepared, out, model=model, **sections))


def test_layout_finds_blocks_routers_and_fused_experts(moe_dirs, fixture_dir):
    from transformers import AutoModelForCausalLM

    gpt = moe_layout(AutoModelForCausalLM.from_pretrained(moe_dirs["gpt_oss"]))
    assert len(gpt.blocks) == 4 and all(r.endswith(".mlp.router") for r in gpt.routers)
    assert gpt.expert_parameters == ("mlp.experts.gate_up_proj", "mlp.experts.down_proj")
    beam_model = AutoModelForCausalLM.from_pretrained(moe_dirs["beam"])
    beam = moe_layout(beam_model)
    sparse = [i for i, kind in enumerate(beam_model.config.mlp_layer_types) if kind == "sparse"]
    # mlp.gate is the router; the dense layer's mlp.gate_proj and the attention's self_attn.gate_proj are not.
    assert beam.blocks == tuple(f"model.layers.{i}.mlp" for i in sparse) and 0 not in sparse
    assert beam.routers == tuple(f"model.layers.{i}.mlp.gate" for i in sparse)
    assert beam.expert_parameters == ("mlp.experts.gate_up_proj", "mlp.experts.down_proj")
    deepseek = moe_layout(AutoModelForCausalLM.from_pretrained(moe_dirs["deepseek_v3"]))
    assert deepseek.blocks == ("model.layers.1.mlp",) and deepseek.routers == ("model.layers.1.mlp.gate",)
    assert not moe_layout(AutoModelForCausalLM.from_pretrained(fixture_dir)).is_moe


def test_aux_loss_is_in_the_logged_loss(moe_dirs, prepared_dir, tmp_path):
    """Step 1 starts from the same weights and batch: the difference is exactly coef x aux_loss."""
    sft = {"max_steps": 1}
    with_aux = train(_recipe(moe_dirs["gpt_oss"], prepared_dir, tmp_path / "a", "gpt_oss", sft=sft))
    without = train(_recipe(moe_dirs["gpt_oss"], prepared_dir, tmp_path / "b", "gpt_oss",
                            sft={**sft, "router_aux_loss_coef": 0.0}))
    a, b = read_losses(with_aux)[0], read_losses(without)[0]
    assert "aux_loss" in a and "aux_loss" not in b
    coef = 0.01  # the fixture config's router_aux_loss_coef
    assert a["loss"] - b["loss"] == pytest.approx(coef * a["aux_loss"], rel=1e-3, abs=1e-6)
    assert a["loss"] > b["loss"]


@pytest.mark.parametrize("arch", ARCHES)
def test_lora_on_attention_and_experts_saves_reloads_and_merges(arch, moe_dirs, prepared_dir, tmp_path, fixture_dir):
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from beam_sft.train import cli

    base_dir = moe_dirs[arch]
    out = train(_recipe(base_dir, prepared_dir, tmp_path / "lora", arch,
                        lora={"r": 4, "alpha": 8, "dropout": 0.0, "experts": True},
                        sft={"max_steps": 3, "learning_rate": 1e-2}))
    weights = load_file(out / "adapter_model.safetensors")
    experts = {k: v for k, v in weights.items() if ".experts." in k and "lora_B" in k}
    attention = {k: v for k, v in weights.items() if "self_attn" in k and "lora_B" in k}
    assert experts and attention
    assert all(float(v.abs().max()) > 0 for v in experts.values()), "expert LoRA trained away from zero"
    assert not [k for k in weights if ".router." in k or ".mlp.gate." in k], "routers stay frozen"
    if arch == "beam":  # the correction biases of the base are untouched by training
        assert json.loads((out / "beam_run.json").read_text())["routers"]["correction_biases_unchanged"] == 5

    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["merge", str(out), "-o", str(tmp_path / "merged")])
    assert args.func(args) == 0
    ids = torch.tensor([[5, 17, 300, 42, 9, 100] * 6])  # longer than the sliding window
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").eval()
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir), str(out)).eval()
    plain = AutoModelForCausalLM.from_pretrained(base_dir).eval()
    with torch.no_grad():
        want, got, before = adapted(ids).logits, merged(ids).logits, plain(ids).logits
    assert torch.allclose(got, want, atol=1e-4)
    assert not torch.allclose(got, before, atol=1e-4)
    if arch == "beam":
        _merge_refusals(out, moe_dirs, fixture_dir, tmp_path)


def _merge_refusals(adapter, moe_dirs, dense, tmp_path):
    """A Beam adapter folded into another architecture (PEFT warned only), and an adapter folder whose
    tokenizer does not load (found after the weights were written, leaving a -o that blocked a retry):
    one error, nothing written."""
    import shutil

    from beam_sft.errors import BeamError
    from beam_sft.train.merge import merge_adapter

    with pytest.raises(BeamError, match="does not fit .* tensors found no module"):  # PEFT: a warning only
        merge_adapter(adapter, tmp_path / "m-other", base=str(dense))
    with pytest.raises(BeamError, match="does not fit .*size mismatch"):
        merge_adapter(adapter, tmp_path / "m-other", base=str(moe_dirs["deepseek_v3"]))
    broken = shutil.copytree(adapter, tmp_path / "no-tokenizer", ignore=shutil.ignore_patterns("tokenizer*",
                                                                                              "chat_template*"))
    with pytest.raises(BeamError, match="tokenizer does not load"):
        merge_adapter(broken, tmp_path / "m-broken")
    assert not (tmp_path / "m-other").exists() and not (tmp_path / "m-broken").exists()
    assert not list(tmp_path.glob(".m-*"))


@pytest.mark.parametrize("arch", ARCHES)
def test_routers_are_frozen_under_lora_unless_asked(arch, moe_dirs, prepared_dir, tmp_path):
    layout_routers = {"beam": ".mlp.gate.", "deepseek_v3": ".mlp.gate."}[arch]
    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "experts": True}
    run = build(_recipe(moe_dirs[arch], prepared_dir, tmp_path / "a", arch, lora=lora,
                        preflight={"enabled": False}))
    trainable = [n for n, p in run.trainer.model.named_parameters() if p.requires_grad]
    assert trainable and not [n for n in trainable if layout_routers in n]
    run = build(_recipe(moe_dirs[arch], prepared_dir, tmp_path / "b", arch, lora={**lora, "train_routers": True},
                        preflight={"enabled": False}))
    trainable = [n for n, p in run.trainer.model.named_parameters() if p.requires_grad]
    assert [n for n in trainable if layout_routers in n]


def test_lora_experts_on_a_dense_model_is_refused(fixture_dir, prepared_dir, tmp_path):
    recipe = recipe_from_dict(recipe_dict(fixture_dir, prepared_dir, tmp_path / "o",
                                          lora={"r": 4, "dropout": 0.0, "experts": True}))
    with pytest.raises(ConfigError) as info:
        build(recipe)
    assert info.value.path == "lora.experts"


def test_moe_blocks_become_zero3_leaves(moe_dirs):
    from deepspeed.utils import z3_leaf_module
    from transformers import AutoModelForCausalLM

    from beam_sft.train.moe import mark_zero3_leaves

    model = AutoModelForCausalLM.from_pretrained(moe_dirs["beam"])
    assert mark_zero3_leaves(model) == 5
    assert [z3_leaf_module(layer.mlp) for layer in model.model.layers] == [False] + [True] * 5  # layer 0 is dense
    assert not z3_leaf_module(model.model.layers[1].self_attn)


# --- packing isolation on sliding windows and attention sinks (gpt_oss) -----------------------------


def _packed_batch(model_dir, prepared_dir, tmp_path, arch="gpt_oss"):
    run = build(_recipe(model_dir, prepared_dir, tmp_path / "p", arch, sft={"packing": True, "max_length": 384},
                        preflight={"enabled": False}))
    batch = first_batches(run.trainer, 1)[0]
    return run, batch


def test_packed_gpt_oss_batch_is_isolated_across_sliding_and_full_layers(moe_dirs, prepared_dir, tmp_path):
    run, batch = _packed_batch(moe_dirs["gpt_oss"], prepared_dir, tmp_path)
    from beam_sft.train.packing import segments

    spans = [e - s for s, e in segments(batch["position_ids"][0]) if e - s > 1]
    assert len(spans) >= 2 and min(spans) > run.trainer.model.config.sliding_window  # the windows slide
    result = check_isolation(run.trainer.model, batch, pad_token_id=run.tokenizer.pad_token_id,
                             attn_implementation="eager")
    assert result.compared_sequences >= 1 and result.max_abs_diff < 1e-4


def test_transformers_own_gpt_oss_packing_leaks_and_is_refused(moe_dirs, prepared_dir, tmp_path):
    """Without our masks, GptOssModel builds its masks without the position ids: packed sequences
    attend to each other. The pre-flight check refuses that set-up."""
    from transformers import AutoModelForCausalLM

    run, batch = _packed_batch(moe_dirs["gpt_oss"], prepared_dir, tmp_path)
    plain = AutoModelForCausalLM.from_pretrained(moe_dirs["gpt_oss"], attn_implementation="eager")
    disable_cache(plain)
    assert isolation_diff(plain, batch, pad_token_id=run.tokenizer.pad_token_id).max_abs_diff > 0.05
    with pytest.raises(PreflightError, match="packing leaks attention"):
        check_isolation(plain, batch, pad_token_id=run.tokenizer.pad_token_id, attn_implementation="eager")


def test_gpt_oss_attention_implementations_that_cannot_run_are_refused(moe_dirs, prepared_dir, tmp_path):
    run, batch = _packed_batch(moe_dirs["gpt_oss"], prepared_dir, tmp_path)
    with pytest.raises(ConfigError) as info:  # transformers has no sdpa path for gpt-oss
        build(_recipe(moe_dirs["gpt_oss"], prepared_dir, tmp_path / "s", "gpt_oss",
                      model={"attn_implementation": "sdpa"}))
    assert info.value.path == "model.attn_implementation"
    flex = build(_recipe(moe_dirs["gpt_oss"], prepared_dir, tmp_path / "f", "gpt_oss",
                         model={"attn_implementation": "flex_attention"}, sft={"packing": True, "max_length": 384},
                         preflight={"enabled": False}))
    with pytest.raises(PreflightError, match="flex_attention"):  # sinks are GPU-only under flex
        check_isolation(flex.trainer.model, batch, pad_token_id=run.tokenizer.pad_token_id,
                        attn_implementation="flex_attention")


@pytest.mark.parametrize("attn", ["eager", "sdpa", "flex_attention"])
def test_packed_deepseek_v3_batch_is_isolated(attn, moe_dirs, prepared_dir, tmp_path):
    run = build(_recipe(moe_dirs["deepseek_v3"], prepared_dir, tmp_path / "p", "deepseek_v3",
                        model={"attn_implementation": attn}, sft={"packing": True, "max_length": 384},
                        preflight={"enabled": False}))
    batch = first_batches(run.trainer, 1)[0]
    result = check_isolation(run.trainer.model, batch, pad_token_id=run.tokenizer.pad_token_id,
                             attn_implementation=attn)
    assert result.max_abs_diff < 1e-4


def test_packed_gpt_oss_training_passes_the_preflight(moe_dirs, prepared_dir, tmp_path):
    import json

    out = train(_recipe(moe_dirs["gpt_oss"], prepared_dir, tmp_path / "t", "gpt_oss",
                        sft={"packing": True, "max_length": 384, "max_steps": 2}))
    meta = json.loads((out / "beam_run.json").read_text())
    assert meta["preflight"]["packed"] is True and meta["preflight"]["packing_max_logit_diff"] < 1e-4
    assert meta["preflight"]["packing_compared_sequences"] >= 1


# --- packing isolation on Beam's attention (NoPE full layers, sliding windows, output gate) -------


@pytest.fixture(scope="module")
def beam_packed(moe_dirs, prepared_dir, tmp_path_factory):
    """The trainer's own first packed batch on the Beam fixture (built once), and its recipe."""
    recipe = _recipe(moe_dirs["beam"], prepared_dir, tmp_path_factory.mktemp("beam-packed"), "beam",
                     sft={"packing": True, "max_length": 384}, preflight={"enabled": False})
    run = build(recipe)
    return recipe, first_batches(run.trainer, 1)[0], run.tokenizer.pad_token_id


@pytest.mark.parametrize("attn", ["eager", "sdpa", pytest.param("flex_attention", marks=pytest.mark.slow)])
def test_packed_beam_batch_is_isolated(attn, beam_packed):  # flex compiles for ~45 s on 2 cores: slow tier
    import dataclasses

    from beam_sft.train.packing import segments
    from beam_sft.train.trainer import load_model

    recipe, batch, pad = beam_packed
    model = load_model(dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, attn_implementation=attn)))
    spans = [e - s for s, e in segments(batch["position_ids"][0]) if e - s > 1]
    assert len(spans) >= 2 and min(spans) > model.config.sliding_window  # the windows slide
    result = check_isolation(model, batch, pad_token_id=pad, attn_implementation=attn)
    assert result.compared_sequences >= 1 and result.max_abs_diff < 1e-5
    assert result.leak_diff == 0.0  # same shapes: bit for bit


def _leaky_on(layers: str):
    """sdpa that ignores sequence boundaries (plain causal over the packed row, windowed on sliding
    layers) on Beam's full-attention (NoPE) layers or on its sliding layers only."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def attention(module, query, key, value, attention_mask, **kwargs):
        full = module.sliding_window is None
        if full == (layers == "full"):
            kwargs = {k: v for k, v in kwargs.items() if k != "is_causal"}
            if not full:  # keep the window, drop the boundaries
                i = torch.arange(query.shape[-2])
                allowed = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < module.sliding_window)
                return sdpa_attention_forward(module, query, key, value, allowed[None, None], **kwargs)
            return sdpa_attention_forward(module, query, key, value, None, is_causal=True, **kwargs)
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)

    name = f"beam_test_leaky_{layers}"
    AttentionInterface.register(name, attention)
    return name


@pytest.mark.parametrize("layers", ["full", "sliding"])
def test_a_leak_in_beams_full_or_sliding_layers_alone_is_refused(layers, moe_dirs, beam_packed):
    """The proof sees a leak in the one NoPE full-attention layer, or in the sliding layers, alone."""
    from transformers import AutoModelForCausalLM

    from beam_sft.train.packing import keep_packed_sequences_apart

    _, batch, pad = beam_packed
    leaky = AutoModelForCausalLM.from_pretrained(moe_dirs["beam"], attn_implementation=_leaky_on(layers))
    disable_cache(leaky)
    keep_packed_sequences_apart(leaky)
    result = isolation_diff(leaky, batch, pad_token_id=pad)
    assert result.max_abs_diff > 1e-3 and result.leak_diff > 1e-3  # both proofs see it
    with pytest.raises(PreflightError, match="packing leaks attention"):
        check_isolation(leaky, batch, pad_token_id=pad, attn_implementation="sdpa")


@pytest.mark.parametrize("layers", ["full", "sliding"])
def test_a_leak_in_bf16_beam_is_refused_by_the_counterfactual(layers, moe_dirs, beam_packed):
    """In half precision an MoE model's packed-against-alone difference does not decide (routing
    flips on rounding), so the counterfactual must: a leak in bf16 Beam is still refused, and says
    which proof saw it."""
    from transformers import AutoModelForCausalLM

    from beam_sft.train.packing import keep_packed_sequences_apart

    _, batch, pad = beam_packed
    leaky = AutoModelForCausalLM.from_pretrained(moe_dirs["beam"], attn_implementation=_leaky_on(layers),
                                                 dtype=torch.bfloat16)
    disable_cache(leaky)
    keep_packed_sequences_apart(leaky)
    result = isolation_diff(leaky, batch, pad_token_id=pad)
    assert result.compute_dtype == "bfloat16" and not result.alone_decides  # Beam's logits are fp32
    assert result.leak_diff > result.leak_tolerance and not result.ok
    with pytest.raises(PreflightError, match="changing the tokens of one packed sequence moves"):
        check_isolation(leaky, batch, pad_token_id=pad, attn_implementation="sdpa")


class _ShapeNoise(torch.nn.Module):
    """A model whose unpacked forward (the one with an attention mask) rounds differently, by a
    whole unit, as a bf16 MoE forward of another shape does on a GPU; its packed forwards agree."""

    def __init__(self, inner, offset: float):
        super().__init__()
        self.inner, self.offset = inner, offset

    def forward(self, **kwargs):
        out = self.inner(**kwargs)
        if kwargs.get("attention_mask") is not None:
            out.logits = out.logits + self.offset
        return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_shape_rounding_decides_only_where_it_can_mean_a_leak(dtype, moe_dirs, beam_packed):
    """Packed against alone off by 0.9 with no leak (the counterfactual exact): float32 Beam is
    refused (noise that large cannot be rounding there); bf16 Beam passes, as measured on an H100
    where 1.2 to 1.5 came from rounding on the first sequence, which has nothing to leak from."""
    from transformers import AutoModelForCausalLM

    from beam_sft.train.packing import keep_packed_sequences_apart

    _, batch, pad = beam_packed
    model = AutoModelForCausalLM.from_pretrained(moe_dirs["beam"], attn_implementation="sdpa", dtype=dtype)
    disable_cache(model)
    keep_packed_sequences_apart(model)
    result = isolation_diff(_ShapeNoise(model, 0.9), batch, pad_token_id=pad)
    assert result.leak_diff == 0.0 and result.max_abs_diff >= 0.9 - 1e-3
    assert result.tolerance < 0.9  # on its own, packed against alone fails in both precisions
    assert result.ok is (dtype == torch.bfloat16)


def test_beam_packing_leaks_with_the_cache_or_a_withheld_boundary_and_is_refused(moe_dirs, beam_packed):
    """Beam's own masks honour the position-id restarts (transformers 5.24) only without a cache and
    without a 2-D attention mask: with the cache on (the config's default) or an all-ones mask beside
    the position ids, packed sequences attend to each other. Training turns the cache off; a batch that
    withholds the boundaries is refused."""
    from transformers import AutoModelForCausalLM

    from beam_sft.train.packing import segments
    from beam_sft.train.trainer import load_model

    recipe, batch, pad = beam_packed
    plain = AutoModelForCausalLM.from_pretrained(moe_dirs["beam"], attn_implementation="sdpa").eval()
    assert plain.config.use_cache is True
    (s0, _), (s1, e1) = [s for s in segments(batch["position_ids"][0]) if s[1] - s[0] > 1][:2]
    ids, positions = batch["input_ids"][:, s0:e1], batch["position_ids"][:, s0:e1]
    with torch.no_grad():
        alone = plain(input_ids=batch["input_ids"][:, s1:e1]).logits[0]
        cached = plain(input_ids=ids, position_ids=positions).logits[0, s1 - s0:]
        uncached = plain(input_ids=ids, position_ids=positions, use_cache=False).logits[0, s1 - s0:]
    assert float((cached - alone).abs().max()) > 0.05  # the cache leaks
    assert float((uncached - alone).abs().max()) < 1e-5
    withheld = {**batch, "attention_mask": torch.ones_like(batch["input_ids"])}
    with pytest.raises(PreflightError, match="packing leaks attention"):
        check_isolation(load_model(recipe), withheld, pad_token_id=pad, attn_implementation="sdpa")


def test_the_training_loss_is_beams_own_soft_capped_loss(moe_dirs, prepared_dir, tmp_path):
    """TRL's fused head (it never builds the logits) gives the loss BeamForCausalLM computes from its
    soft-capped logits, not the loss of the raw head output."""
    recipe = _recipe(moe_dirs["beam"], prepared_dir, tmp_path / "l", "beam", preflight={"enabled": False})
    trainer = build(recipe).trainer
    batch = first_batches(trainer, 1)[0]
    model = trainer.model.eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(60.0)  # logits of tens, where the cap at 30 bites (the fixture's are < 1)
        trl_loss = trainer.compute_loss(model, dict(batch))
        own = model(**batch).loss
        cap, model.config.final_logit_softcapping = model.config.final_logit_softcapping, None
        uncapped = model(**batch).loss
        model.config.final_logit_softcapping = cap
    assert float(trl_loss) == pytest.approx(float(own), rel=1e-5)
    assert abs(float(own) - float(uncapped)) > 0.1


def test_nan_logits_prove_nothing():
    """A forward whose logits are NaN (a broken bf16 run) fails the check in every precision: NaN is
    neither inside nor outside a tolerance, so it can never read as a pass."""
    from beam_sft.train.packing import IsolationResult

    nan = float("nan")
    for alone_decides in (True, False):
        assert not IsolationResult(0.0, 1, 0.6, leak_diff=nan, alone_decides=alone_decides).ok
        assert not IsolationResult(nan, 1, 0.6, leak_diff=0.0, alone_decides=alone_decides).ok
    assert IsolationResult(nan, 1, 0.6, leak_diff=nan).leaks
    assert IsolationResult(2.0, 1, 0.6, leak_diff=0.0, alone_decides=False).ok


def test_mixed_precision_is_judged_as_the_trainer_computes(moe_dirs, beam_packed):
    """fp32 weights trained under bf16 autocast (accelerate's mixed precision; FSDP2's fp32 masters):
    nothing seen from outside the forward says bf16, so the callback passes the trainer's own
    precision. A shape rounding that float32 would refuse is then reported, not decisive, as for
    bf16 weights; a leak is still refused."""
    import types

    from transformers import AutoModelForCausalLM

    from beam_sft.train.callbacks import PackingIsolationCallback, training_precision
    from beam_sft.train.packing import keep_packed_sequences_apart
    from beam_sft.train.preflight import PreflightReport

    assert training_precision(types.SimpleNamespace(bf16=True, fp16=False)) is torch.bfloat16
    assert training_precision(types.SimpleNamespace(bf16=False, fp16=True)) is torch.float16
    assert training_precision(types.SimpleNamespace(bf16=False, fp16=False)) is None
    _, batch, pad = beam_packed
    model = AutoModelForCausalLM.from_pretrained(moe_dirs["beam"], attn_implementation="sdpa")  # fp32 weights
    disable_cache(model)
    keep_packed_sequences_apart(model)
    noisy = _ShapeNoise(model, 0.9)
    assert not isolation_diff(noisy, batch, pad_token_id=pad).ok  # seen as float32: refused
    for bf16, passes in ((True, True), (False, False)):
        report = PreflightReport()
        callback = PackingIsolationCallback(batch, pad_token_id=pad, attn_implementation="sdpa", tolerance=None,
                                            accelerator=types.SimpleNamespace(device=torch.device("cpu"),
                                                                              num_processes=1), report=report)
        args = types.SimpleNamespace(bf16=bf16, fp16=False)
        if passes:
            callback.on_train_begin(args, None, None, model=noisy)
            assert report.packing_compute_dtype == "bfloat16" and report.packing_leak_diff == 0.0
        else:
            with pytest.raises(PreflightError, match="differ from the same sequence alone"):
                callback.on_train_begin(args, None, None, model=noisy)


def test_a_resumed_full_fine_tune_of_beam_keeps_its_trained_experts(moe_dirs, prepared_dir, tmp_path):
    """save_pretrained writes Beam's experts one tensor per expert; the Trainer's own resume loads that
    file with load_state_dict(strict=False), which leaves the fused expert tensors as the base model's
    (a log line). Resumed, the run must give the uninterrupted run's losses and experts."""
    from safetensors.torch import load_file

    schedule = {"max_steps": 4, "save_strategy": "steps", "save_steps": 2, "learning_rate": 3e-3}
    whole = train(_recipe(moe_dirs["beam"], prepared_dir, tmp_path / "whole", "beam", sft=schedule))
    checkpoint = whole / "checkpoint-2"
    resumed = train(_recipe(moe_dirs["beam"], prepared_dir, tmp_path / "resumed", "beam",
                            sft={**schedule, "resume_from_checkpoint": str(checkpoint)}))
    expected = {r["step"]: r["loss"] for r in read_losses(whole)}
    got = {r["step"]: r["loss"] for r in read_losses(resumed)}
    assert sorted(got) == [3, 4]
    for step in (3, 4):
        assert got[step] == pytest.approx(expected[step], rel=1e-5, abs=1e-6)
    a, b = load_file(whole / "model.safetensors"), load_file(resumed / "model.safetensors")
    experts = [k for k in a if ".experts." in k]
    assert experts and a.keys() == b.keys()
    assert max(float((a[k] - b[k]).abs().max()) for k in experts) < 1e-5


def test_load_best_model_at_end_is_refused_on_a_full_fine_tune_of_fused_experts(moe_dirs, prepared_dir, tmp_path,
                                                                                tokenizer):
    from transformers import AutoModelForCausalLM

    from beam_sft.train.trainer import check_the_model

    sft = {"load_best_model_at_end": True, "eval_strategy": "steps", "save_strategy": "steps"}
    model = AutoModelForCausalLM.from_pretrained(moe_dirs["beam"])
    data = {"prepared": str(prepared_dir), "eval": {"eval_fraction": 0.1}}
    with pytest.raises(ConfigError, match="sft.load_best_model_at_end"):
        check_the_model(_recipe(moe_dirs["beam"], prepared_dir, tmp_path / "a", "beam", sft=sft, data=data),
                        model, tokenizer)
    lora = {"r": 4, "alpha": 8, "dropout": 0.0}
    check_the_model(_recipe(moe_dirs["beam"], prepared_dir, tmp_path / "b", "beam", sft=sft, data=data, lora=lora),
                    model, tokenizer)
