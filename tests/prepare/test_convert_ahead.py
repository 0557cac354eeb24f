"""``convert_ahead``: records converted by ``head_start``'s child while the tokenizer loads give the
run exactly what converting them in the workers gives; anything the child got wrong (a forbidden
token it did not predict, a batch it did not convert, a blob in the wrong place, a child that
failed) is converted as always; the child and its file never outlive the run."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path

import pytest

from beam_sft.convert.validate import forbidden_tokens
from beam_sft.data.synthetic import synthetic_rows
from beam_sft.dataset_folder.tokenizer import load_tokenizer
from beam_sft.prepare import PrepareConfig, SourceSpec, head_start, prepare
from beam_sft.prepare import convert_ahead as ahead_mod
from beam_sft.prepare.convert_ahead import Ahead, Entry, batch_digest, predicted_forbidden
from beam_sft.prepare.head_start import HeadStart
from beam_sft.prepare.resolved import ahead_plan

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform: prepare forks no child")

SAMPLES = Path(__file__).resolve().parents[2] / "beam_sft" / "data" / "samples"


@pytest.fixture(autouse=True)
def _single_threaded():
    """A child is forked only while no other thread runs: stop tqdm's monitor thread an earlier bar left."""
    import threading

    from tqdm._monitor import TMonitor

    for thread in threading.enumerate():
        if isinstance(thread, TMonitor):
            thread.exit()
    if threading.active_count() > 1:
        pytest.skip("other threads run in this test process: prepare would fork no child")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: prepare converts nothing ahead")


@pytest.fixture(scope="module")
def rows_file(tmp_path_factory, fixture_dir) -> Path:
    """Synthetic rows with a few broken ones (bad JSON, a special token in the text, a row with
    no assistant turn); ``_sources`` weights them so that the mix copies rows."""
    rows = [json.dumps(r, ensure_ascii=False) for r in synthetic_rows(300, seed=3, scale=0.3)]
    special = sorted(forbidden_tokens(load_tokenizer(fixture_dir)))[0]
    rows[140] = "{not json"
    rows[141] = json.dumps({"messages": [{"role": "user", "content": f"say {special}"},
                                         {"role": "assistant", "reasoning_content": "ok", "content": "no"}]})
    rows[250] = json.dumps({"messages": [{"role": "user", "content": "only a question"}]})
    data = tmp_path_factory.mktemp("ahead") / "rows.jsonl"
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return data


def _sources(data: Path) -> list[SourceSpec]:
    """The rows, weighted, and a ShareGPT sample read as ``--format auto``."""
    return [SourceSpec(path=str(data), format="openai", weight=1.5),
            SourceSpec(path=str(SAMPLES / "chat_sharegpt.json"), format="auto")]


def _run(data: Path, fixture_dir: Path, out: Path, **extra) -> Path:
    config = PrepareConfig(sources=_sources(data), tokenizer=str(fixture_dir), output=str(out), num_proc=1,
                           cache=False, batch_size=50, seed=7, **extra)
    return Path(prepare(config))


