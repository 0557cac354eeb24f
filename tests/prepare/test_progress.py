"""Progress: a log line per phase at a steady interval off a terminal, datasets' bars on one,
nothing with --quiet; the library never switches datasets' bars off behind the caller's back."""

from __future__ import annotations

import os
import re

import datasets as ds_logging

from beam_sft.data.synthetic import synthetic_rows
from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
from beam_sft.prepare.progress import BARS_VARIABLE, bar, cli_progress
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

    monkeypatch.delenv(BARS_VARIABLE, raising=False)
    assert ds_logging.is_progress_bar_enabled()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    with cli_progress(quiet=False) as progress:
        assert progress.interval > 0 and not progress.bars and not ds_logging.is_progress_bar_enabled()
    assert ds_logging.is_progress_bar_enabled()
    with cli_progress(quiet=True) as progress:
        assert progress.interval == 0 and not progress.bars and not ds_logging.is_progress_bar_enabled()
    assert ds_logging.is_progress_bar_enabled()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    with cli_progress(quiet=False) as progress:  # bars: rows/s, ETA
        assert progress.interval == 0 and progress.bars and ds_logging.is_progress_bar_enabled()
    monkeypatch.setenv(BARS_VARIABLE, "1")  # the user's setting decides, on a terminal too
    with cli_progress(quiet=False) as progress:
        assert not progress.bars
    assert os.environ[BARS_VARIABLE] == "1"


def test_the_choice_reaches_datasets_imported_during_the_run():
    # the CLI does not import datasets; a hub source imports it during the run, and must find its
    # bars off there off a terminal; the variable is the user's again after the run
    import subprocess
    import sys

    code = ("import os, sys\n"
            "from beam_sft.prepare.progress import cli_progress\n"
            "assert 'datasets' not in sys.modules\n"
            "with cli_progress(quiet=False) as progress:\n"
            "    import datasets\n"
            "    print('inside', progress.bars, datasets.is_progress_bar_enabled())\n"
            "print('after', os.environ.get('HF_DATASETS_DISABLE_PROGRESS_BARS'))\n")
    env = {k: v for k, v in os.environ.items() if k != BARS_VARIABLE}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["inside False False", "after None"], done.stdout


def test_the_bar_shows_only_where_asked(monkeypatch, capsys):
    monkeypatch.delenv(BARS_VARIABLE, raising=False)
    with bar("encode", 10, show=False) as progress:
        progress.update(10)
    assert "encode" not in capsys.readouterr().err
    with bar("encode", 10, show=True) as progress:
        progress.update(10)
    assert "encode: 100%" in capsys.readouterr().err
    monkeypatch.setenv(BARS_VARIABLE, "yes")
    with bar("encode", 10, show=True) as progress:
        progress.update(10)
    assert "encode" not in capsys.readouterr().err
