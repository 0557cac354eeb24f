"""Tampered, truncated and changed files, and the run record, on folders `prepare` really wrote, through the commands people run.

- 4: a sampled (or otherwise partial) verify never records a pass: it cannot clear a failed folder,
  and train needs a full verification of exactly the folder's files; a folder prepare kept aside
  after a failed verification is refused wherever train is pointed at it.
- 7: a count of report.json lowered by one is caught by verify, train and merge-shards, even when
  whoever lowered it sealed the report again.
- 8: verify names the file when state.json, a tokenizer file or report.json changed or went.
- 15: numeric flags are checked (one line, exit 2); beam_run.json names the data by digest.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from beam_sft.cli import main
from beam_sft.dataset_folder import read_report, write_report
from beam_sft.errors import PreflightError, PreparedError, VerificationError
from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
from beam_sft.prepare.pipeline import failed_dir
from beam_sft.train.data import check_trainable
from beam_sft.verify.api import select_positions
from tests.encode.conftest import simple_row, write_jsonl

ROWS = 10


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, fixture_dir) -> tuple[Path, PrepareConfig]:
    root = tmp_path_factory.mktemp("guarantees")
    rows = [simple_row(i) for i in range(ROWS)] + [{"messages": [{"role": "user", "content": "no answer"}]}]
    config = PrepareConfig(sources=[SourceSpec(path=str(write_jsonl(root / "rows.jsonl", rows)))],
                           tokenizer=str(fixture_dir), output=str(root / "out"), num_proc=1, encoder="template")
    return Path(prepare(config)), config


def _copy(prepared, tmp_path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(prepared[0], target)
    return target


def _verify(capsys, *args) -> tuple[int, str, str]:
    code = main(["verify", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def _violation_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("dataset [")]


# --- class 4: a partial run never records a pass -----------------------------------------------------------


@pytest.fixture(scope="module")
def failed(tmp_path_factory, fixture_dir) -> Path:
    """A folder prepare kept aside: one row (of ROWS) has a prompt token in the loss."""
    from beam_sft.encode import template_encode

    root = tmp_path_factory.mktemp("failed")
    data = write_jsonl(root / "rows.jsonl", [simple_row(i) for i in range(ROWS)])
    config = PrepareConfig(sources=[SourceSpec(path=str(data))], tokenizer=str(fixture_dir),
                           output=str(root / "out"), num_proc=1, encoder="template")
    real, calls = template_encode.apply_weights, [0]

    def buggy(mask, runs, weights):
        out = np.array(real(mask, runs, weights), copy=True)
        calls[0] += 1
        if calls[0] == 4:  # one row only, so that a sample can miss it
            out[0] = 1
        return out

    template_encode.apply_weights = buggy
    try:
        with pytest.raises(VerificationError):
            prepare(config)
    finally:
        template_encode.apply_weights = real
    return failed_dir(root / "out")


def _seed_missing(directory: Path, sample: int) -> int:
    bad = {json.loads(line)["row"] for line in (directory / "verify_violations.jsonl").read_text().splitlines()}
    assert len(bad) == 1
    return next(s for s in range(100) if not bad & set(select_positions(ROWS, sample, s)))


def test_a_sample_that_misses_the_bad_row_cannot_clear_a_failed_folder(failed, tmp_path, capsys):
    folder = tmp_path / "failed"
    shutil.copytree(failed, folder)
    before = read_report(folder)
    assert before["verify"]["ok"] is False and before["verify"]["full"] is True and before["kept_aside"]
    violations = (folder / "verify_violations.jsonl").read_bytes()
    seed = _seed_missing(folder, 5)
    code, out, err = _verify(capsys, folder, "--sample", 5, "--seed", seed)
    assert code == 1 and "violations 0" in out and "partial run (5 of 10 rows" in out
    assert "its recorded full verification FAILED; a partial run cannot clear it" in err
    after = read_report(folder)
    assert after["verify"] == before["verify"]  # the failure stands
    assert after["verify_sample"]["ok"] is True and after["verify_sample"]["full"] is False
    assert after["verify_sample"]["sample"] == 5 and after["verify_sample"]["rows_checked"] == 5
    assert (folder / "verify_violations.jsonl").read_bytes() == violations  # the full run's findings kept
    with pytest.raises(PreflightError, match="kept aside by prepare after failing verification"):
        check_trainable(folder)  # pointed at directly, under any name
    code, _, _ = _verify(capsys, folder)  # a full run finds the row again
    assert code == 1 and read_report(folder)["verify"]["ok"] is False


def test_a_folder_with_only_a_partial_verification_is_not_trained(prepared, tmp_path, capsys):
    _, config = prepared
    out = Path(prepare(dataclasses.replace(config, output=str(tmp_path / "unverified"), verify=False)))
    with pytest.raises(PreflightError, match="never verified"):
        check_trainable(out)
    for partial in (["--sample", 3], ["--max-length", 100000], ["--parity-sample", 0]):
        code, text, _ = _verify(capsys, out, *partial)
        assert code == 0 and "partial run" in text and "train refuses it" in text
        report = read_report(out)
        assert "verify" not in report and report["verify_sample"]["full"] is False
        with pytest.raises(PreflightError, match="never verified"):
            check_trainable(out)
    code, text, _ = _verify(capsys, out)  # every row, the recorded max_length: a pass that counts
    assert code == 0 and "partial run" not in text
    section = read_report(out)["verify"]
    assert section["full"] is True and section["sample"] is None
    assert set(section["verified_files"]) == set(read_report(out)["files"]["files"])
    check_trainable(out)


def test_a_clean_sample_leaves_a_full_pass_as_it_was(prepared, tmp_path, capsys):
    folder = _copy(prepared, tmp_path)
    before = read_report(folder)["verify"]
    code, text, _ = _verify(capsys, folder, "--sample", 2)
    assert code == 0 and "full verification recorded before still stands" in text
    assert read_report(folder)["verify"] == before
    check_trainable(folder)


@pytest.mark.parametrize("edit", ["sample", "not full", "other files", "other max_length", "other report"])
def test_train_needs_a_full_verification_of_these_files(prepared, tmp_path, edit):
    folder = _copy(prepared, tmp_path)
    report = read_report(folder)
    section = report["verify"]
    if edit == "sample":
        section["sample"] = 3
    elif edit == "not full":
        section["full"] = False
    elif edit == "other files":
        section["verified_files"]["state.json"] = "0" * 64
    elif edit == "other max_length":
        section["max_length"] = 99999
    else:  # a figure changed after the verification ran
        report["tokens"]["trained"] += 1
    write_report(folder, report)  # sealed again: only the verification itself is wrong
    with pytest.raises(PreflightError, match="refusing to train: .*(sample|other files|max_length|changed since)"):
        check_trainable(folder)


# --- class 7: forged counts -------------------------------------------------------------------------------


def _lower_kept(folder: Path, *, reseal: bool) -> None:
    report = read_report(folder)
    entry = next(iter(report["sources"].values()))
    entry["kept"] -= 1
    if reseal:
        write_report(folder, report)
    else:
        (folder / "report.json").write_text(json.dumps(report))


@pytest.mark.parametrize("reseal", [False, True], ids=["edited", "edited-and-sealed-again"])
def test_a_lowered_kept_count_is_caught(prepared, tmp_path, capsys, reseal):
    folder = _copy(prepared, tmp_path)
    _lower_kept(folder, reseal=reseal)
    code, _, err = _verify(capsys, folder)
    lines = _violation_lines(err)
    assert code == 1 and any("[report_count]" in line and f"read {ROWS + 1} != kept {ROWS - 1} + rejected 1" in line
                             for line in lines), err
    assert any("[report_seal]" in line for line in lines) is not reseal
    with pytest.raises(PreflightError, match="refusing to train"):
        check_trainable(folder)


def test_merge_shards_checks_the_shards_counts(tmp_path, fixture_dir):
    from beam_sft.prepare.shards import merge_shards

    data = write_jsonl(tmp_path / "rows.jsonl", [simple_row(i) for i in range(9)])
    base = PrepareConfig(sources=[SourceSpec(path=str(data))], tokenizer=str(fixture_dir), num_proc=1,
                         num_shards=2, verify=False)
    shards = [Path(prepare(dataclasses.replace(base, shard_index=i, output=str(tmp_path / f"s{i}")))) for i in (0, 1)]
    _lower_kept(shards[1], reseal=True)
    with pytest.raises(PreparedError, match=r"s1/report.json: sources\[.*\]: read 5 != kept 4 \+ rejected 0"):
        merge_shards(shards, tmp_path / "merged", verify=False)
    assert not (tmp_path / "merged").exists()
    _lower_kept(shards[0], reseal=False)
    with pytest.raises(PreparedError, match="s0/report.json: report.json was changed after beam-sft wrote it"):
        merge_shards(shards, tmp_path / "merged", verify=False)


# --- class 8: verify names the changed file ---------------------------------------------------------------


def _edit_json(path: Path, key: str, value) -> None:
    data = json.loads(path.read_text())
    data[key] = value
    path.write_text(json.dumps(data))


CHANGES = {
    "state.json": lambda d: _edit_json(d / "state.json", "_fingerprint", "0123456789abcdef"),
    "tokenizer/tokenizer_config.json": lambda d: _edit_json(d / "tokenizer" / "tokenizer_config.json",
                                                           "model_max_length", 12345),
    "dataset_info.json": lambda d: _edit_json(d / "dataset_info.json", "description", "edited"),
    "rejects.jsonl": lambda d: (d / "rejects.jsonl").write_text(""),
}


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_verify_names_the_changed_file(prepared, tmp_path, capsys, name):
    folder = _copy(prepared, tmp_path)
    CHANGES[name](folder)
    code, out, err = _verify(capsys, folder)
    assert code == 1 and "— OK" not in out
    assert any(line.startswith(f"dataset [file_digest]: {name}: ") for line in _violation_lines(err)), err
    assert read_report(folder)["verify"]["ok"] is False  # a failure may be recorded; never a pass
    with pytest.raises(PreflightError, match=f"refusing to train: {folder / name}"):
        check_trainable(folder)


def test_a_deleted_report_is_a_failure_with_a_clear_line(prepared, tmp_path, capsys):
    folder = _copy(prepared, tmp_path)
    (folder / "report.json").unlink()
    code, out, err = _verify(capsys, folder)
    assert code == 1 and "— OK" not in out
    assert "dataset [report_seal]: report.json is missing or not a JSON object" in err
    assert not (folder / "report.json").exists()  # verify does not invent a report
    with pytest.raises(PreflightError, match="report.json: missing"):
        check_trainable(folder)


def test_verify_does_not_seal_an_edited_report(prepared, tmp_path, capsys):
    folder = _copy(prepared, tmp_path)
    _edit_json(folder / "report.json", "fingerprint", "forged")
    edited = (folder / "report.json").read_bytes()
    code, _, err = _verify(capsys, folder)
    assert code == 1 and "[report_seal]" in err
    assert (folder / "report.json").read_bytes() == edited


def test_a_cache_hit_on_a_sampled_failure_is_refused(prepared, tmp_path):
    _, config = prepared
    folder = _copy(prepared, tmp_path)
    report = read_report(folder)
    report["verify"]["full"] = False
    write_report(folder, report)
    with pytest.raises(VerificationError, match="not proven: .*sample"):
        prepare(dataclasses.replace(config, output=str(folder)))


# --- class 15: numeric flags, provenance -------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["verify", "DIR", "--num-proc", "-3"], ["verify", "DIR", "--sample", "0"], ["verify", "DIR", "--sample", "x"],
    ["verify", "DIR", "--max-length", "0"], ["verify", "DIR", "--parity-sample", "-1"],
    ["verify", "DIR", "--max-violations", "-1"], ["verify", "DIR", "--seed", "-1"],
    ["inspect", "DIR", "--row", "-1"], ["merge-shards", "DIR", "-o", "x", "--num-proc", "0"],
    ["prepare", "--data", "x", "--num-proc", "-3"], ["prepare", "--data", "x", "--max-length", "-5"],
    ["prepare", "--data", "x", "--num-shards", "0"], ["prepare", "--data", "x", "--shard-index", "-1"],
    ["prepare", "--data", "x", "--weight", "nan"], ["plan", "--gpus", "0"], ["plan", "--gpu-memory", "nan"],
    ["plan", "--gpu-memory", "-1"], ["plan", "--micro-batch", "0"], ["plan", "--reserve", "inf"],
])
def test_numeric_flags_are_checked_in_one_line(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"beam-sft {argv[0]}: error: argument {argv[-2]}") and "Traceback" not in err


def test_the_run_record_names_the_data_by_digest(prepared, tmp_path):
    import hashlib

    from beam_sft.train.provenance import folder_provenance

    folder = _copy(prepared, tmp_path)
    taken = folder_provenance(folder)
    report = read_report(folder)
    assert taken["report_sha256"] == hashlib.sha256((folder / "report.json").read_bytes()).hexdigest()
    assert taken["report_seal"] == report["integrity"]["report"] and taken["fingerprint"] == report["fingerprint"]
    assert taken["files"] == {rel: e["sha256"] for rel, e in report["files"]["files"].items()}
    assert taken["verified"]["ok"] is True and taken["verified"]["full"] is True
    # the folder replaced by other data: a fresh look names the new data (the trainer keeps what it
    # took at the start: tests/train/test_provenance.py)
    shutil.rmtree(folder)
    shutil.copytree(prepared[0], folder)
    other = read_report(folder)
    other["fingerprint"] = "another run"
    write_report(folder, other)
    now = folder_provenance(folder)
    assert now["path"] == taken["path"] and now["report_sha256"] != taken["report_sha256"]
    assert now["fingerprint"] == "another run"


@pytest.mark.parametrize("name", ["beam_sft.cli_args", "beam_sft.dataset_folder.report_json"])
def test_doctests(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted and not result.failed
