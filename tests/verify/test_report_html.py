"""The report page (``beam-sft report``, and ``report.html`` beside every prepared folder).

A real prepare over rows with hostile text (markup in user text, in a tool name's description, in
a rejected row), then: the page holds every section with the report's figures, every piece of data
text is escaped (no element from a row survives), the folder's digests stay consistent with the
page in it, and a real headless Chromium loads it without a console message (the page's
Content-Security-Policy turns any script or network load into one) and paints tables and charts.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

HOSTILE = '<script>console.error("xss")</script><img src=x onerror=alert(1)></pre><b>bold</b>&amp;'


def _rows() -> list[dict]:
    rows = []
    for i in range(12):
        rows.append({"messages": [
            {"role": "user", "content": f"Question {i}: {HOSTILE}"},
            {"role": "assistant", "reasoning_content": f"Think {i} {HOSTILE}", "content": f"Answer {i}"}],
            "chat_template_kwargs": {"reasoning_effort": "low"}})
    # Rejected: no reasoning (missing_reasoning), and a Harmony marker in text (harmony_marker_in_text).
    rows.append({"messages": [{"role": "user", "content": HOSTILE},
                              {"role": "assistant", "content": "no reasoning"}]})
    rows.append({"messages": [{"role": "user", "content": "say <|end|> " + HOSTILE},
                              {"role": "assistant", "reasoning_content": "r", "content": "ok"}]})
    return rows


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, fixture_dir) -> Path:
    from beam_sft.config_utils import from_dict
    from beam_sft.prepare import PrepareConfig, prepare

    tmp = tmp_path_factory.mktemp("report_page")
    source = tmp / "hostile <b>.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in _rows()), encoding="utf-8")
    config = from_dict(PrepareConfig, {"sources": [{"path": str(source), "format": "openai"}],
                                       "tokenizer": str(fixture_dir), "output": str(tmp / "prepared")})
    return Path(prepare(config))


def _page(prepared: Path) -> str:
    return (prepared / "report.html").read_text(encoding="utf-8")


def test_prepare_writes_the_page_and_the_digests_stay_consistent(prepared):
    from beam_sft.dataset_folder.integrity import check_integrity
    from beam_sft.dataset_folder.layout import REPORT_PAGE, UNDIGESTED

    assert (prepared / REPORT_PAGE).is_file()
    assert REPORT_PAGE in UNDIGESTED
    report = json.loads((prepared / "report.json").read_text(encoding="utf-8"))
    assert REPORT_PAGE not in report["files"]["files"]
    check_integrity(prepared, report)  # the page is no stray file
    (prepared / REPORT_PAGE).write_text("changed", encoding="utf-8")
    check_integrity(prepared, report)  # and not digested: rewriting it (beam-sft report) keeps the folder valid
    from beam_sft.verify.report_html import write_report_page

    write_report_page(prepared)


def test_the_page_holds_every_section_with_the_reports_figures(prepared):
    page = _page(prepared)
    report = json.loads((prepared / "report.json").read_text(encoding="utf-8"))
    for heading in ("Sources", "Tokens", "Lengths and masks", "Verify", "Rejected rows", "Rows and their masks"):
        assert f"<h2>{heading}" in page, heading
    assert f"{report['tokens']['total']:,}" in page and f"{report['tokens']['trained']:,}" in page
    for code, count in report["rejects"]["by_code"].items():
        assert f"<td class=\"l\">{code}</td><td>{count}</td>" in page
    assert set(report["rejects"]["by_code"]) == {"missing_reasoning", "harmony_marker_in_text"}
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg"') == 3  # two histograms and the channel shares
    assert 'class="tok trained"' in page and 'class="tok ctx"' in page  # rows drawn with their masks
    assert "every rule holds on every checked row" in page
    assert "<h1>beam-sft report: prepared</h1>" in page and "staging" not in page  # named as published


def test_every_data_text_is_escaped(prepared):
    page = _page(prepared)
    assert "<script" not in page and "<img" not in page and "<b>bold" not in page
    assert "&lt;script&gt;" in page  # the text is there, as text
    # The only elements are the page's own.
    tags = set(re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", page))
    assert tags <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "table", "thead", "tbody",
                    "tr", "th", "td", "div", "span", "pre", "code", "b", "figure", "svg", "rect", "line", "text", "ul",
                    "li"}, tags
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in page


def test_sample_positions_take_one_row_per_source_first():
    from beam_sft.verify.report_html import sample_positions

    assert sample_positions(["a"] * 5 + ["b"] * 5, count=2) == [0, 5]
    assert len(sample_positions(["a"] * 10, count=4)) == 4
    assert sample_positions([], count=4) == []


def test_cli_writes_the_page_and_refuses_a_folder_that_is_not_prepared(prepared, tmp_path, capsys):
    from beam_sft.cli import main

    out = tmp_path / "sub" / "page.html"
    assert main(["report", str(prepared), "-o", str(out), "--rows", "1"]) == 0
    assert out.read_text(encoding="utf-8").count('<div class="row">') == 1
    assert main(["report", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a prepared dataset" in err[0]


# ---------------------------------------------------------------------------- a real browser


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def _screenshot(browser: str, page: Path, png: Path, tmp: Path) -> list[str]:
    """Load ``page`` in headless Chromium, write a screenshot, return its console messages."""
    result = subprocess.run(
        [browser, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", "--no-first-run",
         f"--user-data-dir={tmp / 'profile'}", "--window-size=1280,2400", f"--screenshot={png}",
         "--enable-logging=stderr", "--v=0", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120)
    assert png.is_file(), result.stderr[-2000:]
    return [line for line in result.stderr.splitlines() if ":CONSOLE" in line]


def _non_blank_rows(png: Path) -> tuple[tuple[int, int], float, int]:
    from PIL import Image

    image = Image.open(png).convert("RGB")
    width, height = image.size
    pixels = image.load()
    inked = sum(1 for y in range(0, height, 4) for x in range(0, width, 4) if pixels[x, y] != (255, 255, 255))
    colours = len(set(image.resize((320, 600)).getdata()))
    return (width, height), inked / ((width // 4) * (height // 4)), colours


def test_the_page_loads_in_a_real_browser_without_console_messages(prepared, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)")
    pytest.importorskip("PIL", reason="Pillow reads the screenshot (the dev extra installs it)")
    # The detector works: a page whose script the CSP blocks logs a console message.
    bad = tmp_path / "bad.html"
    page = _page(prepared)
    bad.write_text(page.replace("</body>", "<script>console.log(1)</script></body>"), encoding="utf-8")
    assert _screenshot(browser, bad, tmp_path / "bad.png", tmp_path)

    png = tmp_path / "report.png"
    messages = _screenshot(browser, prepared / "report.html", png, tmp_path)
    assert messages == []
    size, inked, colours = _non_blank_rows(png)
    assert size == (1280, 2400)
    assert inked > 0.05  # tables, text and bars, not a white page
    assert colours > 20  # the charts' and masks' colours, not black text alone


def test_verify_redraws_the_page_with_its_new_result(prepared, tmp_path):
    import shutil as sh

    from beam_sft.cli import main

    folder = tmp_path / "copy"
    sh.copytree(prepared, folder)
    (folder / "report.html").write_text("stale", encoding="utf-8")
    assert main(["verify", str(folder)]) == 0  # a full run: a sample never rewrites the recorded result
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert page != "stale" and "rows checked</td><td>12" in page


def test_a_drawn_row_that_verify_flagged_says_so(prepared, tmp_path):
    import shutil as sh

    from beam_sft.verify.report_html import render_report_page

    folder = tmp_path / "flagged"
    sh.copytree(prepared, folder)
    (folder / "verify_violations.jsonl").write_text(json.dumps(
        {"rule": "straddle", "row": 0, "source": "s", "row_index": 0, "message": "a span <b>crosses</b>"}) + "\n",
        encoding="utf-8")
    page = render_report_page(folder, sample_rows=1)
    assert 'verify: straddle: a span &lt;b&gt;crosses&lt;/b&gt;' in page


def test_verify_never_redraws_the_page_from_an_edited_report(prepared, tmp_path):
    """A report whose seal is broken is not verify's to write into, and the page would show the edit
    as the folder's figures: verify fails and leaves the page as it was."""
    import shutil as sh

    from beam_sft.cli import main

    folder = tmp_path / "edited"
    sh.copytree(prepared, folder)
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    first = next(iter(report["sources"]))
    report["sources"][first]["kept"] += 1  # by hand: the seal no longer holds
    (folder / "report.json").write_text(json.dumps(report), encoding="utf-8")
    page = (folder / "report.html").read_bytes()
    assert main(["verify", str(folder)]) != 0
    assert (folder / "report.html").read_bytes() == page


def test_a_rejection_message_quoting_a_huge_value_is_cut_in_the_page():
    """convert's messages quote the row's values whole (a 50,000-character role): the page shows the
    message's start and says where the rest is, as it does for the raw row."""
    from beam_sft.verify.report_html import _MESSAGE_CHARS, _rejects_section

    role = "R" * 50_000
    entry = {"source": "a.jsonl", "row": 0, "code": "unknown_role", "message": f"messages[0] has role {role!r}",
             "raw": {"messages": [{"role": role}]}}
    section = _rejects_section({"rejects": {"by_code": {"unknown_role": 1}}}, {"unknown_role": [entry]})
    assert len(section) < 5_000 and "more characters in rejects.jsonl" in section
    assert f"messages[0] has role &#x27;{'R' * (_MESSAGE_CHARS - 22)}" in section
