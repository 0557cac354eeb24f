"""Fingerprint parts and the output-directory cache."""

from __future__ import annotations

import copy

from beam_sft.data import fingerprint
from beam_sft.prepare import cache
from beam_sft.prepared import output


def test_json_digest_ignores_key_order_but_not_values():
    assert fingerprint.digest_json({"a": 1, "b": 2}) == fingerprint.digest_json({"b": 2, "a": 1})
    assert fingerprint.digest_json({"a": 1}) != fingerprint.digest_json({"a": 1.5})
    assert fingerprint.combine({"x": "1"}) != fingerprint.combine({"x": "2"})


def test_data_digest_of_files_and_folders(tmp_path):
    file = tmp_path / "d" / "a.jsonl"
    file.parent.mkdir()
    file.write_text("one\n")
    folder_before = fingerprint.data_digest(file.parent)
    file_before = fingerprint.data_digest(file)
    (file.parent / "b.jsonl").write_text("two\n")
    assert fingerprint.data_digest(file) == file_before
    assert fingerprint.data_digest(file.parent) != folder_before
    file.write_text("one!\n")
    assert fingerprint.data_digest(file) != file_before
    assert fingerprint.data_digest("org/hub-name") == fingerprint.data_digest("org/hub-name")


def test_tokenizer_digest_sees_flags_and_special_tokens(tokenizer):
    from tokenizers import AddedToken

    base = fingerprint.tokenizer_digest(tokenizer)
    assert fingerprint.tokenizer_digest(copy.deepcopy(tokenizer)) == base
    changed = copy.deepcopy(tokenizer)
    changed.add_tokens([AddedToken("<|new|>", special=False, normalized=False)])
    assert fingerprint.tokenizer_digest(changed) != base
    changed = copy.deepcopy(tokenizer)
    changed.pad_token = changed.eos_token
    assert fingerprint.tokenizer_digest(changed) != base


def test_package_digest_changes_with_code(tmp_path, monkeypatch):
    package = tmp_path / "fakepkg_h4"
    package.mkdir()
    (package / "__init__.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = fingerprint.package_digest("fakepkg_h4")
    (package / "more.py").write_text("Y = 2\n")
    assert fingerprint.package_digest("fakepkg_h4") != before


def test_cache_needs_matching_fingerprint_and_complete_dir(tmp_path):
    out = tmp_path / "out"
    staging = output.staging_dir(out)
    (staging / "tokenizer").mkdir()
    (staging / "dataset_info.json").write_text("{}")
    (staging / "report.json").write_text('{"fingerprint": "abc"}')
    assert not cache.is_cached(out, "abc")
    output.publish(staging, out)
    assert cache.is_cached(out, "abc") and not cache.is_cached(out, "abd")
    newer = output.staging_dir(out)
    (newer / "report.json").write_text('{"fingerprint": "new"}')
    output.publish(newer, out)
    assert output.read_report(out) == {"fingerprint": "new"}
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert cache.default_output("0123456789abcdef0123").name == "0123456789abcdef"
