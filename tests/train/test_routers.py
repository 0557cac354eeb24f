"""Beam's routers in training (beam_sft/train/routers.py), on the ``beam`` fixture: no load-balancing
loss, fp32 routing under mixed precision or a refusal that says why, and the correction bias bit for
bit the checkpoint's before step 1, after training and in the saved weights."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from beam_sft.errors import BeamError, ConfigError, PreflightError
from beam_sft.train import routers
from beam_sft.train.moe import moe_layout
from beam_sft.train.recipe import recipe_from_dict
from beam_sft.train.trainer import build, train

from .conftest import recipe_dict

BIAS = "e_score_correction_bias"


def _recipe(model_dir, prepared, out, **sections):
    return recipe_from_dict(recipe_dict(model_dir, prepared, out, **sections))


@pytest.fixture(scope="module")
def beam(moe_dirs):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(moe_dirs["beam"])


def test_a_nonzero_aux_loss_is_refused_before_the_weights_load(moe_dirs, prepared_dir, tmp_path, monkeypatch):
    from beam_sft.train import trainer

    monkeypatch.setattr(trainer, "load_model", lambda recipe: pytest.fail("the weights loaded before the refusal"))
    with pytest.raises(ConfigError) as info:
        build(_recipe(moe_dirs["beam"], prepared_dir, tmp_path / "o", sft={"router_aux_loss_coef": 0.01}))
    assert info.value.path == "sft.router_aux_loss_coef"
    assert "no load-balancing loss" in str(info.value) and BIAS in str(info.value)


def test_which_routers_have_no_aux_loss():
    from transformers import BeamConfig, DeepseekV3Config, GptOssConfig, LlamaConfig

    assert routers.bias_balanced(BeamConfig()) and routers.bias_balanced(DeepseekV3Config())
    assert not routers.bias_balanced(GptOssConfig()) and not routers.bias_balanced(LlamaConfig())
    routers.check_aux_loss(GptOssConfig(), {"router_aux_loss_coef": 0.01})  # a softmax router: its own loss
    routers.check_aux_loss(BeamConfig(), {"router_aux_loss_coef": 0.0})
    routers.check_aux_loss(BeamConfig(), {})


def test_beam_trains_without_aux_loss_and_keeps_its_correction_bias(moe_dirs, prepared_dir, tmp_path):
    """By default TRL adds no aux loss on Beam; a full fine-tune trains the router weights (fp32) and
    saves the correction biases bit for bit as the checkpoint had them."""
    import json

    from safetensors.torch import load_file

    from beam_sft.train.callbacks import read_losses

    recipe = _recipe(moe_dirs["beam"], prepared_dir, tmp_path / "full", sft={"max_steps": 2, "learning_rate": 1e-2})
    run = build(recipe)
    assert run.trainer.router_aux_loss_coef == 0 and run.trainer.aux_loss_enabled is False
    out = train(recipe)
    assert all("aux_loss" not in r for r in read_losses(out))
    before, after = load_file(moe_dirs["beam"] / "model.safetensors"), load_file(out / "model.safetensors")
    biases = [k for k in before if k.endswith(BIAS)]
    assert len(biases) == 5
    for key in biases:
        assert after[key].dtype == torch.float32 and torch.equal(after[key], before[key]), key
        weight = key.replace(BIAS, "weight")
        assert after[weight].dtype == torch.float32 and not torch.equal(after[weight], before[weight])
    assert json.loads((out / "beam_run.json").read_text())["routers"] == {"routers": 5, "correction_biases_unchanged": 5}


def test_a_correction_bias_moved_in_training_fails_the_save(moe_dirs, prepared_dir, tmp_path):
    from transformers import TrainerCallback

    class Nudge(TrainerCallback):  # what an optimizer that reached the buffer would do
        def on_step_end(self, args, state, control, model=None, **kwargs):
            with torch.no_grad():
                model.model.layers[1].mlp.gate.e_score_correction_bias.add_(1e-3)

    recipe = _recipe(moe_dirs["beam"], prepared_dir, tmp_path / "nudged", sft={"max_steps": 1})
    with pytest.raises(BeamError, match=f"{BIAS} changed in training"):
        train(recipe, callbacks=[Nudge()])


def test_routers_route_in_fp32_under_autocast(beam):
    import copy

    model = copy.deepcopy(beam).eval()
    layout = moe_layout(model)
    captured = []
    hook = model.model.layers[1].mlp.gate.register_forward_hook(lambda _m, _i, out: captured.append(out[0].dtype))
    ids = torch.tensor([[5, 17, 300, 42, 9, 100] * 4])
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        model(ids)
        assert captured[-1] == torch.bfloat16  # transformers' router under autocast: its linear map in bf16
        assert routers.route_in_fp32(model, layout) == 5 and routers.route_in_fp32(model, layout) == 0
        model(ids)
    hook.remove()
    assert captured[-1] == torch.float32


def _trainer(kind: str, mixed: str):
    return SimpleNamespace(accelerator=SimpleNamespace(distributed_type=f"DistributedType.{kind}",
                                                       mixed_precision=mixed))


def test_launchers_that_would_not_keep_the_router_fp32_are_refused(beam, moe_dirs):
    from transformers import AutoModelForCausalLM

    layout = moe_layout(beam)
    for kind, mixed in (("MULTI_CPU", "bf16"), ("DEEPSPEED", "bf16"), ("FSDP", "no")):
        routers.check_precision(_trainer(kind, mixed), beam, layout)
    with pytest.raises(PreflightError, match="FSDP2 with mixed_precision bf16 is refused"):
        routers.check_precision(_trainer("FSDP", "bf16"), beam, layout)
    half = AutoModelForCausalLM.from_pretrained(moe_dirs["beam"], dtype=torch.bfloat16)
    assert half.model.layers[1].mlp.gate.weight.dtype == torch.float32  # transformers keeps it
    routers.check_precision(_trainer("DEEPSPEED", "bf16"), half, layout)
    with pytest.raises(PreflightError, match="FSDP2 is refused with model.dtype torch.bfloat16"):
        routers.check_precision(_trainer("FSDP", "no"), half, layout)
    half.model.layers[2].mlp.gate.to(torch.bfloat16)  # what a cast of the whole model would do
    with pytest.raises(PreflightError, match="not float32"):
        routers.check_precision(_trainer("DEEPSPEED", "bf16"), half, layout)
    problems = routers.precision_problems(half, layout)
    assert problems and "model.layers.2.mlp.gate.weight is torch.bfloat16" in problems[0]
    assert routers.precision_problems(beam, layout) == []


def test_the_bias_snapshot_sees_one_ulp_a_cast_and_a_prefix(beam):
    import copy

    snapshot = routers.BiasSnapshot(beam)
    assert len(snapshot) == 5 and snapshot.changes(beam) == []
    model = copy.deepcopy(beam)
    bias = model.model.layers[3].mlp.gate.e_score_correction_bias
    wrapper = torch.nn.Module()
    wrapper.module = model  # as DDP and DeepSpeed name it
    assert snapshot.changes(wrapper) == []
    bias.copy_(torch.nextafter(bias, torch.full_like(bias, 1.0)))
    assert snapshot.changes(wrapper) == [f"model.layers.3.mlp.gate.{BIAS}"]
    other = copy.deepcopy(beam)
    other.model.layers[1].mlp.gate.e_score_correction_bias.data = \
        other.model.layers[1].mlp.gate.e_score_correction_bias.to(torch.bfloat16).float()
    assert snapshot.changes(other) == [f"model.layers.1.mlp.gate.{BIAS}"]
