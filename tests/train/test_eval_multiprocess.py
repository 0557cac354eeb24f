"""Eval set and format health with two processes through ``accelerate launch`` (slow tier).

DDP: eval_loss at the configured steps, the eval-batch pre-flight on every process, format health
logged once per measurement. ZeRO-3 and FSDP2: generation needs every rank (each forward gathers
parameters), so format health runs on all ranks with synced_gpus; a deadlock would hit the timeout.
"""

from __future__ import annotations

import json

import pytest
import yaml

from beam_sft.train.callbacks import read_losses
from beam_sft.train.format_health import read_health
from beam_sft.train.run_log import read_metrics

from .conftest import launch, recipe_dict

pytestmark = pytest.mark.slow

SETUPS = {
    "ddp": ("cpu-ddp.yaml", False, "MULTI_CPU"),
    "zero3-lora": ("cpu-zero3.yaml", True, "DEEPSPEED"),
    "fsdp2": ("cpu-fsdp2.yaml", False, "FSDP"),
}


@pytest.mark.parametrize("setup", list(SETUPS))
def test_two_process_eval_and_format_health(setup, fixture_dir, prepared_dir, tmp_path):
    config, lora, kind = SETUPS[setup]
    out = tmp_path / "out"
    sections = {"lora": {"r": 4, "alpha": 8, "dropout": 0.0}} if lora else {}
    data = recipe_dict(fixture_dir, prepared_dir, out, data={"eval": {"eval_fraction": 0.25, "seed": 1}},
                       format_health={"steps": 2, "prompts": 2, "max_new_tokens": 16}, **sections)
    data["sft"].update({"use_cpu": True, "max_steps": 4, "eval_steps": 2, "per_device_eval_batch_size": 2})
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(data))
    result = launch(config, recipe, [], timeout=300)
    assert result.returncode == 0, f"launch failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"

    meta = json.loads((out / "beam_run.json").read_text())
    assert meta["distributed"]["type"] == kind and meta["distributed"]["num_processes"] == 2
    assert meta["preflight"]["eval"]["batches"] >= 1
    assert meta["preflight"]["eval"]["train_rows"] + meta["preflight"]["eval"]["eval_rows"] == 48
    assert [r["step"] for r in read_losses(out)] == [1, 2, 3, 4]
    metrics = read_metrics(out)
    assert [r["step"] for r in metrics if "eval_loss" in r] == [2, 4]
    assert [r["step"] for r in metrics if "format_health" in r] == [2, 4]  # main process only, once each
    health = read_health(out)
    assert [r["step"] for r in health] == [2, 4] and all(len(r["outputs"]) == 2 for r in health)
