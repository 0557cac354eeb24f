"""``train`` reads only prepared folders that verified cleanly and still match their digests; the
recipe key ``data.allow_unverified`` trains on others, loudly. Real ``prepare`` output throughout."""

from __future__ import annotations

import pytest

from beam_sft.dataset_folder import update_report
from beam_sft.errors import PreflightError
from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
from beam_sft.train import data as train_data
from beam_sft.train.recipe import recipe_from_dict
from tests.encode.conftest import simple_row, write_jsonl


def _prepare(tmp_path, fixture_dir, *, verify: bool):
    rows = write_jsonl(tmp_path / "rows.jsonl", [simple_row(i) for i in range(4)])
    return prepare(PrepareConfig(sources=[SourceSpec(path=str(rows))], tokenizer=str(fixture_dir),
                                 output=str(tmp_path / f"out-{verify}"), num_proc=1, verify=verify))


def _recipe(fixture_dir, prepared, **data):
    return recipe_from_dict({"model": {"path": str(fixture_dir)}, "data": {"prepared": str(prepared), **data},
                             "sft": {"output_dir": "unused"}})


def test_a_verified_folder_is_trainable_and_loads_with_the_contract_types(tmp_path, fixture_dir):
    out = _prepare(tmp_path, fixture_dir, verify=True)
    assert train_data.resolve_prepared(_recipe(fixture_dir, out)) == out
    dataset = train_data.load_prepared(out)
    assert dataset.features["input_ids"].feature.dtype == "int32"
    assert dataset.features["assistant_masks"].feature.dtype == "int8"
    assert train_data.load_tokenizer(out).chat_template


def test_a_never_verified_folder_is_refused(tmp_path, fixture_dir):
    out = _prepare(tmp_path, fixture_dir, verify=False)
    with pytest.raises(PreflightError, match="was never verified"):
        train_data.resolve_prepared(_recipe(fixture_dir, out))


def test_a_failed_verification_is_refused_unless_the_recipe_says_so(tmp_path, fixture_dir, caplog):
    out = _prepare(tmp_path, fixture_dir, verify=True)
    update_report(out, "verify", {"ok": False, "violations": 1})
    with pytest.raises(PreflightError, match=r"failed verification \(report.json verify.ok is false\)"):
        train_data.resolve_prepared(_recipe(fixture_dir, out))
    with caplog.at_level("WARNING", logger="beam_sft.train"):
        assert train_data.resolve_prepared(_recipe(fixture_dir, out, allow_unverified=True)) == out
    assert "data.allow_unverified is set" in caplog.text