@pytest.fixture(scope="module")
def plain(rows_file, fixture_dir, tmp_path_factory) -> Path:
    """The same run with no child converting ahead: what every run here must equal."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr("beam_sft.prepare.pipeline.ahead_plan", lambda config, head: None)
        return _run(rows_file, fixture_dir, tmp_path_factory.mktemp("plain") / "out")


def _dataset(folder: Path):
    import pyarrow as pa

    tables = [pa.ipc.open_stream(open(f, "rb")).read_all() for f in sorted(folder.glob("data-*.arrow"))]
    return pa.concat_tables(tables)


def _counts(folder: Path) -> dict:
    report = json.loads((folder / "report.json").read_text())
    return {key: report[key] for key in ("sources", "tokens", "reasoning") if key in report}


@pytest.fixture
def takes(monkeypatch):
    """The batches the encode pass took from the child (``num_proc=1``: it runs in this process), and
    the child left to convert every batch (no stop), so that what it converts does not depend on timing."""
    taken: list[int] = []
    real = Ahead.take

    def counting(self, index, columns):
        items = real(self, index, columns)
        if items is not None:
            taken.append(index)
        return items

    monkeypatch.setattr(Ahead, "take", counting)
    monkeypatch.setattr(HeadStart, "stop_ahead", lambda self: None)
    return taken


def _same_as(folder: Path, plain: Path) -> None:
    assert _dataset(folder).equals(_dataset(plain))
    assert (folder / "rejects.jsonl").read_bytes() == (plain / "rejects.jsonl").read_bytes()
    assert _counts(folder) == _counts(plain)


def test_the_batches_converted_ahead_give_the_same_dataset(tmp_path, rows_file, plain, fixture_dir, monkeypatch, takes):
    folder = _run(rows_file, fixture_dir, tmp_path / "ahead")
    # 300 + the sample's records in batches of 50: every batch past the probe's 128 records was taken,
    # the one that straddles it (records 100..149) from its 29th record on
    assert takes and takes[0] == 2 and takes == list(range(2, 2 + len(takes)))
    rejected = [json.loads(line) for line in (folder / "rejects.jsonl").read_text().splitlines()]
    assert len(rejected) >= 3  # the broken rows are in the batches the child converted
    _same_as(folder, plain)


def test_a_wrong_prediction_is_not_used(tmp_path, rows_file, plain, fixture_dir, monkeypatch, takes):
    monkeypatch.setattr(ahead_mod, "predicted_forbidden", lambda directory: ("<|not-a-token|>",))
    folder = _run(rows_file, fixture_dir, tmp_path / "mispredicted")
    assert takes == []
    _same_as(folder, plain)


def test_a_child_that_fails_to_convert_leaves_it_to_the_workers(tmp_path, rows_file, plain, fixture_dir, monkeypatch, takes):
    def broken(plan, fd, stop_fd):
        raise RuntimeError("the child failed")

    monkeypatch.setattr(head_start, "convert_ahead", broken)
    folder = _run(rows_file, fixture_dir, tmp_path / "failed")
    assert takes == []
    _same_as(folder, plain)


def test_the_child_and_its_file_do_not_outlive_the_run(tmp_path, rows_file, fixture_dir):
    before = set(os.listdir("/proc/self/fd"))
    _run(rows_file, fixture_dir, tmp_path / "out")
    assert set(os.listdir("/proc/self/fd")) <= before  # the converted batches' file is closed (and unlinked)
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # no child of ours left, running or unreaped


def test_no_ahead_where_the_child_cannot_know_the_options(tmp_path, rows_file, fixture_dir):
    sources = _sources(rows_file)
    base = PrepareConfig(sources=sources, tokenizer=str(fixture_dir))
    assert ahead_plan(base, 128) is not None
    from beam_sft.reason.config import TeacherConfig

    for config in (dataclasses.replace(base, tokenizer="some-org/some-tokenizer"),  # a hub id
                   dataclasses.replace(base, num_shards=2),
                   dataclasses.replace(base, sources=[SourceSpec(path="some-org/some-dataset")]),
                   dataclasses.replace(base, sources=[SourceSpec(path=str(tmp_path / "absent.jsonl"))]),
                   dataclasses.replace(base, reasoning=TeacherConfig(model="m", base_url="http://127.0.0.1:9"))):
        assert ahead_plan(config, 128) is None


# --- the parts ------------------------------------------------------------------------------------


def _forbidden(directory: Path) -> tuple[str, ...]:
    return tuple(sorted(forbidden_tokens(load_tokenizer(directory))))


def test_the_prediction_is_the_loaded_tokenizers(fixture_dir, tmp_path):
    assert predicted_forbidden(fixture_dir) == _forbidden(fixture_dir)
    # and with tokens added both ways transformers keeps them (added, and special)
    tokenizer = load_tokenizer(fixture_dir)
    tokenizer.add_tokens(["<|added-one|>", "   "])
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|special-one|>"]})
    tokenizer.save_pretrained(tmp_path / "more")
    assert {"<|added-one|>", "<|special-one|>"} <= set(predicted_forbidden(tmp_path / "more"))
    assert predicted_forbidden(tmp_path / "more") == _forbidden(tmp_path / "more")


def test_the_prediction_for_gpt_oss(tmp_path):
    from beam_sft.harmony.gptoss_tokenizer import DEFAULT_DIR

    if not Path(DEFAULT_DIR).is_dir():
        pytest.skip(f"the gpt-oss tokenizer is not installed at {DEFAULT_DIR} (make realistic-tokenizer)")
    assert predicted_forbidden(DEFAULT_DIR) == _forbidden(Path(DEFAULT_DIR))


def _ahead_of(batches: dict[int, tuple[tuple[list, ...], list]]) -> Ahead:
    import pickle

    scratch = tempfile.TemporaryFile()
    ahead, offset = Ahead(("job",), 0, fd=os.dup(scratch.fileno())), 0
    scratch.close()
    for index, (columns, items) in batches.items():
        blob = pickle.dumps((batch_digest(columns), items))
        os.pwrite(ahead.fd, blob, offset)
        ahead.entries[index] = Entry(offset, len(blob), batch_digest(columns))
        offset += len(blob)
    return ahead


def test_take_gives_only_what_was_converted_from_these_columns():
    one = (["a", "b"], [1, 2])
    two = (["c", "d"], [3, 4])
    ahead = _ahead_of({0: (one, ["A", "B"]), 1: (two, ["C", "D"])})
    try:
        assert ahead.take(0, one) == ["A", "B"] and ahead.take(1, two) == ["C", "D"]
        assert ahead.take(0, two) is None  # other records (a file changed between the two reads)
        assert ahead.take(2, one) is None and ahead.take(None, one) is None  # not converted
        # a blob in the wrong place (an index that points at another batch's bytes) is refused
        ahead.entries[0] = dataclasses.replace(ahead.entries[1], digest=ahead.entries[0].digest)
        assert ahead.take(0, one) is None
    finally:
        ahead.close()
    assert ahead.take(1, two) is None  # closed: convert as always


def test_usable_only_for_the_same_jobs_and_seed():
    ahead = Ahead(("a", "b"), 7, {0: Entry(0, 1, b"")})
    assert ahead.usable(("a", "b", "c"), 7)  # the child stopped before the third source
    assert not ahead.usable(("a", "x", "c"), 7)
    assert not ahead.usable(("a", "b"), 8)
    assert not Ahead(("a",), 7).usable(("a",), 7)  # nothing converted


def test_a_full_temporary_folder_keeps_what_was_written(tmp_path, rows_file, plain, fixture_dir, monkeypatch, takes):
    real = ahead_mod._pwrite_all
    written: list[int] = []

    def filling(fd, data, offset):
        if written:
            raise OSError(28, "No space left on device")
        written.append(offset)
        real(fd, data, offset)

    monkeypatch.setattr(ahead_mod, "_pwrite_all", filling)  # (inherited by the forked child)
    folder = _run(rows_file, fixture_dir, tmp_path / "full")
    assert takes == [2]  # the one batch written; the workers converted the rest
    _same_as(folder, plain)


def test_what_the_childs_conversion_says_stays_off_the_terminal(tmp_path, rows_file, fixture_dir, monkeypatch, takes, capfd):
    import logging
    import sys

    real = ahead_mod.convert_records

    def talking(columns, job):
        print("CHILD-OUT", flush=True)
        print("CHILD-ERR", file=sys.stderr, flush=True)
        logging.getLogger("beam_sft.convert").warning("CHILD-LOG")
        return real(columns, job)

    monkeypatch.setattr(ahead_mod, "convert_records", talking)  # the child's reference only
    _run(rows_file, fixture_dir, tmp_path / "quiet")
    assert takes  # the child did convert
    out, err = capfd.readouterr()
    assert "CHILD-" not in out + err


def test_a_stop_inside_a_batch_drops_that_batch(tmp_path, rows_file, plain, fixture_dir, monkeypatch, takes):
    """The child looks at the stop pipe every STOP_EVERY records: stopped inside a batch it drops
    that batch (the parent does not wait for the rest of it) and keeps the ones before."""
    looks = iter(range(1000))
    # batch 2: the look before it and 4 inside (at records 10, 20, 30, 40); batch 3: the look
    # before it, then stop at its first look inside
    monkeypatch.setattr(ahead_mod, "STOP_EVERY", 10)
    monkeypatch.setattr(ahead_mod, "_stopped", lambda stop_fd: next(looks) >= 6)
    folder = _run(rows_file, fixture_dir, tmp_path / "stopped")
    assert takes == [2]
    _same_as(folder, plain)


def test_a_child_that_does_not_answer_is_not_waited_for(rows_file, fixture_dir, monkeypatch):
    import time

    def deaf(plan, fd, stop_fd):
        time.sleep(60)

    monkeypatch.setattr(head_start, "convert_ahead", deaf)
    config = PrepareConfig(sources=_sources(rows_file), tokenizer=str(fixture_dir))
    child = HeadStart.fork(config.sources, ahead_plan(config, 128))
    assert child.result().code  # the digests came first
    started = time.monotonic()
    assert child.take_ahead(timeout=0.5) is None and time.monotonic() - started < 5
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # killed and reaped


def test_no_temporary_folder_is_no_reason_to_fail(tmp_path, rows_file, plain, fixture_dir, monkeypatch, takes):
    def unwritable(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path / "tmp"))

    monkeypatch.setattr(tempfile, "TemporaryFile", unwritable)  # (head_start's tempfile: the same module)
    folder = _run(rows_file, fixture_dir, tmp_path / "no-tmp")
    assert takes == []
    _same_as(folder, plain)
