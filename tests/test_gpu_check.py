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
    assert data["dry_run"] is True and data["device"] == "cpu" and data["arch"] == "beam"  # Beam by default
    config = data["config"]
    assert config["num_experts"] == 8 and config["n_group"] == 2 and config["final_logit_softcapping"] == 30.0
    assert config["layer_types"][-1] == "full_attention" and "sliding_attention" in config["layer_types"]
    assert config["mlp_layer_types"][0] == "dense" and config["mlp_layer_types"][-1] == "sparse"
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
    profile = runs["packed_recipe"]["profile"]  # the step profile, through the trainer's own loop
    assert profile["steps"] == 2 and profile["measured"] == "self_cpu_time_total" and profile["total_ms"] > 0
    assert len(profile["top"]) > 5 and all(r["ms"] >= 0 and r["calls"] >= 1 for r in profile["top"])
    assert "profile" not in runs["padded_trl_default"]
    assert data["ratio_packed_over_padded"] > 0
    assert data["parameters"]["total"] > data["parameters"]["active"] > 0  # an MoE: top-2 of 8 experts
    for impl in ("sdpa", "eager"):
        iso = data["isolation"][impl]
        assert iso["dtype"] == "bfloat16" and iso["compute_dtype"] == "bfloat16" and iso["ok"]
        assert iso["leak_diff"] == 0.0 and iso["alone_decides"] is False  # bf16 MoE: the counterfactual decides
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


def test_beam_ladder_keeps_beams_shape_and_picks_the_largest_that_fits():
    from transformers import BeamConfig

    module = _module()
    real = BeamConfig()
    config, result = module.pick_config("beam", gpu_gib=76.6, micro_batch=2, max_length=8192, max_params=4e9)
    assert result.fits and result.parameters["total"] <= 4e9
    assert type(config) is BeamConfig and config.num_experts == real.num_experts == 256
    assert (config.num_experts_per_tok, config.n_group, config.topk_group) == (8, 8, 4)
    assert config.head_dim == real.head_dim and config.vocab_size == real.vocab_size
    assert config.final_logit_softcapping == real.final_logit_softcapping
    assert config.layer_types.count("full_attention") >= 1 and config.layer_types[-1] == "full_attention"
    from beam_sft.train.plan import PlanSetup, plan

    for hidden, layers in module.BEAM_LADDER:  # nothing larger that fits under the cap was passed over
        other = module.model_config("beam", hidden=hidden, layers=layers, vocab=151936, experts=256, top_k=8)
        fitted = plan(other, PlanSetup(gpus=1, gpus_per_node=1, gpu_memory_gib=76.6, strategy="ddp", max_length=8192,
                                       micro_batch=2, activation_checkpointing=True))
        if fitted.fits and fitted.parameters["total"] <= 4e9:
            assert fitted.parameters["total"] <= result.parameters["total"]


def test_isolation_noise_script_runs_and_finds_no_leak_on_the_cpu(tmp_path):
    """benchmarks/gpu_isolation_noise.py (README, "Measured on a GPU") cannot rot: its dry run covers
    both inits, both dtypes, sdpa and eager, with and without our masks; on the CPU every sequence's
    first 64 logits equal its logits alone (a leak would move the later ones)."""
    out = tmp_path / "noise.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_isolation_noise.py"), "--dry-run",
                             "--out", str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    records = json.loads(out.read_text())
    assert {(r["init"], r["dtype"], r["impl"], r["our_masks"]) for r in records} == {
        (i, d, a, m) for i in ("default", "spread") for d in ("float32", "bfloat16") for a in ("sdpa", "eager")
        for m in (True, False)}
    for record in records:
        assert len(record["per_sequence"]) == 5
        assert all(s["max_first64"] == 0.0 for s in record["per_sequence"]), record


def test_the_committed_h100_results_say_what_the_readme_quotes():
    results = REPO / "benchmarks" / "results"
    noise = json.loads((results / "gpu-isolation-noise-h100.json").read_text())
    first = {(r["dtype"], r["impl"]): r["per_sequence"][0]["max_first64"]
             for r in noise if r["init"] == "default" and r["our_masks"]}
    assert first[("float32", "sdpa")] == first[("float32", "eager")] == first[("float32", "flex_attention")] == 0.0
    assert (first[("bfloat16", "sdpa")], first[("bfloat16", "eager")]) == (1.1904, 1.502)
    check = json.loads((results / "gpu-check-nvidia-h100-80gb-hbm3.json").read_text())
    assert check["arch"] == "beam" and check["gpu"] == "NVIDIA H100 80GB HBM3"
    assert check["ratio_packed_over_padded"] == 1.844
    assert all(r["ok"] and r["leak_diff"] == 0.0 for r in check["isolation"].values())
    before = json.loads((results / "gpu-check-nvidia-h100-80gb-hbm3-before-counterfactual.json").read_text())
    assert "packing leaks attention" in before["runs"]["packed_recipe"]["error"]
    readme = (REPO / "README.md").read_text()
    assert "1.19 / 1.50 / 1.19" in readme and "| 5,768 | 1.2% |" in readme and "| 10,640 | 2.2% |" in readme
