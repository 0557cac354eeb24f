"""A folder broken in ways verify must report rather than crash on: a data file empty or cut short, a
sealed report.json holding a value of the wrong type; and ``--num-proc`` held to what can run."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from beam_sft.errors import VerificationError
from beam_sft.verify.api import pool_procs, verify_prepared
from beam_sft.verify.cli import _num_proc
from tests.verify.test_cli import run

DATA_FILE = "data-00000-of-00001.arrow"


def copy_of(clean_dir, tmp_path):
    directory = tmp_path / "copy"
    shutil.copytree(clean_dir, directory)
    return directory


def resealed(directory, change) -> None:
    """report.json after ``change(report)``, sealed and digested again: written by other code, not edited."""
    from beam_sft.dataset_folder.integrity import file_digests
    from beam_sft.dataset_folder.report_json import dump_json, seal

    report = json.loads((directory / "report.json").read_text())
    change(report)
    report["files"] = file_digests(directory)
    (directory / "report.json").write_text(dump_json(seal(report)))


# --- --num-proc ----------------------------------------------------------------------------------------


def test_num_proc_is_held_to_the_cores(clean_dir):
    assert _num_proc(99_999, clean_dir) == len(os.sched_getaffinity(0))
    assert _num_proc(1, clean_dir) == 1


def test_no_more_workers_than_rows(clean_dir):
    assert pool_procs(99_999, 6, min_rows=0) == 6
    result = verify_prepared(clean_dir, num_proc=16, write=False)  # 6 rows
    assert result.ok and result.stats["timing"]["num_proc"] == 6


# --- a data file empty or cut short ------------------------------------------------------------------


def _empty(path):
    path.write_bytes(b"")


def _cut_in_a_body(path):
    os.truncate(path, path.stat().st_size - 300)


def _cut_in_half(path):
    os.truncate(path, path.stat().st_size // 2)


@pytest.mark.parametrize("damage", [_empty, _cut_in_a_body, _cut_in_half])
@pytest.mark.parametrize("command", [["verify"], ["verify", "--num-proc", "1"], ["verify", "--num-proc", "2"],
                                     ["inspect", "--row", "0"], ["report", "-o", "PAGE"]])
def test_a_damaged_data_file_is_named_in_one_line(clean_dir, tmp_path, damage, command):
    directory = copy_of(clean_dir, tmp_path)
    damage(directory / DATA_FILE)
    argv = [command[0], str(directory)] + [str(tmp_path / "page.html") if a == "PAGE" else a for a in command[1:]]
    with pytest.raises(VerificationError) as caught:
        run(argv)
    message = str(caught.value)
    assert DATA_FILE in message and "\n" not in message
    if command[0] == "verify":  # the digest says what happened to it
        assert "[file_digest]" in message


# --- report.json values of the wrong type ------------------------------------------------------------


@pytest.mark.parametrize("seed", [{}, "x", None, [], True])
def test_a_mix_seed_of_the_wrong_type_is_a_report_count(clean_dir, tmp_path, seed):
    directory = copy_of(clean_dir, tmp_path)
    resealed(directory, lambda report: report["mix"].update(seed=seed))
    result = verify_prepared(directory, write=False)
    assert not result.ok
    assert any(v.rule == "report_count" and "mix.seed is" in v.message and "not an integer" in v.message
               for v in result.violations)


@pytest.mark.parametrize("key, value", [("teacher_refused", 1.5), ("turns", 5), ("turns", ["data"]),
                                        ("turns", {"data": "x"}), ("judge_verdicts", "ok")])
def test_a_reasoning_count_of_the_wrong_type(clean_dir, tmp_path, capsys, key, value):
    directory = copy_of(clean_dir, tmp_path)
    resealed(directory, lambda report: report.setdefault("reasoning", {}).update({key: value}))
    assert run(["inspect", str(directory), "--row", "0", "--no-color"]) == 1
    out, err = capsys.readouterr()
    assert "[user]" in out  # the row is shown all the same
    assert err.count("\n") == 1 and f"reasoning.{key} is" in err and "report.json" in err
    result = verify_prepared(directory, write=False)
    assert [v.message for v in result.violations if v.rule == "report_count"] == [
        f"report.json reasoning.{key} is {json.dumps(value)}, not counts by name"]


def test_reasoning_counts_still_shown(clean_dir, tmp_path, capsys):
    directory = copy_of(clean_dir, tmp_path)
    resealed(directory, lambda report: report.update(reasoning={"turns": {"teacher": 2, "data": 1},
                                                                "teacher_refused": {"teacher_empty": 1}}))
    assert run(["inspect", str(directory), "--row", "0", "--no-color"]) == 0
    assert ("dataset reasoning of trained turns: teacher 2, data 1; teacher refused: teacher_empty 1"
            in capsys.readouterr().out)
    assert verify_prepared(directory, write=False).ok


# --- --sample N of at least the rows ----------------------------------------------------------------


def test_a_sample_of_every_row_is_a_full_run(clean_dir, tmp_path):
    """(Kept on purpose: a sample that covers every row checks what a full run checks; the README says so.)"""
    directory = copy_of(clean_dir, tmp_path)
    result = verify_prepared(directory, sample=100, histogram=False)
    assert result.ok and result.stats["full"] and result.stats["sample"] is None
    recorded = json.loads((directory / "report.json").read_text())
    assert recorded["verify"]["ok"] and recorded["verify"]["full"] and "verify_sample" not in recorded


def test_a_partial_runs_recorded_failure_is_not_called_a_full_ones(clean_dir, tmp_path, capsys):
    directory = copy_of(clean_dir, tmp_path)
    assert run(["verify", str(directory), "--max-length", "5"]) == 1  # partial (another max_length), fails
    capsys.readouterr()
    assert run(["verify", str(directory), "--sample", "2"]) == 1
    err = capsys.readouterr().err
    assert "its recorded verification (a partial run's" in err and "full verification FAILED" not in err


def test_a_path_that_is_no_folder_is_said_as_such(tmp_path):
    """A mistyped path read `report.json is missing ... (prepare it again) (and so: ... no state.json
    and dataset_info.json there)`: the one line now says there is no such folder."""
    with pytest.raises(VerificationError, match=r"nope: no such folder$"):
        verify_prepared(tmp_path / "nope")
    (tmp_path / "rows.jsonl").write_text("{}\n")
    with pytest.raises(VerificationError, match=r"rows\.jsonl: not a folder"):
        verify_prepared(tmp_path / "rows.jsonl")
