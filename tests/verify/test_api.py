"""verify_prepared: whole-directory behaviour, sampling, parallel workers, unusable directories."""

from __future__ import annotations

import shutil

import pytest

from beam_sft.errors import VerificationError
from beam_sft.verify import RULE_CODES, verify_prepared
from beam_sft.verify.api import select_positions
from tests.verify.test_invariants import swap_two_rows_ids, train_tool_result


def test_clean_dataset_passes(clean_dir, tmp_path):
    directory = tmp_path / "copy"
    shutil.copytree(clean_dir, directory)
    result = verify_prepared(directory)
    assert result.ok and result.violations == []
    assert result.stats["rows_checked"] == 6 and result.stats["parser"] != "unavailable"
    assert (directory / "verify_violations.jsonl").read_text() == ""


def test_sample_checks_a_reproducible_subset(make_prepared, tokenizer):
    directory = make_prepared(mutate=lambda records: train_tool_result(records, tokenizer))
    first = verify_prepared(directory, sample=3, seed=1, write=False)
    again = verify_prepared(directory, sample=3, seed=1, write=False)
    assert first.stats["rows_checked"] == 3 and first.stats["sample"] == 3 and first.stats["rows"] == 6
    assert first.violations == again.violations
    checked = select_positions(6, 3, seed=1)
    assert first.ok == (1 not in checked)


def test_parallel_workers_find_the_same_violations(make_prepared, tokenizer):
    def mutate(records):
        train_tool_result(records, tokenizer)
        swap_two_rows_ids(records, tokenizer)

    directory = make_prepared(mutate=mutate)
    serial = verify_prepared(directory, write=False)
    parallel = verify_prepared(directory, num_proc=2, write=False)
    assert not serial.ok
    assert parallel.violations == serial.violations
    untimed = {k: v for k, v in serial.stats.items() if k != "timing"}
    assert {k: v for k, v in parallel.stats.items() if k != "timing"} == untimed
    assert {v.rule for v in serial.violations} <= set(RULE_CODES)


def test_missing_tokenizer_is_an_error(make_prepared):
    directory = make_prepared()
    shutil.rmtree(directory / "tokenizer")
    with pytest.raises(VerificationError, match="no tokenizer"):
        verify_prepared(directory)


def test_not_a_dataset_is_an_error(tmp_path):
    with pytest.raises(VerificationError, match="not a prepared dataset"):
        verify_prepared(tmp_path)


def test_missing_columns_is_an_error(make_prepared, tmp_path):
    from datasets import load_from_disk

    directory = make_prepared()
    stripped = tmp_path / "stripped"
    load_from_disk(str(directory)).remove_columns(["row"]).save_to_disk(str(stripped))
    with pytest.raises(VerificationError, match=r"lacks columns \['row'\]"):
        verify_prepared(stripped)


def test_a_worker_starting_after_its_folder_went_leaves_quietly(clean_dir, tmp_path):
    """A pool worker that starts while an interrupted prepare removes its staging folder exits 0
    without a traceback (tests/prepare/test_fault_injection.py, verify-workers-running); a folder
    that is there but unreadable still raises."""
    import gc

    from beam_sft.verify import api

    enabled = gc.isenabled()
    try:
        with pytest.raises(SystemExit) as info:
            api._init_worker(str(tmp_path / "gone"), None, frozenset())
        assert info.value.code == 0
        broken = tmp_path / "broken"
        shutil.copytree(clean_dir, broken)
        next(broken.glob("data-*.arrow")).unlink()
        with pytest.raises(Exception) as info:
            api._init_worker(str(broken), None, frozenset())
        assert not isinstance(info.value, SystemExit)
    finally:
        api._WORKER.clear()
        gc.unfreeze()
        if enabled:
            gc.enable()


def test_sample_must_be_positive():
    with pytest.raises(VerificationError):
        select_positions(10, 0)


def test_violations_beyond_the_kept_ones_still_reach_the_file(make_prepared, monkeypatch):
    from beam_sft.verify import api

    def untrain_all(records):
        for r in records:
            r["assistant_masks"] = [0] * len(r["assistant_masks"])
            r["num_trained"] = 0

    monkeypatch.setattr(api, "MAX_KEPT_VIOLATIONS", 2)
    directory = make_prepared(mutate=untrain_all)
    result = verify_prepared(directory, histogram=False)
    lines = (directory / "verify_violations.jsonl").read_text().splitlines()
    assert len(result.violations) == 2 and len(lines) == result.stats["violations"]["total"] == 12
    assert result.stats["violations"]["rows"] == 6 and not result.ok


def test_empty_dataset_is_an_error(make_prepared):
    directory = make_prepared(mutate=lambda records: records.clear())
    with pytest.raises(VerificationError, match="has no rows"):
        verify_prepared(directory)


def test_a_staging_folder_verifies_in_place(clean_dir, tmp_path):
    # prepare verifies in staging before it publishes: nothing may depend on the folder's name.
    staging = tmp_path / ".prepared.staging-12345"
    shutil.copytree(clean_dir, staging)
    result = verify_prepared(staging)
    assert result.ok and (staging / "verify_violations.jsonl").is_file()
    assert not (tmp_path / "prepared").exists()


def test_rows_are_read_without_memory_maps(make_prepared):
    # Every page of a mapping a process has read stays in its resident set while the mapping lives:
    # the checks read rows with plain reads, and no data file stays mapped (RSS flat in rows).
    from datasets import load_from_disk

    from beam_sft.verify import api

    directory = make_prepared()
    rows = api._Rows(directory)
    n = rows.reader.num_rows
    chunks = (range(0, n), range(1, n - 1), range(n - 1, n), [n - 1, 0, 2], [])
    got = [rows.table(chunk) for chunk in chunks]
    with open("/proc/self/maps", encoding="utf-8") as fh:
        mapped = fh.read()
    files = list(directory.glob("data-*.arrow"))
    assert files and not any(str(path.resolve()) in mapped for path in files)
    expected = load_from_disk(str(directory)).with_format("arrow")
    assert n == len(expected) > 3
    for chunk, table in zip(chunks, got, strict=True):
        want = expected[chunk.start:chunk.stop] if isinstance(chunk, range) else expected[list(chunk)]
        assert table.column_names == [c for c in api.COLUMNS if c in expected.column_names]
        assert table.to_pylist() == want.select(table.column_names).to_pylist()

@pytest.mark.parametrize("num_proc", [1, 2])
def test_the_callers_collector_is_left_as_it_was(clean_dir, num_proc):
    """Rows are checked with automatic collection off and the heap frozen (api._collect_per_chunk);
    the caller gets its collector back as it was: on or off, and its own frozen objects frozen."""
    import gc

    enabled = gc.isenabled()
    try:
        for state in (True, False):
            (gc.enable if state else gc.disable)()
            assert verify_prepared(clean_dir, num_proc=num_proc, write=False).ok
            assert gc.isenabled() is state and gc.get_freeze_count() == 0
        held = [[]]  # something of the caller's, frozen by the caller (then out of gc.get_objects())
        gc.freeze()
        assert not any(o is held for o in gc.get_objects())
        assert verify_prepared(clean_dir, num_proc=num_proc, write=False).ok
        assert gc.get_freeze_count() and not any(o is held for o in gc.get_objects())
    finally:
        gc.unfreeze()
        (gc.enable if enabled else gc.disable)()
