"""The cache: a rerun with nothing changed reuses the result; changing any input encodes again."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from beam_sft.dataset_folder import load_tokenizer
from beam_sft.prepare import PrepareConfig, SourceSpec, cache, prepare
from beam_sft.prepare import records as read_module
from beam_sft.prepare.resolved import resolve
from tests.encode.conftest import simple_row, write_jsonl


@pytest.fixture
def setup(tmp_path, tokenizer_dir):
    data = write_jsonl(tmp_path / "rows.jsonl", [simple_row(i) for i in range(6)])
    tok = tmp_path / "tok"
    tok.mkdir()
    for file in tokenizer_dir.iterdir():  # a tokenizer folder of our own, to edit
        if file.is_file() and ("token" in file.name or file.name.startswith("chat_template")):
            shutil.copy(file, tok / file.name)
    config = PrepareConfig(sources=[SourceSpec(path=str(data))], tokenizer=str(tok), output=str(tmp_path / "out"),
                           num_proc=1, verify=False)
    return config, data, tok


def fingerprint(config) -> str:
    tokenizer = load_tokenizer(config.tokenizer)
    return cache.fingerprints(resolve(config, tokenizer), tokenizer)[0]


def test_rerun_is_a_hit_and_a_change_is_a_miss(setup, monkeypatch):
    config, data, _ = setup
    out = prepare(config)
    first = (out / "report.json").read_text()

    def boom(*args, **kwargs):
        raise AssertionError("encoded again although nothing changed")

    with monkeypatch.context() as patch:
        patch.setattr(read_module, "write_records", boom)
        assert prepare(dataclasses.replace(config, num_proc=2, batch_size=7)) == out
    assert (out / "report.json").read_text() == first

    with open(data, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(simple_row(99)) + "\n")
    prepare(config)
    assert json.loads((out / "report.json").read_text())["tokens"]["rows"] == 7


def test_no_cache_encodes_again(setup, monkeypatch):
    config, _, _ = setup
    prepare(config)
    calls = []
    original = read_module.write_records
    monkeypatch.setattr(read_module, "write_records", lambda *a, **k: calls.append(1) or original(*a, **k))
    prepare(dataclasses.replace(config, cache=False))
    assert calls == [1]


def test_what_the_fingerprint_sees(setup):
    config, data, tok = setup
    base = fingerprint(config)
    assert fingerprint(dataclasses.replace(config, num_proc=3, batch_size=5, verify=True)) == base
    assert fingerprint(dataclasses.replace(config, output="elsewhere")) == base

    options = [dataclasses.replace(config, max_length=100), dataclasses.replace(config, length_policy="trim_turns"),
               dataclasses.replace(config, seed=1), dataclasses.replace(config, missing_reasoning="unmask"),
               dataclasses.replace(config, sources=[SourceSpec(path=str(data), weight=2)]),
               dataclasses.replace(config, sources=[SourceSpec(path=str(data), convert={"strip_answer_tags": False})]),
               dataclasses.replace(config, num_shards=2), dataclasses.replace(config, num_shards=2, shard_index=1)]
    seen = {base} | {fingerprint(c) for c in options}
    assert len(seen) == len(options) + 1

    template = tok / "chat_template.jinja"
    template.write_text(template.read_text() + "\n{#- edited -#}")
    assert fingerprint(config) not in seen
    seen.add(fingerprint(config))

    spec = json.loads((tok / "tokenizer.json").read_text())
    spec["added_tokens"][0]["special"] = not spec["added_tokens"][0]["special"]
    (tok / "tokenizer.json").write_text(json.dumps(spec))
    assert fingerprint(config) not in seen
    seen.add(fingerprint(config))

    data.write_text(data.read_text().replace("Answer 0", "Answer zero"))
    assert fingerprint(config) not in seen


def test_code_version_is_in_the_fingerprint(setup, monkeypatch):
    config, _, _ = setup
    base = fingerprint(config)
    monkeypatch.setattr(cache, "ENCODER_VERSION", cache.ENCODER_VERSION + 1)
    assert fingerprint(config) != base
