"""The MoE fixture checkpoints for the training tests (same tokenizer as the dense fixture, so the
session's prepared dataset serves them all). ``beam`` is the MoE fixture; ``gpt_oss`` stays for what
Beam lacks (attention sinks, a softmax router with an aux loss), ``deepseek_v3`` for shared experts
and multi-head latent attention."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def moe_dirs(tmp_path_factory) -> dict[str, Path]:
    from beam_sft.harmony.fixture import build_fixture

    root = tmp_path_factory.mktemp("moe-fixtures")
    return {arch: build_fixture(root / arch, arch=arch) for arch in ("beam", "gpt_oss", "deepseek_v3")}


BIAS = "e_score_correction_bias"


def safetensors_in(folder: Path) -> dict:
    from safetensors.torch import load_file

    tensors = {}
    for path in sorted(Path(folder).glob("*.safetensors")):
        tensors.update(load_file(path))
    return tensors


def assert_beam_routers_kept(base: Path, saved: Path, *, trained: bool, run: Path | None = None) -> None:
    """The saved (or exported, or merged) Beam weights in ``saved`` hold every e_score_correction_bias
    bit for bit as ``base`` has it, in float32, and float32 router weights that trained (full
    fine-tune) or did not (LoRA: frozen); ``run``'s beam_run.json says the routers were float32 on the
    wrapped model and their biases checked unchanged."""
    import json

    import torch

    before, after = safetensors_in(base), safetensors_in(saved)
    biases = [k for k in before if k.endswith(BIAS)]
    assert len(biases) == 5
    for key in biases:
        assert after[key].dtype == torch.float32 and torch.equal(after[key], before[key]), key
        weight = key.replace(BIAS, "weight")
        assert after[weight].dtype == torch.float32
        assert torch.equal(after[weight], before[weight]) is not trained, weight
    if run is not None:
        routers = json.loads((run / "beam_run.json").read_text())["routers"]
        assert routers == {"routers": 5, "correction_biases_unchanged": 5, "dtypes_after_wrapping": ["torch.float32"]}
