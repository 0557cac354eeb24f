"""Building a Beam tokenizer from the gpt-oss files (the realistic tier)."""

from __future__ import annotations

import json

import pytest

from beam_sft.harmony import markers
from beam_sft.harmony.gptoss_tokenizer import build_beam_tokenizer


def _as_gpt_oss(fixture_dir, out):
    """The fixture's files with every marker special, as gpt-oss ships them."""
    out.mkdir()
    spec = json.loads((fixture_dir / "tokenizer.json").read_text())
    for token in spec["added_tokens"]:
        if token["content"] in markers.ALL_MARKERS:
            token["special"] = True
    (out / "tokenizer.json").write_text(json.dumps(spec))
    config = json.loads((fixture_dir / "tokenizer_config.json").read_text())
    config["eos_token"] = "<|endoftext|>"
    config["chat_template"] = "{{ 'something else' }}"
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    return out


def test_only_return_stays_special(fixture_dir, tmp_path):
    from transformers import AutoTokenizer

    from beam_sft.harmony.template import load_chat_template

    source = _as_gpt_oss(fixture_dir, tmp_path / "src")
    tok = AutoTokenizer.from_pretrained(build_beam_tokenizer(source, tmp_path / "beam"))
    flags = {t.content: t.special for t in tok.added_tokens_decoder.values() if t.content in markers.ALL_MARKERS}
    assert flags == {m: m in markers.SPECIAL_MARKERS for m in markers.ALL_MARKERS}
    assert tok.eos_token == markers.EOS
    assert tok.chat_template == load_chat_template()


def test_refuses_a_tokenizer_without_markers(tmp_path, fixture_dir):
    source = tmp_path / "src"
    source.mkdir()
    spec = json.loads((fixture_dir / "tokenizer.json").read_text())
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] != markers.CALL]
    (source / "tokenizer.json").write_text(json.dumps(spec))
    (source / "tokenizer_config.json").write_text("{}")
    with pytest.raises(ValueError, match="markers missing"):
        build_beam_tokenizer(source, tmp_path / "out")


@pytest.mark.realistic
def test_realistic_tokenizer_is_fit(realistic_tokenizer):
    from beam_sft.harmony.check import check_tokenizer

    assert len(realistic_tokenizer) > 200_000
    assert check_tokenizer(realistic_tokenizer) == []
