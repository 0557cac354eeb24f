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


# --- the MoE fixtures (--arch beam / gpt_oss / deepseek_v3) ---------------------------------------


@pytest.mark.parametrize("arch", ["beam", "gpt_oss", "deepseek_v3"])
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


def test_beam_fixture_has_beams_real_pattern(tmp_path):
    """--arch beam is transformers' own BeamForCausalLM with every trait training touches, read back
    from the saved config and from the modules the reloaded model really has."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, BeamForCausalLM

    from beam_sft.harmony.fixture import build_fixture
    from tests.train.conftest import train_rows  # the rows the training tests use

    out = build_fixture(tmp_path / "beam", arch="beam")
    config = AutoConfig.from_pretrained(out)
    assert config.model_type == "beam"
    # Attention: BeamConfig's pattern, sliding layers with RoPE, full layers without (NoPE).
    assert config.num_hidden_layers >= 6
    assert "full_attention" in config.layer_types and config.layer_types[-1] == "full_attention"
    assert config.layer_types.count("sliding_attention") >= 4
    assert config.rope_parameters["full_attention"] is None
    assert config.rope_parameters["sliding_attention"]["rope_type"] == "default"
    tokenizer = AutoTokenizer.from_pretrained(out)
    lengths = [len(tokenizer.apply_chat_template(r["messages"], tools=r.get("tools"), return_dict=True)["input_ids"])
               for r in train_rows(8)]
    assert config.sliding_window < min(lengths), "the sliding layers must really slide on the test rows"
    # Experts: a dense layer first, then MoE layers; >= 8 experts, top-2, >= 2 groups that restrict.
    assert config.mlp_layer_types[0] == "dense" and config.mlp_layer_types.count("sparse") >= 4
    assert config.num_experts >= 8 and config.num_experts_per_tok == 2
    assert config.n_group >= 2 and config.topk_group < config.n_group
    assert config.final_logit_softcapping == 30.0 and config.tie_word_embeddings is False

    model = AutoModelForCausalLM.from_pretrained(out)
    assert type(model) is BeamForCausalLM
    assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()  # untied
    rotary = model.model.rotary_emb
    assert hasattr(rotary, "sliding_attention_inv_freq") and not hasattr(rotary, "full_attention_inv_freq")
    saved = load_file(out / "model.safetensors")
    routers = []
    for index, (layer, kind) in enumerate(zip(model.model.layers, config.layer_types, strict=True)):
        attention = layer.self_attn
        assert attention.sliding_window == (config.sliding_window if kind == "sliding_attention" else None)
        assert isinstance(attention.gate_proj, torch.nn.Linear) and attention.gate_bias.shape == (config.num_attention_heads,)
        spread = float(attention.gate_bias.detach().max() - attention.gate_bias.detach().min())
        assert spread > 0.5, "the output gate's bias is spread, so heads gate differently"
        if config.mlp_layer_types[index] == "dense":
            assert hasattr(layer.mlp, "gate_proj") and not hasattr(layer.mlp, "gate")  # SwiGLU, no router
            continue
        router = layer.mlp.gate
        bias = router.e_score_correction_bias
        assert router.weight.shape == (config.num_experts, config.hidden_size)
        assert layer.mlp.experts.gate_up_proj.shape[0] == config.num_experts
        assert float(bias.abs().min()) > 0, "a non-zero correction bias, so any change to it shows"
        # It is saved (a persistent buffer), and bf16 could not hold it: a cast would show bit for bit.
        assert torch.equal(saved[f"model.layers.{index}.mlp.gate.e_score_correction_bias"], bias)
        assert not torch.equal(bias.to(torch.bfloat16).float(), bias)
        routers.append(router)

    ids = torch.randint(10, 800, (1, 64), generator=torch.Generator().manual_seed(0))
    chosen, captured = [], {}
    hooks = [r.register_forward_hook(lambda _m, _i, o: chosen.append(o[2])) for r in routers]
    hooks.append(model.lm_head.register_forward_hook(lambda _m, _i, o: captured.setdefault("raw", o)))
    with torch.no_grad():
        output = model(ids, labels=ids)
    for hook in hooks:
        hook.remove()
    # No load-balancing loss: the sigmoid router is balanced by its bias, not by a loss term.
    assert getattr(output, "aux_loss", None) is None
    # Logits are the head's, soft-capped: 30 * tanh(raw / 30), not the raw head output.
    raw = captured["raw"]
    assert torch.allclose(output.logits, 30.0 * torch.tanh(raw / 30.0), atol=1e-6)
    assert not torch.allclose(output.logits, raw, atol=1e-6, rtol=0)
    # Routing really differs: tokens spread over (nearly) every expert and over both groups.
    per_group = config.num_experts // config.n_group
    for indices in chosen:
        assert len(set(indices.flatten().tolist())) >= config.num_experts - 2
        groups = {tuple(sorted({int(e) // per_group for e in row})) for row in indices}
        assert all(len(g) == 1 for g in groups), "topk_group 1: both experts of a token from one group"
        assert len({g[0] for g in groups}) == config.n_group, "and tokens use every group"

    # The router is fp32 whatever dtype the rest loads in (Beam's _keep_in_fp32_modules_strict).
    half = AutoModelForCausalLM.from_pretrained(out, dtype=torch.bfloat16)
    assert half.model.layers[1].mlp.experts.gate_up_proj.dtype == torch.bfloat16
    assert {r.weight.dtype for r in (layer.mlp.gate for layer in half.model.layers[1:])} == {torch.float32}
    assert half.model.layers[1].mlp.gate.e_score_correction_bias.dtype == torch.float32
    assert torch.equal(half.model.layers[1].mlp.gate.e_score_correction_bias, routers[0].e_score_correction_bias)


def test_gpt_oss_fixture_has_sinks_and_an_aux_loss(tmp_path):
    """gpt_oss stays for what Beam lacks: attention sinks and a softmax router with an aux loss."""
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

    assert cli_main(["fixture", "--out", str(tmp_path), "--arch", "beam"]) == 0
    assert "arch beam" in capsys.readouterr().out
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "beam"
    with pytest.raises(SystemExit):
        cli_main(["fixture", "--out", str(tmp_path / "x"), "--arch", "mixtral"])
