"""The run record names the data by digest, and the record travels with the
weights through ``export`` and ``merge``."""

from __future__ import annotations

import json
from types import SimpleNamespace

from beam_sft.train.export import _copy_side_files
from beam_sft.train.merge import _carry_run_record
from beam_sft.train.provenance import folder_provenance
from beam_sft.train.recipe import recipe_from_dict
from beam_sft.train.run_log import run_record

from .conftest import recipe_dict


def test_the_run_record_holds_the_datas_digests(prepared_dir):
    recipe = SimpleNamespace(to_record=lambda: {"data": {"prepared": str(prepared_dir)}}, lora=None)
    record = run_record(recipe, prepared_dir, None, prepared_data=folder_provenance(prepared_dir))
    taken = record["prepared_data"]
    report = json.loads((prepared_dir / "report.json").read_text())
    assert taken == folder_provenance(prepared_dir)
    assert taken["report_seal"] == report["integrity"]["report"]
    assert taken["files"] == {rel: e["sha256"] for rel, e in report["files"]["files"].items()}
    assert taken["verified"]["ok"] is True


def test_the_saved_record_names_the_data_the_run_started_on(fixture_dir, prepared_dir, tmp_path):
    """The trainer takes the provenance once, at the start, and carries it on the run (no module
    memo): a prepare that replaces the folder while the run trains changes nothing beam_run.json says."""
    import shutil

    from transformers import TrainerCallback

    from beam_sft.dataset_folder import read_report, write_report
    from beam_sft.train.trainer import train

    folder = tmp_path / "prepared"
    shutil.copytree(prepared_dir, folder)
    before = folder_provenance(folder)

    class ReplaceTheFolder(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            write_report(folder, {**read_report(folder), "fingerprint": "another run"})

    out = train(recipe_from_dict(recipe_dict(fixture_dir, folder, tmp_path / "out", sft={"max_steps": 1})),
                callbacks=[ReplaceTheFolder()])
    assert folder_provenance(folder)["fingerprint"] == "another run"  # a fresh look sees the new data
    assert json.loads((out / "beam_run.json").read_text())["prepared_data"] == before


def test_the_missing_report_is_recorded_as_such(tmp_path):
    assert folder_provenance(tmp_path) == {"path": str(tmp_path.resolve()), "report_sha256": None}


def test_export_and_merge_carry_the_run_record(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoint-2").mkdir(parents=True)
    record = {"prepared": "out/prep", "prepared_data": {"report_sha256": "ab" * 32}}
    (run / "beam_run.json").write_text(json.dumps(record))
    exported = tmp_path / "exported"
    exported.mkdir()
    _copy_side_files(run / "checkpoint-2", exported)  # found in the run's folder above the checkpoint
    assert json.loads((exported / "beam_run.json").read_text()) == record
    merged = tmp_path / "merged"
    merged.mkdir()
    _carry_run_record(run, merged, "base-model")
    carried = json.loads((merged / "beam_run.json").read_text())
    assert carried["prepared_data"] == record["prepared_data"]
    assert carried["merged"] == {"adapter": str(run.resolve()), "base": "base-model"}


def test_an_eval_folder_is_held_to_the_training_rules(prepared_dir, tmp_path):
    import shutil

    import pytest

    from beam_sft.errors import PreflightError
    from beam_sft.train.eval_set import resolve_eval

    eval_dir = tmp_path / "eval"
    shutil.copytree(prepared_dir, eval_dir)
    report = json.loads((eval_dir / "report.json").read_text())
    report["verify"]["ok"] = True
    report["verify"]["full"] = False  # a sample's result, edited in by hand
    (eval_dir / "report.json").write_text(json.dumps(report))
    recipe = SimpleNamespace(data=SimpleNamespace(
        eval=SimpleNamespace(eval_fraction=None, prepared=str(eval_dir), prepare=None), allow_unverified=False))
    with pytest.raises(PreflightError, match="refusing to train: .*eval/report.json: report.json was changed"):
        resolve_eval(recipe, None, prepared_dir, tmp_path / "run")
