"""``dataset_folder.tokenizer.load_tokenizer`` hands transformers the added tokens of a plain fast tokenizer
folder itself (``added_tokens_kwargs``), so that tokenizer.json is not parsed in Python a second
time (0.8 s of CPU per load for a 200k vocabulary; the backend parses it anyway): the tokenizer it
returns must be the one transformers' own load returns, attribute for attribute and token for token.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_sft.dataset_folder.tokenizer import added_tokens_entries, added_tokens_kwargs, load_tokenizer

TEXTS = ["plain text", "  spaces\tand\nnewlines ", "é中😀", "<|start|>user<|message|>hi<|end|>", "<|return|>x"]


def _added(tokenizer) -> dict:
    return {i: (t.content, t.single_word, t.lstrip, t.rstrip, t.normalized, t.special)
            for i, t in tokenizer.added_tokens_decoder.items()}


def _same_tokenizer(ours, theirs) -> None:
    assert type(ours) is type(theirs)
    assert _added(ours) == _added(theirs)
    assert ours.get_added_vocab() == theirs.get_added_vocab()
    assert ours.special_tokens_map == theirs.special_tokens_map
    assert ours.all_special_tokens == theirs.all_special_tokens
    assert ours.chat_template == theirs.chat_template and len(ours) == len(theirs)
    assert ours.backend_tokenizer.to_str() == theirs.backend_tokenizer.to_str()
    # (the same entries; in another order, since ours come in as a keyword)
    assert {k: repr(v) for k, v in ours.init_kwargs.items()} == {k: repr(v) for k, v in theirs.init_kwargs.items()}
    for text in TEXTS:
        assert ours(text)["input_ids"] == theirs(text)["input_ids"]
    messages = [{"role": "user", "content": "hi <b>"}, {"role": "assistant", "thinking": "t", "content": "ok"}]
    assert ours.apply_chat_template(messages, tokenize=False) == theirs.apply_chat_template(messages, tokenize=False)


def _check_load(folder: Path) -> None:
    from transformers import PreTrainedTokenizerFast

    assert added_tokens_kwargs(folder), folder  # the fast path is taken on this folder
    path = folder / "tokenizer.json"
    assert added_tokens_entries(path) == json.loads(path.read_text(encoding="utf-8"))["added_tokens"]
    _same_tokenizer(load_tokenizer(folder), PreTrainedTokenizerFast.from_pretrained(str(folder)))


def test_the_load_is_transformers_own_load(fixture_dir):
    _check_load(fixture_dir)


@pytest.mark.realistic
def test_the_load_is_transformers_own_load_for_gpt_oss(realistic_tokenizer_dir):
    _check_load(realistic_tokenizer_dir)


def test_tokenizer_json_is_not_parsed_in_python(fixture_dir, monkeypatch):
    import transformers.tokenization_utils_base as base

    read: list[str] = []
    original = base.json.load

    def recording(handle, *args, **kwargs):
        read.append(Path(getattr(handle, "name", "?")).name)
        return original(handle, *args, **kwargs)

    monkeypatch.setattr(base.json, "load", recording)
    load_tokenizer(fixture_dir)
    assert "tokenizer.json" not in read and "tokenizer_config.json" in read


def test_entries_are_the_files_added_tokens(fixture_dir):
    path = fixture_dir / "tokenizer.json"  # (the gpt-oss file: its realistic test)
    assert added_tokens_entries(path) == json.loads(path.read_text(encoding="utf-8"))["added_tokens"]


def test_folders_the_legacy_branch_reads_more_of_are_left_to_transformers(fixture_dir, tmp_path):
    import shutil

    for extra in ("special_tokens_map.json", "added_tokens.json"):
        folder = tmp_path / extra
        shutil.copytree(fixture_dir, folder)
        (folder / extra).write_text("{}", encoding="utf-8")
        assert added_tokens_kwargs(folder) == {}
    folder = tmp_path / "decoder-in-config"
    shutil.copytree(fixture_dir, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "added_tokens_decoder": {}}), encoding="utf-8")
    assert added_tokens_kwargs(folder) == {}


_TOKEN = st.fixed_dictionaries({"id": st.integers(0, 10**6), "content": st.text(max_size=8),
                                "special": st.booleans()})
_VALUE = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=6),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                      max_leaves=8)


@settings(max_examples=100, deadline=None)
@given(before=st.dictionaries(st.text(max_size=6).filter(lambda k: k != "added_tokens"), _VALUE, max_size=4),
       tokens=st.one_of(st.lists(_TOKEN, max_size=4), _VALUE), after=st.dictionaries(st.text(max_size=6), _VALUE, max_size=3),
       indent=st.sampled_from([None, 0, 2]), ensure_ascii=st.booleans(), present=st.booleans())
def test_entries_match_a_full_parse_whatever_the_layout(tmp_path_factory, before, tokens, after, indent, ensure_ascii,
                                                        present):
    data = {**before, **({"added_tokens": tokens} if present else {})}
    data.update({k: v for k, v in after.items() if k not in data})
    path = tmp_path_factory.mktemp("t") / "tokenizer.json"
    path.write_text(json.dumps(data, indent=indent, ensure_ascii=ensure_ascii), encoding="utf-8")
    parsed = json.loads(path.read_text(encoding="utf-8")).get("added_tokens")
    shaped = isinstance(parsed, list) and all(isinstance(e, dict) and "id" in e for e in parsed)
    assert added_tokens_entries(path) == (parsed if shaped else None)


@pytest.mark.parametrize("text", ["", "[]", '{"added_tokens" 1}', '{"a": 1 "added_tokens": []}', "{'a': 1}",
                                  '{"added_tokens": [{"id": 1}], "added_tokens": [{"id": 2}]}'])
def test_entries_of_a_file_not_laid_out_so_are_none(tmp_path, text):
    path = tmp_path / "tokenizer.json"
    path.write_text(text, encoding="utf-8")
    try:
        assert added_tokens_entries(path) is None
    except ValueError:  # not JSON at all: the caller falls back (added_tokens_kwargs catches it)
        assert added_tokens_kwargs(tmp_path) == {}


def test_the_head_grows_until_the_added_tokens_are_in_it_whatever_the_cut(tmp_path, monkeypatch):
    # the head is decoded from a byte prefix: a cut inside a character or inside the list must not
    # change the entries (4-byte, 3-byte and 2-byte characters around every cut)
    from beam_sft.dataset_folder import tokenizer as tok

    tokens = [{"id": i, "content": c, "special": True} for i, c in enumerate(["<|é|>", "𝄞x", "漢字", "a"])]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"version": "1.0", "truncation": None, "added_tokens": tokens,
                                "model": {"vocab": {"ü": 0}}}, ensure_ascii=False), encoding="utf-8")
    for size in range(1, len(path.read_bytes()) + 2):
        monkeypatch.setattr(tok, "PREFIX_BYTES", size)
        assert added_tokens_entries(path) == tokens, size
    path.write_bytes(path.read_bytes()[:-3] + b"\xff}}")  # not UTF-8 after the list: a full decode refuses
    monkeypatch.setattr(tok, "PREFIX_BYTES", 1 << 20)
    with pytest.raises(ValueError):
        added_tokens_entries(path)
