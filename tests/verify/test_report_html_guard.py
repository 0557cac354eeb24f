"""``beam-sft report`` goes through the one output guard (its folder's own files and the sources its
report records are inputs), checks the report's seal before drawing, never crashes on a report value
of the wrong type, and every page we write carries the one Content-Security-Policy."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from beam_sft.cli import main
from tests.tree import assert_one_line_error, tree_digest

ROW = {"messages": [{"role": "user", "content": "hi"},
                    {"role": "assistant", "reasoning_content": "greet", "content": "hello"}]}


@pytest.fixture(scope="module")
def made(tmp_path_factory, fixture_dir) -> tuple[Path, Path]:
    """(prepared folder, the source JSONL it was made from), beside each other in one work folder."""
    from beam_sft.config_utils import from_dict
    from beam_sft.prepare import PrepareConfig, prepare

    work = tmp_path_factory.mktemp("report_guard")
    source = work / "mine.jsonl"
    source.write_text("".join(json.dumps(ROW) + "\n" for _ in range(3)), encoding="utf-8")
    config = from_dict(PrepareConfig, {"sources": [{"path": str(source), "format": "openai"}],
                                       "tokenizer": str(fixture_dir), "output": str(work / "prepared")})
    return Path(prepare(config)), source


@pytest.fixture
def work(made, tmp_path) -> tuple[Path, Path]:
    """A copy of the work folder for one test (a refused write must change nothing in it)."""
    prepared, source = made
    root = tmp_path / "w"
    shutil.copytree(prepared.parent, root)
    copy = root / prepared.name
    report = json.loads((copy / "report.json").read_text(encoding="utf-8"))
    assert [e["path"] for e in report["sources"].values()] == [str(source)]
    return copy, source


REFUSED = {
    "the sealed report": lambda d, s: d / "report.json",
    "the dataset's arrow file": lambda d, s: d / "data-00000-of-00001.arrow",
    "the rejects file": lambda d, s: d / "rejects.jsonl",
    "a new file inside the folder": lambda d, s: d / "page.html",
    "the folder itself": lambda d, s: d,
    "the source the folder was made from": lambda d, s: s,
    "the source spelled through ..": lambda d, s: s.parent / d.name / ".." / s.name,
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_report_refuses_an_output_over_what_it_reads(work, made, case, capsys):
    directory, _ = work
    _, source = made  # the recorded source is the original one: it must never be written
    out = REFUSED[case](directory, source if "source" in case else None)
    root = directory.parent
    before, source_before = tree_digest(root), source.read_bytes()
    assert main(["report", str(directory), "-o", str(out)]) == 2
    assert_one_line_error(capsys.readouterr().err, "report", "refusing to write to")
    assert tree_digest(root) == before and source.read_bytes() == source_before


def test_report_writes_its_own_page_and_pages_elsewhere(work, capsys):
    directory, _ = work
    assert main(["report", str(directory), "--rows", "1"]) == 0
    assert main(["report", str(directory), "-o", str(directory / "report.html"), "--rows", "1"]) == 0
    assert main(["report", str(directory), "-o", str(directory.parent / "elsewhere.html"), "--rows", "1"]) == 0
    assert (directory.parent / "elsewhere.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert main(["verify", str(directory)]) == 0  # the folder is as it was


# ---------------------------------------------------------------------------- edited values


def _edit(directory: Path, change) -> None:
    report = json.loads((directory / "report.json").read_text(encoding="utf-8"))
    change(report)
    (directory / "report.json").write_text(json.dumps(report), encoding="utf-8")


EDITS = {
    "a string count": lambda r: next(iter(r["sources"].values())).__setitem__("kept", "3"),
    "a string rejected count": lambda r: next(iter(r["sources"].values())).__setitem__("rejected", {"x": "3"}),
    "a list for the tokens": lambda r: r.__setitem__("tokens", [1, 2]),
    "a string encoder": lambda r: r.__setitem__("encoder", "fast"),
    "a string by_code count": lambda r: r["rejects"].__setitem__("by_code", {"missing_reasoning": "x"}),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_report_on_an_edited_report_says_the_seal_broke_in_one_line(work, case, capsys):
    directory, _ = work
    _edit(directory, EDITS[case])
    page = (directory / "report.html").read_bytes()
    assert main(["report", str(directory)]) == 2
    assert_one_line_error(capsys.readouterr().err, "report", "report.json", "integrity digest differs",
                          "no page is drawn")
    assert (directory / "report.html").read_bytes() == page


@pytest.mark.parametrize("case", sorted(EDITS))
def test_a_sealed_report_with_values_of_the_wrong_type_never_crashes_the_drawing(work, case):
    """Sealed again by whoever edited it (the seal proves beam-sft wrote it only to a reader that
    trusts nothing else): the page still draws, naming the section it cannot."""
    from beam_sft.dataset_folder.report_json import seal
    from beam_sft.verify.report_html import render_report_page

    directory, _ = work
    _edit(directory, lambda r: (EDITS[case](r), r.update(seal(r))))
    page = render_report_page(directory, sample_rows=1)
    assert "Traceback" not in page and page.rstrip().endswith("</html>")
    drawn_as_text = {"a string count", "a string encoder"}  # shown as the text they are
    assert ("values of the wrong type" in page) == (case not in drawn_as_text)


# ---------------------------------------------------------------------------- one policy on every page


def test_every_page_we_write_carries_the_one_policy(work, tmp_path, capsys):
    from beam_sft.verify.page_head import CONTENT_SECURITY_POLICY

    directory, _ = work
    html = tmp_path / "row.html"
    assert main(["inspect", str(directory), "--row", "0", "--html", str(html)]) == 0
    assert main(["report", str(directory), "-o", str(tmp_path / "r.html"), "--rows", "1"]) == 0
    pages = [html, tmp_path / "r.html", directory / "report.html"]
    meta = f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">'
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert text.count("Content-Security-Policy") == 1, page
        assert meta.replace("'", "&#x27;") in text, page
        # the policy comes before anything else in the head
        assert text.index("Content-Security-Policy") < text.index("<title>") < text.index("<style>")
    assert "default-src 'none'" in CONTENT_SECURITY_POLICY and "script-src" not in CONTENT_SECURITY_POLICY
