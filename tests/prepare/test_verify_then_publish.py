"""``prepare`` verifies its staging folder and publishes only what passed: a planted encoder bug
(one prompt token put in the loss) publishes and caches nothing, and the error names the folder
holding the dataset and verify_violations.jsonl."""

from __future__ import annotations

import json

import numpy as np
import pytest

from beam_sft.errors import VerificationError
from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
from beam_sft.prepare.pipeline import failed_dir
from tests.encode.conftest import simple_row, write_jsonl


def _config(tmp_path, fixture_dir, **options) -> PrepareConfig:
    data = write_jsonl(tmp_path / "rows.jsonl", [simple_row(i) for i in range(5)])
    return PrepareConfig(sources=[SourceSpec(path=str(data))], tokenizer=str(fixture_dir),
                         output=str(tmp_path / "out"), num_proc=1, encoder="template", **options)


def _plant_bug(monkeypatch):
    from beam_sft.encode import template_encode

    real = template_encode.apply_weights

    def buggy(mask, runs, weights):
        out = np.array(real(mask, runs, weights), copy=True)
        out[0] = 1  # the first token (a <|start|> of the prompt) trained
        return out

    monkeypatch.setattr(template_encode, "apply_weights", buggy)


def test_a_failed_verification_publishes_nothing(tmp_path, fixture_dir, monkeypatch):
    config = _config(tmp_path, fixture_dir)
    _plant_bug(monkeypatch)
    with pytest.raises(VerificationError) as info:
        prepare(config)
    final = tmp_path / "out"
    failed = failed_dir(final)
    message = str(info.value)
    assert "nothing was published or cached" in message and str(failed) in message
    assert not final.exists()
    assert (failed / "dataset_info.json").is_file()
    violations = (failed / "verify_violations.jsonl").read_text().splitlines()
    assert violations and all(json.loads(v) for v in violations)
    assert not list(tmp_path.glob(".out.staging-*"))  # no staging left behind
    # Without the bug the next run encodes afresh (nothing was cached) and publishes.
    monkeypatch.undo()
    out = prepare(config)
    report = json.loads((out / "report.json").read_text())
    assert report["verify"]["ok"] is True
    assert report["timing"]["phases"]["verify"] >= 0
    assert list(report["timing"]["phases"]).index("verify") > list(report["timing"]["phases"]).index("encode")


def test_without_verification_it_publishes_unverified(tmp_path, fixture_dir, monkeypatch):
    _plant_bug(monkeypatch)
    out = prepare(_config(tmp_path, fixture_dir, verify=False))
    assert "verify" not in json.loads((out / "report.json").read_text())
