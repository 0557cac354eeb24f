"""Two processes through ``accelerate launch`` on the CPU: DDP, ZeRO-2, ZeRO-3 with LoRA, FSDP2.

Each run trains a few steps on the fixture, and must: really run in the mode asked for (a launcher
config can silently fall back to plain DDP, or to one run per process), lower the loss, save a
checkpoint that reloads, and save a final model or adapter that reloads. Slow tier: about 20-30 s
a run on 2 cores (the first DeepSpeed run also builds DeepSpeed's CPU communication op, ~1 min).
"""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from beam_sft.train.callbacks import read_losses

from .conftest import launch, recipe_dict, train_rows, write_prepared

pytestmark = pytest.mark.slow

# config, lora, expected distributed type
SETUPS = {
    "ddp": ("cpu-ddp.yaml", False, "MULTI_CPU"),
    "zero2": ("cpu-zero2.yaml", False, "DEEPSPEED"),
    "zero3-lora": ("cpu-zero3.yaml", True, "DEEPSPEED"),
    "fsdp2": ("cpu-fsdp2.yaml", False, "FSDP"),
}


def _recipe_file(tmp_path, fixture_dir, prepared, out, **sections):
    data = recipe_dict(fixture_dir, prepared, out, **sections)
    data["sft"].update({"use_cpu": True, "max_steps": 4, "save_strategy": "steps", "save_steps": 2})
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _check_launch(result):
    assert result.returncode == 0, f"launch failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"


def _reload(directory, fixture_dir, lora: bool):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from beam_sft.train.export import export_checkpoint, is_sharded_checkpoint

    if not lora and is_sharded_checkpoint(directory):  # ZeRO-3/FSDP2 full fine-tunes save sharded
        directory = export_checkpoint(directory, directory.parent / f"{directory.name}-exported")

    if lora:
        from peft import PeftModel

        model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(fixture_dir), str(directory))
    else:
        model = AutoModelForCausalLM.from_pretrained(directory)
    with torch.no_grad():
        logits = model(torch.tensor([[5, 17, 300, 42]])).logits
    assert torch.isfinite(logits).all()
    assert AutoTokenizer.from_pretrained(directory).chat_template
    return model


@pytest.mark.parametrize("setup", list(SETUPS))
def test_two_process_training(setup, fixture_dir, prepared_dir, tmp_path):
    from safetensors.torch import load_file

    config, lora, kind = SETUPS[setup]
    out = tmp_path / "out"
    sections = {"lora": {"r": 4, "alpha": 8, "dropout": 0.0}} if lora else {}
    recipe = _recipe_file(tmp_path, fixture_dir, prepared_dir, out, **sections)
    _check_launch(launch(config, recipe, []))

    meta = json.loads((out / "beam_run.json").read_text())
    assert meta["distributed"]["type"] == kind
    assert meta["distributed"]["num_processes"] == 2
    if kind == "DEEPSPEED":
        assert meta["distributed"]["zero_stage"] == (3 if "zero3" in config else 2)
    if kind == "FSDP":
        assert meta["distributed"]["fsdp_version"] == 2 and meta["distributed"]["sharded_parameters"]
    assert meta["preflight"]["batches"] == 2

    losses = {r["step"]: r["loss"] for r in read_losses(out)}
    assert sorted(losses) == [1, 2, 3, 4], "one loss record per step (main process only)"
    assert losses[4] < losses[1]

    _reload(out / "checkpoint-2", fixture_dir, lora)
    _reload(out, fixture_dir, lora)
    if lora:  # the ZeRO-3 adapter was gathered, not saved as empty shards
        weights = load_file(out / "adapter_model.safetensors")
        lora_b = [v for k, v in weights.items() if "lora_B" in k]
        assert lora_b and all(v.numel() > 0 and float(v.abs().max()) > 0 for v in lora_b)


def test_two_process_resume_matches(fixture_dir, prepared_dir, tmp_path):
    whole_out, resumed_out = tmp_path / "whole", tmp_path / "resumed"
    recipe = _recipe_file(tmp_path, fixture_dir, prepared_dir, whole_out)
    _check_launch(launch("cpu-ddp.yaml", recipe, []))
    _check_launch(launch("cpu-ddp.yaml", recipe, ["--sft.output_dir", str(resumed_out),
                                                  "--sft.resume_from_checkpoint", str(whole_out / "checkpoint-2")]))
    whole = {r["step"]: r["loss"] for r in read_losses(whole_out)}
    resumed = {r["step"]: r["loss"] for r in read_losses(resumed_out)}
    assert sorted(resumed) == [3, 4]
    for step in (3, 4):
        assert resumed[step] == pytest.approx(whole[step], rel=1e-5)


def test_two_process_packing_and_refusal(fixture_dir, tokenizer, prepared_dir, tmp_path):
    out = tmp_path / "packed"
    recipe = _recipe_file(tmp_path, fixture_dir, prepared_dir, out, sft={"packing": True, "max_length": 384})
    _check_launch(launch("cpu-ddp.yaml", recipe, []))
    meta = json.loads((out / "beam_run.json").read_text())
    assert meta["preflight"]["packed"] is True
    assert meta["preflight"]["packing_max_logit_diff"] < 1e-4

    # A corrupted mask on some rows: every process must stop (no hang in a collective), none trains.
    def corrupt(record):
        if record["row_index"] % 2:
            mask = list(record["assistant_masks"])
            mask[mask.index(1) - 3] = 1
            return {**record, "assistant_masks": mask}
        return record

    bad = write_prepared(tmp_path / "bad", train_rows(16), tokenizer, mutate=corrupt)
    refused = tmp_path / "refused"
    recipe = _recipe_file(tmp_path, fixture_dir, bad, refused)
    result = launch("cpu-ddp.yaml", recipe, [], timeout=300)
    assert result.returncode != 0
    assert "pre-flight failed" in result.stderr
    assert read_losses(refused) == []
