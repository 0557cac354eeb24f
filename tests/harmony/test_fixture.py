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
