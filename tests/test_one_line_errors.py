"""The file system saying no (a full disk, a read-only file system, a file where a
folder goes, a folder where a file goes) is one line naming where, exit 2, never a traceback; and what
was there before stays as it was. Faults are injected in-process (``tests.faults``): tests run as root,
whom chmod does not stop."""

from __future__ import annotations

import errno
import json

import pytest

from beam_sft.cli import main
from tests.encode.conftest import simple_row, write_jsonl
from tests.faults import inject
from tests.tree import assert_one_line_error, tree_digest


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, fixture_dir):
    root = tmp_path_factory.mktemp("one_line")
    data = write_jsonl(root / "rows.jsonl", [simple_row(i) for i in range(3)])
    assert main(["prepare", "--data", str(data), "--tokenizer", str(fixture_dir), "--output", str(root / "prep"),
                 "--num-proc", "1", "--quiet"]) == 0
    return root / "prep"


def _rows(tmp_path):
    return write_jsonl(tmp_path / "rows.jsonl", [simple_row(i) for i in range(3)])


def test_prepare_output_under_an_existing_file(tmp_path, fixture_dir, capsys):
    data = _rows(tmp_path)
    (tmp_path / "afile").write_text("mine")
    before = tree_digest(tmp_path)
    assert main(["prepare", "--data", str(data), "--tokenizer", str(fixture_dir),
                 "--output", str(tmp_path / "afile" / "out"), "--quiet"]) == 2
    assert_one_line_error(capsys.readouterr().err, "prepare", "which is a file, not a folder")
    assert tree_digest(tmp_path) == before


@pytest.mark.parametrize("code, words", [(errno.ENOSPC, "no space left"), (errno.EROFS, "read-only")])
def test_prepare_when_the_lock_cannot_be_written(tmp_path, fixture_dir, capsys, monkeypatch, code, words):
    data = _rows(tmp_path)
    out = tmp_path / "out"
    out.mkdir()  # the lock lives beside it, in tmp_path
    before = tree_digest(tmp_path)
    inject(monkeypatch, tmp_path, code)
    assert main(["prepare", "--data", str(data), "--tokenizer", str(fixture_dir), "--output", str(out),
                 "--num-proc", "1", "--quiet"]) == 2
    monkeypatch.undo()
    assert_one_line_error(capsys.readouterr().err, "prepare", "cannot write to", words)
    assert tree_digest(tmp_path) == before  # no lock, no staging left


def test_the_lock_on_a_full_disk_is_one_error_and_no_file(tmp_path, monkeypatch):
    from beam_sft.dataset_folder.lock import lock_path, output_lock
    from beam_sft.errors import OutputUnwritable

    inject(monkeypatch, tmp_path, errno.ENOSPC)
    with pytest.raises(OutputUnwritable, match="no space left on the device"):
        with output_lock(tmp_path / "out"):
            pass
    monkeypatch.undo()
    assert not lock_path(tmp_path / "out").exists()


@pytest.mark.parametrize("code, words", [(errno.ENOSPC, "no space left"), (errno.EROFS, "read-only")])
def test_convert_on_a_full_or_read_only_disk(tmp_path, capsys, monkeypatch, code, words):
    src = tmp_path / "in"
    src.mkdir()
    data = _rows(src)
    out = tmp_path / "out"
    out.mkdir()
    before = tree_digest(src)
    inject(monkeypatch, out, code)
    assert main(["convert", str(data), "-o", str(out / "rows.jsonl"), "--rejects", str(out / "rej.jsonl")]) == 2
    monkeypatch.undo()
    assert_one_line_error(capsys.readouterr().err, "convert", words)
    assert tree_digest(src) == before


def test_verify_on_a_read_only_file_system(prepared, capsys, monkeypatch):
    before = tree_digest(prepared)
    inject(monkeypatch, prepared, errno.EROFS)
    assert main(["verify", str(prepared), "--num-proc", "1"]) == 2
    monkeypatch.undo()
    assert_one_line_error(capsys.readouterr().err, "verify", "read-only")
    assert tree_digest(prepared) == before


def test_inspect_html_on_a_full_disk(prepared, tmp_path, capsys, monkeypatch):
    inject(monkeypatch, tmp_path, errno.ENOSPC)
    assert main(["inspect", str(prepared), "--row", "0", "--html", str(tmp_path / "row.html")]) == 2
    monkeypatch.undo()
    assert_one_line_error(capsys.readouterr().err, "inspect", "no space left")


def test_a_report_on_a_read_only_folder_names_it_and_leaves_no_temporary(tmp_path, monkeypatch):
    from beam_sft.dataset_folder.report_json import write_report
    from beam_sft.errors import OutputUnwritable

    (tmp_path / "report.json").write_text(json.dumps({"a": 1}))
    inject(monkeypatch, tmp_path, errno.EROFS)
    with pytest.raises(OutputUnwritable, match=f"cannot write to {tmp_path}: the file system is read-only"):
        write_report(tmp_path, {"a": 2})
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
    assert json.loads((tmp_path / "report.json").read_text()) == {"a": 1}


def test_any_oserror_that_reaches_the_cli_is_one_line(monkeypatch, capsys):
    """The backstop in ``beam_sft.cli.main``: an OSError from any write site still is one line."""
    from beam_sft.convert import cli as convert_cli

    def boom(args):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", "somewhere/out")

    monkeypatch.setattr(convert_cli, "run", boom)  # the parser takes ``run`` when main builds it
    assert main(["convert", "x", "-o", "y"]) == 2
    assert_one_line_error(capsys.readouterr().err, "convert", "somewhere/out: a folder is where a file goes")


def test_a_mistyped_local_tokenizer_path_is_not_looked_up_on_the_hub(tmp_path, monkeypatch, capsys):
    """``out/fixtur`` (``out`` a local folder) spelled like ORG/NAME was queried on the hub: about 46 s of
    retries offline, then a two-line error."""
    import time

    from beam_sft.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "a.jsonl").write_text("{}\n")
    began = time.monotonic()
    assert main(["prepare", "--tokenizer", "out/fixtur", "--data", "a.jsonl", "--output", "o"]) == 2
    assert time.monotonic() - began < 20
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "out/fixtur does not exist (out/ is a local folder" in err
