"""An --output target is never the user's folder: prepare and merge-shards refuse it and delete nothing.

A folder holding the user's files given as --output lost them (renamed away, removed),
and a file given as --output was renamed to a hidden name.
"""

from __future__ import annotations

import os

import pytest

from beam_sft.cli import main
from beam_sft.dataset_folder import output as cache
from beam_sft.errors import OutputRefused
from tests.encode.conftest import simple_row, write_jsonl


def _snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _prepare(data, tokenizer_dir, output, *extra):
    return main(["prepare", "--data", str(data), "--tokenizer", str(tokenizer_dir), "--output", str(output),
                 "--num-proc", "1", *extra])


def test_user_folder_with_files_is_refused_and_kept(tmp_path, tokenizer_dir, capsys):
    d = tmp_path / "d"
    d.mkdir()
    data = write_jsonl(d / "data.jsonl", [simple_row(i) for i in range(3)])
    (d / "notes.txt").write_text("x\n")
    before = _snapshot(d)
    assert _prepare(data, tokenizer_dir, d) == 2
    assert "refusing to write to" in capsys.readouterr().err
    assert _snapshot(d) == before
    assert sorted(os.listdir(tmp_path)) == ["d"]  # no staging or renamed folder left beside it


def test_file_as_output_is_refused_and_kept(tmp_path, tokenizer_dir):
    data = write_jsonl(tmp_path / "data.jsonl", [simple_row(i) for i in range(3)])
    target = tmp_path / "out.bin"
    target.write_bytes(b"mine")
    assert _prepare(data, tokenizer_dir, target) == 2
    assert target.read_bytes() == b"mine"
    assert sorted(os.listdir(tmp_path)) == ["data.jsonl", "out.bin"]


def test_own_prepared_folder_is_replaced_but_not_with_user_files_in_it(tmp_path, tokenizer_dir):
    data = write_jsonl(tmp_path / "data.jsonl", [simple_row(i) for i in range(3)])
    out = tmp_path / "out"
    assert _prepare(data, tokenizer_dir, out) == 0
    assert _prepare(data, tokenizer_dir, out, "--no-cache") == 0  # ours: replaced
    (out / "mine.txt").write_text("keep me")
    assert _prepare(data, tokenizer_dir, out, "--no-cache") == 2
    assert (out / "mine.txt").read_text() == "keep me"


def test_empty_folder_is_fine(tmp_path, tokenizer_dir):
    data = write_jsonl(tmp_path / "data.jsonl", [simple_row(i) for i in range(3)])
    out = tmp_path / "empty"
    out.mkdir()
    assert _prepare(data, tokenizer_dir, out) == 0
    assert (out / "report.json").is_file()


def test_a_report_alone_does_not_make_a_folder_ours(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "report.json").write_text("{\"quarterly\": true}")
    with pytest.raises(OutputRefused, match="no prepare wrote"):
        cache.check_output_target(d)


def test_publish_checks_again(tmp_path):
    """The target may change between the early check and the rename: publish refuses then too."""
    staging, final = tmp_path / "s", tmp_path / "f"
    staging.mkdir()
    final.mkdir()
    (final / "thesis.tex").write_text("years of work")
    with pytest.raises(OutputRefused):
        cache.publish(staging, final)
    assert (final / "thesis.tex").read_text() == "years of work"


def test_merge_shards_refuses_user_folder(tmp_path, tokenizer_dir):
    data = write_jsonl(tmp_path / "data.jsonl", [simple_row(i) for i in range(4)])
    shards = []
    for i in range(2):
        shards.append(tmp_path / f"s{i}")
        assert _prepare(data, tokenizer_dir, shards[-1], "--num-shards", "2", "--shard-index", str(i)) == 0
    d = tmp_path / "mine"
    d.mkdir()
    (d / "notes.txt").write_text("x")
    assert main(["merge-shards", *map(str, shards), "--output", str(d)]) == 2
    assert _snapshot(d) == {"notes.txt": b"x"}
    assert main(["merge-shards", *map(str, shards), "--output", str(shards[0])]) == 2
    assert (shards[0] / "report.json").is_file()
