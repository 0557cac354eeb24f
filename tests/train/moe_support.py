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
