"""A row too long to fit whatever its tokenization is dropped before it is
tokenized, the bound never drops a row that fits, and such rows stay out of the probe."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_sft.encode.fast.encoder import FastEncoder
from beam_sft.encode.length import char_bound, max_chars_per_token
from beam_sft.encode.template_encode import TemplateEncoder
from beam_sft.errors import Rejection

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400) | st.from_regex(
    r"( {1,40}|\n{1,20}|[a-z]{1,30}|[0-9]{1,12}|[!-/]{1,8}|[éüñ日本語🎉]{1,6})+", fullmatch=True)


def _row(content: str) -> dict:
    return {"messages": [{"role": "user", "content": content},
                         {"role": "assistant", "reasoning_content": "r", "content": "ok"}]}


@settings(max_examples=300, deadline=None)
@given(text=TEXT)
def test_no_token_stands_for_more_characters_than_the_bound(tokenizer, text):
    per_token = max_chars_per_token(tokenizer)
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert len(ids) >= math.ceil(len(text) / per_token)


@pytest.fixture(scope="module")
def realistic_per_token(realistic_tokenizer) -> int:
    return max_chars_per_token(realistic_tokenizer)  # once: it reads the 200k-token vocabulary


@pytest.mark.realistic
@settings(max_examples=300, deadline=None)
@given(text=TEXT)
def test_the_bound_holds_for_the_realistic_tokenizer(realistic_tokenizer, realistic_per_token, text):
    assert len(realistic_tokenizer.encode(text, add_special_tokens=False)) >= math.ceil(len(text) / realistic_per_token)


def test_no_bound_with_a_normalizer_or_another_policy(tokenizer):
    assert char_bound(tokenizer, None, "drop") is None
    assert char_bound(tokenizer, 64, "trim_turns") is None
    assert char_bound(tokenizer, 64, "drop") == 64 * max_chars_per_token(tokenizer)

    class Normalized:
        class backend_tokenizer:  # noqa: N801
            normalizer = object()

    assert max_chars_per_token(Normalized()) is None


@pytest.mark.parametrize("encoder_class", [FastEncoder, TemplateEncoder])
def test_a_row_past_the_bound_is_too_long_untokenized(tokenizer, encoder_class, monkeypatch):
    bound = char_bound(tokenizer, 64, "drop")
    huge = _row("word " * (bound // 5 + 10))
    fits = _row("short")
    encoder = encoder_class(tokenizer)
    tokenized: list[int] = []
    if encoder_class is FastEncoder:
        real = encoder._tokenize_pieces
        monkeypatch.setattr(encoder, "_tokenize_pieces", lambda pieces: tokenized.extend(map(len, pieces)) or real(pieces))
    else:
        from beam_sft.encode import template_encode

        real = template_encode.template_encode_raw
        monkeypatch.setattr(template_encode, "template_encode_raw",
                            lambda row, tok: tokenized.append(len(json.dumps(row))) or real(row, tok))
    too_long, ok = encoder.encode_batch([huge, fits], plain=True, max_chars=bound)
    assert isinstance(too_long, Rejection) and too_long.code == "too_long" and "not tokenized" in too_long.detail
    assert not isinstance(ok, Rejection)
    assert max(tokenized) < bound  # the huge row's text never reached the tokenizer


def test_prepare_drops_it_early_and_keeps_it_out_of_the_probe(tmp_path, tokenizer_dir, tokenizer, monkeypatch):
    from beam_sft.encode import select
    from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
    from tests.encode.conftest import simple_row, write_jsonl

    bound = char_bound(tokenizer, 512, "drop")
    rows = [_row("x " * bound), *[simple_row(i) for i in range(3)]]
    data = write_jsonl(tmp_path / "rows.jsonl", rows)
    seen: list[list[dict]] = []
    real = select.choose_encoder
    monkeypatch.setattr(select, "choose_encoder", lambda choice, tok, sample: seen.append(sample) or real(choice, tok, sample))
    out = prepare(PrepareConfig(sources=[SourceSpec(path=str(data))], tokenizer=str(tokenizer_dir),
                                output=str(tmp_path / "out"), num_proc=1, verify=False, max_length=512))
    assert len(seen[0]) == 3 and all(len(json.dumps(r)) < 1000 for r in seen[0])
    (line,) = (out / "rejects.jsonl").read_text().splitlines()
    reject = json.loads(line)
    assert reject["code"] == "too_long" and reject["row"] == 0 and "not tokenized" in reject["message"]
