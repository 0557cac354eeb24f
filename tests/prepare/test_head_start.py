"""``head_start``: the digests a forked child works out while the tokenizer loads are the ones the
parent would compute; anything it does not deliver the parent computes itself, errors included;
the child never outlives the run."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from beam_sft.data import fingerprint as fp
from beam_sft.prepare import PrepareConfig, SourceSpec, head_start, prepare
from beam_sft.prepare.head_start import HeadStart, work_out
from beam_sft.prepare.resolved import Head, data_digest, resolve

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform: prepare forks no child")

@pytest.fixture(autouse=True)
def _single_threaded(fixture_dir):
    """A child is forked only while no other thread runs (``HeadStart.fork``): stop tqdm's monitor thread,
    which a progress bar of an earlier test (the fixture's build) leaves behind."""
    import threading

    from tqdm._monitor import TMonitor

    for thread in threading.enumerate():
        if isinstance(thread, TMonitor):  # (tqdm starts a new one with its next bar)
            thread.exit()
    others = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if others:
        pytest.skip(f"other threads run in this test process ({others}): prepare would fork no child")


ROW = {"messages": [{"role": "user", "content": "Hi?"},
                    {"role": "assistant", "reasoning_content": "Greet.", "content": "Hello."}]}


def _sources(tmp_path: Path) -> list[SourceSpec]:
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps(ROW) + "\n", encoding="utf-8")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.jsonl").write_text(json.dumps(ROW) + "\n" + json.dumps(ROW) + "\n", encoding="utf-8")
    return [SourceSpec(path=str(one)), SourceSpec(path=str(folder)), SourceSpec(path="some-org/some-dataset")]


def test_the_child_gives_the_parents_values(tmp_path):
    sources = _sources(tmp_path)
    child = HeadStart.fork(sources)
    found = child.result()
    assert found.code == fp.results_code_digest()
    # a hub dataset's digest names its revision, looked up online: the parent's to compute
    assert found.data == {0: data_digest(sources[0]), 1: data_digest(sources[1])}
    assert child.pid == 0  # reaped


def test_resolve_takes_what_the_head_holds_and_computes_the_rest(tmp_path, tokenizer):
    sources = _sources(tmp_path)[:2]
    config = PrepareConfig(sources=sources)
    plain = resolve(config, tokenizer)
    assert resolve(config, tokenizer, work_out(sources)) == plain
    assert resolve(config, tokenizer, Head()) == plain
    # what resolve reads from the head is the head's (a planted value shows)
    planted = resolve(config, tokenizer, Head(code="planted", data={1: "planted"}))
    assert planted.sources[1].data_digest == "planted" and planted.sources[0].data_digest == plain.sources[0].data_digest
    assert planted.code_digest != plain.code_digest


def _prepare(tmp_path: Path, tokenizer_dir: Path, out: str, **extra) -> Path:
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps(ROW) + "\n", encoding="utf-8")
    config = PrepareConfig(sources=[SourceSpec(path=str(data), format="openai")], tokenizer=str(tokenizer_dir),
                           output=str(tmp_path / out), num_proc=1, cache=False, **extra)
    return Path(prepare(config))


def _fingerprint(folder: Path) -> str:
    return json.loads((folder / "report.json").read_text())["fingerprint"]


def test_a_run_with_the_child_has_the_fingerprint_of_one_without(tmp_path, fixture_dir, monkeypatch):
    forked = []
    real_fork = HeadStart.fork.__func__

    def counting(cls, sources, ahead=None):
        child = real_fork(cls, sources, ahead)
        forked.append(child)
        return child

    monkeypatch.setattr(HeadStart, "fork", classmethod(counting))
    with_child = _fingerprint(_prepare(tmp_path, fixture_dir, "with"))
    assert forked and forked[0] is not None and forked[0].pid == 0
    monkeypatch.setattr(HeadStart, "fork", classmethod(lambda cls, sources, ahead=None: None))
    assert _fingerprint(_prepare(tmp_path, fixture_dir, "without")) == with_child


def test_a_child_that_fails_leaves_the_work_to_the_parent(tmp_path, fixture_dir, monkeypatch):
    def broken(sources):
        raise RuntimeError("the child failed")

    monkeypatch.setattr(head_start, "work_out", broken)
    child = HeadStart.fork(_sources(tmp_path))
    assert child.result() == Head()
    monkeypatch.setattr(HeadStart, "fork", classmethod(lambda cls, sources, ahead=None: None))
    without = _fingerprint(_prepare(tmp_path, fixture_dir, "without"))
    monkeypatch.undo()
    monkeypatch.setattr(head_start, "work_out", broken)
    assert _fingerprint(_prepare(tmp_path, fixture_dir, "failed-child")) == without


def test_a_missing_source_is_the_parents_error_as_before(tmp_path, fixture_dir, monkeypatch):
    config = PrepareConfig(sources=[SourceSpec(path=str(tmp_path / "absent.jsonl"))], tokenizer=str(fixture_dir),
                           output=str(tmp_path / "out"), num_proc=1)
    with pytest.raises(Exception) as with_child:
        prepare(config)
    monkeypatch.setattr(HeadStart, "fork", classmethod(lambda cls, sources, ahead=None: None))
    with pytest.raises(Exception) as without:
        prepare(config)
    assert type(with_child.value) is type(without.value) and str(with_child.value) == str(without.value)


def test_a_killed_child_delivers_nothing(tmp_path, monkeypatch):
    def slow(sources):
        time.sleep(30)
        return Head(code="late")

    monkeypatch.setattr(head_start, "work_out", slow)
    child = HeadStart.fork(_sources(tmp_path))
    os.kill(child.pid, signal.SIGKILL)
    started = time.monotonic()
    assert child.result() == Head() and time.monotonic() - started < 10


def test_an_unread_child_is_ended_and_reaped(tmp_path, monkeypatch):
    """An error or an interrupt before the result is read (the tokenizer fails to load): the child
    goes with the block, killed and reaped, not left running or as a zombie."""
    def slow(sources):
        time.sleep(30)
        return Head()

    monkeypatch.setattr(head_start, "work_out", slow)
    with pytest.raises(RuntimeError), head_start.head_start(_sources(tmp_path)) as child:
        pid = child.pid
        raise RuntimeError("the tokenizer did not load")
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped: no such child of ours


def test_the_child_writes_nothing_to_the_terminal(tmp_path, capfd):
    child = HeadStart.fork(_sources(tmp_path))
    child.result()
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_no_child_while_another_thread_runs(tmp_path):
    """A caller's thread may hold the import lock when the fork happens; the child would wait on it
    for ever. With another thread running the parent does the work itself."""
    import threading

    sources = _sources(tmp_path)
    release = threading.Event()
    thread = threading.Thread(target=release.wait)
    thread.start()
    try:
        assert HeadStart.fork(sources) is None
    finally:
        release.set()
        thread.join()
    child = HeadStart.fork(sources)
    assert child is not None and child.result().code == fp.results_code_digest()
