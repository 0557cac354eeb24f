"""Expert parallelism on Beam's own model code, as far as 2 CPU processes (gloo) show it.

``tests/train/beam_ep_probe.py`` loads a tiny ``BeamForCausalLM`` (one dense layer, three sparse of 8
experts top-2 in 2 groups, sliding layers with RoPE and a full NoPE layer, the output gate, the soft
cap) with ``from_pretrained(..., distributed_config=DistributedConfig(...))`` in several modes, each
rank feeding its own batch where the mode is data-parallel, and compares the logits before and after
one SGD step with the unsharded model's (the step on the mean of both ranks' losses). What it pins
(transformers 5.24, torch 2.13, measured 2026-12-01; the SGD step 2026-12-03) is in the README's "Fine-tuning Beam"; a change in
either shows here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import REPO_ROOT
from .test_multinode import _free_port

PROBE = REPO_ROOT / "tests" / "train" / "beam_ep_probe.py"

# mode -> (fraction of all parameters a rank holds, of the expert parameters), or the refusal's text
# and where transformers raises it.
EXPECTED = {
    # Experts split over the EP group of 2 (4 of 8 each), the rest FSDP-sharded; tokens exchanged by
    # all-to-all (what "auto" picks when the ranks see different batches).
    "ep_size=2 fsdp_size=2": (0.50, 0.50),
    "ep_size=2 fsdp_size=2 all_to_all": (0.50, 0.50),
    # Experts split, attention tensor-parallel (Beam's base_model_tp_plan), norms and router whole.
    "ep_size=2 tp_size=2": (0.50, 0.50),
    "fsdp_size=2": (0.50, 0.50),
    "tp_size=2": (0.50, 0.50),
    "ep_size=2": ("`ep_size` must divide `fsdp_size * tp_size`", "transformers/distributed/configuration_utils.py"),
}


@pytest.fixture(scope="module")
def beam_ep_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("beam-ep")
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    subprocess.run([sys.executable, str(PROBE), str(out), "--build"], env=env, check=True, capture_output=True,
                   timeout=300)
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                          str(_free_port()), str(PROBE), str(out)], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads((out / "results.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(EXPECTED))
def test_expert_parallelism_on_beam(mode, beam_ep_results):
    result = beam_ep_results[mode]
    expected = EXPECTED[mode]
    if isinstance(expected[0], float):
        assert result["ok"] and result["backward"], result
        assert result["max_logit_diff"] < 1e-5, result  # the unsharded logits, every rank's batch
        assert result["step_change"] > 0.1, result  # the step moved the logits: the next line means something
        assert result["max_logit_diff_after_step"] < 1e-4, result  # and after backward + one SGD step
        assert result["router_dtype"] == "torch.float32", result  # _keep_in_fp32_modules_strict survives
        assert result["held_fraction"] == pytest.approx(expected[0], abs=0.01), result
        assert result["expert_held_fraction"] == pytest.approx(expected[1], abs=0.01), result
    else:
        assert not result["ok"] and expected[0] in result["error"], result
        assert result["where"].startswith(expected[1]), result


# ---------------------------------------------------------------- model.ep_size in beam-sft train

def _ep_recipe(tmp_path, model_dir, prepared_dir, name, ep_size):
    import yaml

    from .conftest import recipe_dict

    out = tmp_path / name
    data = recipe_dict(model_dir, prepared_dir, out)
    data["model"]["ep_size"] = ep_size
    data["sft"].update({"use_cpu": True, "max_steps": 4, "packing": True})
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, out


@pytest.mark.slow
def test_train_with_expert_parallelism_equals_ddp_on_the_beam_fixture(moe_dirs, prepared_dir, tmp_path):
    """`model.ep_size: 2` under a plain 2-process launch: each rank holds 4 of the fixture's 8 experts
    (nothing wraps the model again), the pre-flight's packing proof passes, and the run is DDP's: the
    same losses step by step and the same saved weights (training moved them far more than they differ)."""
    import torch
    from safetensors.torch import load_file

    from beam_sft.train.callbacks import read_losses

    from .conftest import launch

    outs = {}
    for name, ep in (("ep", 2), ("ddp", 1)):
        recipe, outs[name] = _ep_recipe(tmp_path, moe_dirs["beam"], prepared_dir, name, ep)
        result = launch("cpu-ddp.yaml", recipe, [], timeout=600)
        assert result.returncode == 0, result.stderr[-6000:]
        if ep > 1:
            for rank in (0, 1):
                assert f"rank {rank} holds 4 of 8 experts a layer" in result.stderr, result.stderr[-3000:]
    losses = {name: [r["loss"] for r in read_losses(out)] for name, out in outs.items()}
    assert len(losses["ep"]) == 4 and losses["ep"][-1] < losses["ep"][0], losses
    assert losses["ep"] == pytest.approx(losses["ddp"], rel=1e-5), losses
    meta = json.loads((outs["ep"] / "beam_run.json").read_text())
    assert meta["preflight"]["packed"] and meta["preflight"]["packing_max_logit_diff"] < 1e-4, meta["preflight"]
    ep, ddp = (load_file(outs[name] / "model.safetensors") for name in ("ep", "ddp"))
    base = load_file(moe_dirs["beam"] / "model.safetensors")
    assert set(ep) == set(ddp) == set(base)  # whole: every expert of every layer, in the checkpoint's layout
    assert max(float((ep[k] - ddp[k]).abs().max()) for k in ep) < 1e-4  # measured 1.2e-5
    assert max(float((base[k] - ddp[k]).abs().max()) for k in ep) > 1e-3
    assert all(ep[k].dtype == torch.float32 for k in ep)


def test_ep_size_is_checked_in_the_recipe(fixture_dir, prepared_dir, tmp_path):
    from beam_sft.errors import ConfigError
    from beam_sft.train.recipe import recipe_from_dict

    from .conftest import recipe_dict

    base = recipe_dict(fixture_dir, prepared_dir, tmp_path / "out")
    for value in (0, -2, True, 2.5, "two"):
        with pytest.raises(ConfigError, match="model.ep_size"):
            recipe_from_dict({**base, "model": {**base["model"], "ep_size": value}})
    ep = {**base["model"], "ep_size": 2}
    with pytest.raises(ConfigError, match="model.ep_size: expert parallelism with LoRA"):
        recipe_from_dict({**base, "model": ep, "lora": {"r": 4}})
    # transformers' Trainer refuses (mid-launch, a traceback) to checkpoint a model sharded at load
    # with its optimizer state: the recipe says it first.
    for sft, key in (({"save_strategy": "steps", "save_steps": 2}, "sft.save_strategy"),
                     ({"save_strategy": None}, "sft.save_strategy"),
                     ({"resume_from_checkpoint": "out/checkpoint-2"}, "sft.resume_from_checkpoint")):
        sections = {**base["sft"], **sft}
        sections = {k: v for k, v in sections.items() if v is not None}
        with pytest.raises(ConfigError, match=key):
            recipe_from_dict({**base, "model": ep, "sft": sections})
    recipe_from_dict({**base, "model": ep, "sft": {**base["sft"], "save_strategy": "steps", "save_only_model": True}})


def test_ep_size_is_checked_at_launch(moe_dirs, fixture_dir):
    from transformers import AutoConfig

    from beam_sft.errors import ConfigError
    from beam_sft.train.expert_parallel import check_launch
    from beam_sft.train.recipe import recipe_from_dict

    def recipe(path, ep):
        return recipe_from_dict({"model": {"path": str(path), "ep_size": ep}, "data": {"prepared": "unused"},
                                 "sft": {"save_strategy": "no"}})

    beam = AutoConfig.from_pretrained(moe_dirs["beam"])
    check_launch(recipe(moe_dirs["beam"], 2), beam, world_size=2, strategy="ddp")  # accepted
    check_launch(recipe(moe_dirs["beam"], 1), beam, world_size=3, strategy="zero3")  # off: nothing checked
    for ep, world, strategy, message in ((2, 2, "zero3", "not zero3"), (2, 2, "fsdp2", "not fsdp2"),
                                         (2, 3, "ddp", "divide the 3 processes"),
                                         (16, 16, "ddp", "divide the model's routed experts \\(8\\)")):
        with pytest.raises(ConfigError, match=f"model.ep_size: .*{message}"):
            check_launch(recipe(moe_dirs["beam"], ep), beam, world_size=world, strategy=strategy)
    with pytest.raises(ConfigError, match="not a mixture of experts"):
        check_launch(recipe(fixture_dir, 2), AutoConfig.from_pretrained(fixture_dir), world_size=2, strategy="ddp")


def test_the_gpu_preflight_plans_expert_parallelism(moe_dirs):
    """check_plan_fits plans an ep_size recipe as fsdp2 with its experts split (the gathered floor)."""
    from beam_sft.train.plan import recipe_setup
    from beam_sft.train.recipe import recipe_from_dict

    recipe = recipe_from_dict({"model": {"path": str(moe_dirs["beam"]), "ep_size": 2},
                               "data": {"prepared": "unused"}, "sft": {"save_only_model": True}})
    setup = recipe_setup(recipe, world_size=2, gpu_memory_gib=80.0, strategy="ddp")
    assert (setup.strategy, setup.ep_size) == ("fsdp2", 2)
    plain = recipe_setup(recipe_from_dict({"model": {"path": str(moe_dirs["beam"])}, "data": {"prepared": "x"}}),
                         world_size=2, gpu_memory_gib=80.0, strategy="ddp")
    assert (plain.strategy, plain.ep_size) == ("ddp", 1)
