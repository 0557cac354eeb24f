"""The cost of a run that does not grow with its rows: what prepare does once per run stays once.

A realistic tokenizer takes seconds to load (a 200k vocabulary); each load of it a run does beyond
the first is fixed cost every small job pays in full. These tests count the work, not the seconds
(counts hold on a busy machine; the seconds are ``benchmarks/bench_prepare.py``'s).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def _rows(n: int) -> list[dict]:
    return [{"messages": [{"role": "user", "content": f"Question {i}?"},
                          {"role": "assistant", "reasoning_content": f"Think {i}.", "content": f"Answer {i}."}],
             "chat_template_kwargs": {"reasoning_effort": "low"}} for i in range(n)]


@pytest.fixture()
def small_source(tmp_path) -> Path:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows(10)), encoding="utf-8")
    return path


def _prepare(source: Path, tokenizer_dir: Path, out: Path, **options) -> Path:
    from beam_sft.config_utils import from_dict
    from beam_sft.prepare import PrepareConfig, prepare

    config = from_dict(PrepareConfig, {"sources": [{"path": str(source), "format": "openai"}],
                                       "tokenizer": str(tokenizer_dir), "output": str(out),
                                       "num_proc": options.pop("num_proc", 1), **options})
    return Path(prepare(config))


def _count_tokenizer_loads(monkeypatch) -> list[str]:
    """The paths ``PreTrainedTokenizerFast.from_pretrained`` is called with from now on, in order."""
    from transformers import PreTrainedTokenizerFast

    loads: list[str] = []
    original = PreTrainedTokenizerFast.from_pretrained.__func__

    def counting(cls, name, *args, **kwargs):
        loads.append(str(name))
        return original(cls, name, *args, **kwargs)

    monkeypatch.setattr(PreTrainedTokenizerFast, "from_pretrained", classmethod(counting))
    return loads


def test_a_verified_prepare_loads_the_tokenizer_once(small_source, fixture_dir, tmp_path, monkeypatch):
    """Verify proves the run's tokenizer is the saved one and the report page reuses verify's
    environment: nothing loads DIR/tokenizer again (it was the second load of every run)."""
    loads = _count_tokenizer_loads(monkeypatch)
    out = _prepare(small_source, fixture_dir, tmp_path / "out")
    assert loads == [str(fixture_dir)]
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["verify"]["ok"] and report["verify"]["tokenizer"] == {"from": "caller"}
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "Rows and their masks" in page


def test_beam_sft_verify_loads_the_tokenizer_once_and_redraws_the_page(small_source, fixture_dir, tmp_path,
                                                                        monkeypatch):
    """`beam-sft verify DIR` redraws DIR/report.html with verify's own environment: the folder's
    tokenizer loads once (the page's own load was 1.8 of a 10,000-row verify's 18 s with gpt-oss's)."""
    from beam_sft.cli import main

    out = _prepare(small_source, fixture_dir, tmp_path / "out")
    page = out / "report.html"
    page.write_text("stale", encoding="utf-8")
    loads = _count_tokenizer_loads(monkeypatch)
    assert main(["verify", str(out), "--num-proc", "1", "--no-histogram"]) == 0
    assert loads == [str(out / "tokenizer")]
    assert "Rows and their masks" in page.read_text(encoding="utf-8")  # redrawn, rows included


def test_the_page_drawn_with_verifys_env_is_the_page_drawn_from_the_folder(small_source, fixture_dir, tmp_path):
    from beam_sft.verify import verify_prepared
    from beam_sft.verify.report_html import render_report_page

    out = _prepare(small_source, fixture_dir, tmp_path / "out")
    result = verify_prepared(out, write=False)
    assert result.env is not None
    sampled = result.env.sampled
    assert render_report_page(out, env=result.env) == render_report_page(out)
    assert result.env.sampled == sampled  # drawing rows did not change the caller's env


def test_the_page_reads_its_columns_from_the_arrow_files(small_source, fixture_dir, tmp_path, monkeypatch):
    """The page's per-row columns (lengths, trained, source) come straight from the Arrow files, not
    as whole columns through the dataset's formatting (0.3 s to 1.1 s of CPU at 10,000 rows), and
    hold what the dataset holds."""
    from datasets import Dataset, load_from_disk

    from beam_sft.verify.report_html import _columns, render_report_page

    out = _prepare(small_source, fixture_dir, tmp_path / "out")
    dataset = load_from_disk(str(out))
    want = (list(dataset["num_tokens"]), list(dataset["num_trained"]), list(dataset["source"]))
    getitem = Dataset.__getitem__

    def no_whole_columns(self, key):
        assert not isinstance(key, str), f"a whole column through the dataset: {key}"
        return getitem(self, key)

    monkeypatch.setattr(Dataset, "__getitem__", no_whole_columns)
    assert _columns(out) == want
    assert "Rows and their masks" in render_report_page(out)


@pytest.mark.parametrize("rows, procs", [(10, 1), (256, 2)])
def test_verify_starts_a_pool_only_for_rows_worth_it(tmp_path, fixture_dir, rows, procs, monkeypatch):
    """Two processes asked: 10 rows are checked in this one (a pool's start cost more than they do),
    MIN_POOL_ROWS rows by the pool."""
    from beam_sft.verify import api

    assert api.MIN_POOL_ROWS == 256
    asked: list[int] = []
    original = api._iter_checks
    monkeypatch.setattr(api, "_iter_checks", lambda folder, positions, num_proc, env:
                        asked.append(num_proc) or original(folder, positions, num_proc, env))
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in _rows(rows)), encoding="utf-8")
    out = _prepare(source, fixture_dir, tmp_path / "out", num_proc=2)
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["verify"]["ok"] and report["tokens"]["rows"] == rows
    assert asked == [procs] and report["verify"]["timing"]["num_proc"] == procs


def test_verify_checks_with_the_environment_made_while_encoding(tmp_path, fixture_dir, monkeypatch):
    """Verify's environment (its byte table, its compile of the template) is made once, by the
    parent while its encode workers run, and verify takes it only for its own tokenizer and
    max_length (another max_length: it makes its own)."""
    from beam_sft.dataset_folder.tokenizer import load_tokenizer
    from beam_sft.verify import verify_prepared
    from beam_sft.verify.context import CheckEnv

    made: list = []
    original = CheckEnv.create.__func__

    def counting(cls, tokenizer, **kwargs):
        made.append(kwargs.get("max_length"))
        return original(cls, tokenizer, **kwargs)

    monkeypatch.setattr(CheckEnv, "create", classmethod(counting))
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in _rows(300)), encoding="utf-8")
    out = _prepare(source, fixture_dir, tmp_path / "out", num_proc=2, max_length=4096)
    assert made == [4096]
    assert json.loads((out / "report.json").read_text(encoding="utf-8"))["verify"]["ok"]
    tokenizer = load_tokenizer(out / "tokenizer")
    other = original(CheckEnv, tokenizer, max_length=64)
    result = verify_prepared(out, tokenizer=tokenizer, env=other, write=False)
    assert made[1:] == [4096] and result.env is not other
    same = original(CheckEnv, tokenizer, max_length=4096)
    assert verify_prepared(out, tokenizer=tokenizer, env=same, write=False).env is same
