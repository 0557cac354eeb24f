"""The fixture checkpoint: deterministic, loadable offline, Harmony markers as single tokens, model matches."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from beam_sft.harmony import markers
from beam_sft.harmony.fixture import PAD_TOKEN

REPO_ROOT = Path(__file__).resolve().parents[2]


def _files(directory) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def test_builds_are_byte_identical(fixture_dir, tmp_path):
    """A second build, in another process with another hash seed, writes the same bytes."""
    again = tmp_path / "again"
    code = "import sys; from beam_sft.harmony.fixture import build_fixture; build_fixture(sys.argv[1])"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run(
        [sys.executable, "-c", code, str(again)], check=True, env=env, cwd=REPO_ROOT, capture_output=True
    )
    first, second = _files(fixture_dir), _files(again)
    assert {"tokenizer.json", "tokenizer_config.json", "model.safetensors", "config.json"} <= set(first)
    assert list(first) == list(second)
    assert [name for name in first if first[name] != second[name]] == []


def test_loads_offline_with_markers_as_single_tokens(fixture_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(fixture_dir, local_files_only=True)
    assert tokenizer.is_fast
    ids = {}
    for marker in markers.ALL_MARKERS:
        encoded = tokenizer.encode(marker, add_special_tokens=False)
        assert len(encoded) == 1, (marker, tokenizer.convert_ids_to_tokens(encoded))
        ids[marker] = encoded[0]
    assert len(set(ids.values())) == len(markers.ALL_MARKERS)
    assert tokenizer.eos_token == markers.RETURN and tokenizer.pad_token == PAD_TOKEN
    assert set(tokenizer.all_special_tokens) == {markers.RETURN, PAD_TOKEN}
    assert tokenizer.chat_template and "generation" in tokenizer.chat_template
    assert tokenizer.response_template is not None


def test_model_matches_the_tokenizer(fixture_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(fixture_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(fixture_dir, local_files_only=True)
    assert model.config.vocab_size == len(tokenizer)
    assert model.get_input_embeddings().weight.shape[0] == len(tokenizer)
    assert max(tokenizer.get_vocab().values()) == len(tokenizer) - 1
    stop_ids = [tokenizer.convert_tokens_to_ids(m) for m in markers.STOP_MARKERS]
    assert model.generation_config.eos_token_id == stop_ids
    assert model.generation_config.pad_token_id == tokenizer.pad_token_id
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hello!"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )["input_ids"]
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], len(tokenizer))


def test_common_text_is_compact(tokenizer):
    """The corpus teaches the wire words and common English, so rendered rows stay short."""
    for word in ("system", "user", "developer", "assistant", "xml"):
        assert len(tokenizer.encode(word, add_special_tokens=False)) == 1, word
    assert len(tokenizer.encode("Hello! How can I help you today?", add_special_tokens=False)) <= 10


# --- beam-sft fixture -----------------------------------------------------------------------------


@pytest.fixture
def cli_main(monkeypatch):
    """beam_sft.cli.main with only this area's commands, so other areas' modules cannot break it."""
    import beam_sft.cli

    monkeypatch.setattr(beam_sft.cli, "COMMAND_MODULES", ("beam_sft.harmony.cli",))
    return beam_sft.cli.main


def test_fixture_command_without_model(cli_main, tmp_path, capsys, fixture_dir):
    out = tmp_path / "tok"
    assert cli_main(["fixture", "--out", str(out), "--no-model"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote the fixture checkpoint to {out}" in printed
    assert "tokenizer.json" in printed and "model.safetensors" not in printed
    assert not (out / "model.safetensors").exists()
    assert (out / "tokenizer.json").read_bytes() == (fixture_dir / "tokenizer.json").read_bytes()


def test_fixture_command_with_model(cli_main, tmp_path, capsys):
    assert cli_main(["fixture", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "model.safetensors" in printed and "config.json" in printed
    assert (tmp_path / "model.safetensors").is_file()


# --- the MoE fixtures (--arch gpt_oss / deepseek_v3) ----------------------------------------------


@pytest.mark.parametrize("arch", ["gpt_oss", "deepseek_v3"])
def test_moe_fixture_builds_are_byte_identical_and_match_the_tokenizer(arch, tmp_path, fixture_dir):
    from beam_sft.harmony.fixture import build_fixture

    code = "import sys; from beam_sft.harmony.fixture import build_fixture; build_fixture(sys.argv[1], arch=sys.argv[2])"
    env = {**os.environ, "PYTHONHASHSEED": "777"}
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "b"), arch], check=True, env=env, cwd=REPO_ROOT,
                   capture_output=True)
    first, second = _files(build_fixture(tmp_path / "a", arch=arch)), _files(tmp_path / "b")
    assert list(first) == list(second)
    assert [name for name in first if first[name] != second[name]] == []
    # The tokenizer is the shared one, whatever the architecture.
    assert first["tokenizer.json"] == (fixture_dir / "tokenizer.json").read_bytes()


def test_gpt_oss_fixture_is_shaped_like_beam(tmp_path):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from beam_sft.harmony.fixture import build_fixture

    out = build_fixture(tmp_path / "moe", arch="gpt_oss")
    config = AutoConfig.from_pretrained(out)
    assert config.model_type == "gpt_oss"
    assert config.num_local_experts >= 4 and config.num_experts_per_tok == 2
    assert config.layer_types == ["sliding_attention"] * 3 + ["full_attention"]
    assert config.router_aux_loss_coef > 0
    from tests.train.conftest import train_rows  # the rows the training tests use

    tokenizer = AutoTokenizer.from_pretrained(out)
    lengths = [len(tokenizer.apply_chat_template(r["messages"], tools=r.get("tools"), return_dict=True)["input_ids"])
               for r in train_rows(8)]
    assert config.sliding_window < min(lengths), "the sliding layers must really slide on the test rows"
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.vocab_size == len(tokenizer)
    sinks = [layer.self_attn.sinks for layer in model.model.layers]
    assert all(float(s.abs().max()) > 0.1 for s in sinks), "attention sinks are set and matter"
    ids = torch.randint(10, 800, (1, 40), generator=torch.Generator().manual_seed(0))
    out_ = model(ids, labels=ids, output_router_logits=True)
    assert out_.aux_loss is not None and float(out_.aux_loss) > 0
    # Tokens go to different experts (top-2 of 4), not all to the same two.
    chosen = torch.cat([logits.topk(2, dim=-1).indices.flatten() for logits in out_.router_logits])
    assert len(set(chosen.tolist())) == config.num_local_experts


def test_deepseek_v3_fixture_has_shared_experts_and_mla(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    from beam_sft.harmony.fixture import build_fixture

    model = AutoModelForCausalLM.from_pretrained(build_fixture(tmp_path / "ds", arch="deepseek_v3"))
    config = model.config
    assert config.model_type == "deepseek_v3" and config.n_routed_experts >= 4 and config.n_shared_experts >= 1
    assert config.num_experts_per_tok == 2
    moe = model.model.layers[-1].mlp
    assert hasattr(moe, "shared_experts") and moe.experts.gate_up_proj.shape[0] == config.n_routed_experts
    attention = model.model.layers[0].self_attn
    assert config.kv_lora_rank < config.hidden_size and hasattr(attention, "kv_a_proj_with_mqa")  # MLA
    with torch.no_grad():
        assert torch.isfinite(model(torch.tensor([[5, 17, 300, 42]])).logits).all()


def test_fixture_command_arch(cli_main, tmp_path, capsys):
    import json

    assert cli_main(["fixture", "--out", str(tmp_path), "--arch", "gpt_oss"]) == 0
    assert "arch gpt_oss" in capsys.readouterr().out
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "gpt_oss"
    with pytest.raises(SystemExit):
        cli_main(["fixture", "--out", str(tmp_path / "x"), "--arch", "mixtral"])
