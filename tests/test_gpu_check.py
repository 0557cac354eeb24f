"""benchmarks/gpu_check.py cannot rot: its --dry-run (CPU, tiny config, two steps) runs the whole
check through the project's own prepare, trainer, plan and isolation code, and writes the JSON."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "gpu_check.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dry_run_writes_every_section(tmp_path):
    out = tmp_path / "result.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--work", str(tmp_path / "work"),
                             "--out", str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    data = json.loads(out.read_text())
    assert data["dry_run"] is True and data["device"] == "cpu" and data["arch"] == "llama"
    runs = data["runs"]
    assert set(runs) == {"padded_trl_default", "packed_recipe"}
    for name, packed in (("padded_trl_default", False), ("packed_recipe", True)):
        run = runs[name]
        assert "error" not in run, run
        assert run["packed"] is packed and run["preflight"] is packed and run["steps"] == 2
        assert run["non_padding_tokens"] > 0 and run["tokens_per_s"] > 0 and run["step_time_s"] > 0
        assert len(run["losses"]) == 2
        assert data["memory_vs_plan"][name]["plan_bytes"] > 0
    assert runs["packed_recipe"]["preflight_report"]["packed"] is True
    assert data["ratio_packed_over_padded"] > 0
    assert data["parameters"]["total"] == data["parameters"]["active"] > 0
    for impl in ("sdpa", "eager"):
        iso = data["isolation"][impl]
        assert iso["dtype"] == "bfloat16" and iso["ok"] and iso["max_abs_diff"] <= iso["tolerance"]
    assert "packed / padded throughput" in result.stdout and "isolation in bf16" in result.stdout


def test_without_cuda_it_refuses_instead_of_measuring_the_cpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(SystemExit, match="no CUDA device"):
        _module().main(["--work", "unused-never-created"])
    assert not (REPO / "unused-never-created").exists()


def test_it_says_how_to_bring_the_wheels_and_knows_the_peaks():
    module = _module()
    assert "pip download" in module.__doc__ and "--no-index --find-links" in module.__doc__
    assert module.peak_tflops("NVIDIA H200", None) == 989.0
    assert module.peak_tflops("NVIDIA A100-SXM4-80GB", None) == 312.0
    assert module.peak_tflops("Mystery GPU", 123.0) == 123.0
    assert module.peak_tflops("Mystery GPU", None) is None


def test_picks_the_largest_config_that_fits():
    from beam_sft.train.plan import PlanSetup, plan

    module = _module()
    config, result = module.pick_config("llama", gpu_gib=60.0, micro_batch=2, max_length=16384, max_params=1e12)
    assert result.fits
    index = [module.model_config("llama", hidden=h, layers=n, vocab=128256).hidden_size for h, n in module.LADDER]
    position = index.index(config.hidden_size)
    if position + 1 < len(module.LADDER):  # the next size up does not fit
        hidden, layers = module.LADDER[position + 1]
        bigger = module.model_config("llama", hidden=hidden, layers=layers, vocab=128256)
        assert not plan(bigger, PlanSetup(gpus=1, gpus_per_node=1, gpu_memory_gib=60.0, strategy="ddp",
                                          max_length=16384, micro_batch=2, activation_checkpointing=True)).fits
