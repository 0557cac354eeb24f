"""verify_prepared(tokenizer=...) uses the caller's tokenizer only when it is proven to be DIR/tokenizer's;
anything changed on it, or files that differ, and the saved one is loaded as without it (and the
report says why)."""

from __future__ import annotations

import shutil

import pytest

from beam_sft.dataset_folder.tokenizer import load_tokenizer
from beam_sft.verify import verify_prepared
from beam_sft.verify.caller_tokenizer import differences, tokenizer_files


@pytest.fixture()
def prepared(make_prepared, tmp_path):
    """(prepared folder, a copy of its tokenizer files elsewhere, as prepare's source folder is)."""
    directory = make_prepared()
    source = tmp_path / "source-tokenizer"
    shutil.copytree(directory / "tokenizer", source)
    return directory, source


def _stats(result):
    return {k: v for k, v in result.stats.items() if k not in ("timing", "tokenizer")}


def test_the_callers_tokenizer_is_used_when_it_is_the_saved_one(prepared):
    directory, source = prepared
    plain = verify_prepared(directory, write=False)
    caller = verify_prepared(directory, write=False, tokenizer=load_tokenizer(source))
    assert caller.stats["tokenizer"] == {"from": "caller"} and plain.stats["tokenizer"] == {"from": "folder"}
    assert caller.ok and _stats(caller) == _stats(plain)
    given = verify_prepared(directory, write=False, tokenizer=load_tokenizer(source),
                            tokenizer_files=tokenizer_files(source))
    assert given.stats["tokenizer"] == {"from": "caller"}


def _template(tok):
    tok.chat_template = tok.chat_template.replace("<|start|>user", "<|start|>User")


def _added(tok):
    tok.add_tokens(["<|surprise|>"])


def _eos(tok):
    tok.eos_token = "<|end|>"


def _pre_tokenizer(tok):
    from tokenizers import pre_tokenizers

    tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()


@pytest.mark.parametrize("change", [_template, _added, _eos, _pre_tokenizer])
def test_a_changed_tokenizer_is_not_used(prepared, change):
    directory, source = prepared
    tok = load_tokenizer(source)
    change(tok)
    assert differences(tok, directory / "tokenizer")
    result = verify_prepared(directory, write=False, tokenizer=tok)
    assert result.ok  # checked with the saved tokenizer, as without the keyword
    assert result.stats["tokenizer"]["from"] == "folder" and result.stats["tokenizer"]["caller_differs"]


def test_changed_files_are_not_used(prepared):
    directory, source = prepared
    tok = load_tokenizer(source)
    files = tokenizer_files(source)
    files["tokenizer.json"] = "0" * 64
    found = differences(tok, directory / "tokenizer", files)
    assert found and "tokenizer.json" in found[0]
    (source / "tokenizer_config.json").write_text((source / "tokenizer_config.json").read_text() + "\n")
    assert differences(tok, directory / "tokenizer")  # digests read from its own folder now differ
