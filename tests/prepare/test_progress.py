"""Progress: a log line per phase at a steady interval off a terminal, datasets' bars on one,
nothing with --quiet; the library never switches datasets' bars off behind the caller's back."""

from __future__ import annotations

import re

import datasets as ds_logging

from beam_sft.data.synthetic import synthetic_rows
from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
from beam_sft.prepare.progress import cli_progress
from tests.encode.conftest import write_jsonl


def test_prepare_leaves_datasets_progress_bars_alone(tmp_path, tokenizer_dir):
    assert ds_logging.is_progress_bar_enabled()
    data = write_jsonl(tmp_path / "rows.jsonl", synthetic_rows(8, seed=0, scale=0.05, vocab=500))
    prepare(PrepareConfig(sources=[SourceSpec(path=str(data))], tokenizer=str(tokenizer_dir),
                          output=str(tmp_path / "out"), num_proc=1, verify=False))
    assert ds_logging.is_progress_bar_enabled()


def test_off_a_terminal_lines_come_at_an_interval(tmp_path, tokenizer_dir, caplog):
    data = write_jsonl(tmp_path / "rows.jsonl", synthetic_rows(1500, seed=0, scale=0.3))
    with caplog.at_level("INFO", logger="beam_sft.prepare"):
        prepare(PrepareConfig(sources=[SourceSpec(path=str(data))], tokenizer=str(tokenizer_dir),
                              output=str(tmp_path / "out"), num_proc=2, verify=False, batch_size=32),
                progress_interval=0.05)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("encode: ")]
    progress = [m for m in lines if re.fullmatch(r"encode: \d+/1500 records \(\d+%\), \d+ rows/s, ETA (\d+s|\?)", m)]
    assert progress, lines
    done = [int(m.split()[1].split("/")[0]) for m in progress]
    assert done == sorted(done) and done[-1] > 128  # the workers' counts arrive


def test_the_cli_choice_is_scoped(monkeypatch):
    import sys

    assert ds_logging.is_progress_bar_enabled()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    with cli_progress(quiet=False) as interval:
        assert interval > 0 and not ds_logging.is_progress_bar_enabled()
    assert ds_logging.is_progress_bar_enabled()
    with cli_progress(quiet=True) as interval:
        assert interval == 0 and not ds_logging.is_progress_bar_enabled()
    assert ds_logging.is_progress_bar_enabled()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    with cli_progress(quiet=False) as interval:
        assert interval == 0 and ds_logging.is_progress_bar_enabled()  # datasets' bars: rows/s, ETA
