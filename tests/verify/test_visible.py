"""A hostile row (terminal escapes, BEL, NUL, CR, C1 controls, bidi overrides) is shown, never acted on:
in the terminal views, verify's output and the HTML pages (``beam_sft.visible``)."""

from __future__ import annotations

import json
import re

import pytest

from beam_sft.verify.api import inspect_row
from beam_sft.verify.report_html import render_report_page
from tests.verify.conftest import records_for
from tests.verify.test_cli import run

# Every character that acts on a terminal or reorders text, with the newline and tab the views keep.
ACTIVE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
OUR_COLOURS = re.compile(r"\x1b\[[0-9;]*m")
EVIL_SOURCE = "evil\x1b]0;pwned\x07\u202e.jsonl"
EVIL_ROW = {"messages": [
    {"role": "user", "content": "clear \x1b[2J\x1b[31mRED"},
    {"role": "assistant", "reasoning_content": "title \x1b]0;pwned\x07 bidi \u202egnp.exe",
     "content": "link \x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\ nul\x00 cr\rX \x9b31m bs\x08 \u2066i\u2069"}],
    "meta": {"source": EVIL_SOURCE, "row": 0}}


def with_evil_row(records, tokenizer):
    """The clean rows and the hostile one, every token of it trained: it breaks rules (its excerpts hold
    the hostile text) and its source is one report.json does not list (a violation naming it)."""
    evil = records_for([EVIL_ROW], tokenizer)[0]
    evil["assistant_masks"] = [1] * len(evil["input_ids"])
    evil["num_trained"] = len(evil["input_ids"])
    records.append(evil)


@pytest.fixture()
def evil_dir(make_prepared, tokenizer):
    return make_prepared(mutate=lambda records: with_evil_row(records, tokenizer))


def test_visible_escapes_what_acts_and_keeps_what_reads():
    from beam_sft.visible import html_text, visible

    text = "a\x1b[2J\x07\x00\r\x08\x7f\x9b\u202e\u202a\u2066\u2069\u200e\u200f\u061c\u2028\ud800z"
    assert visible(text) == ("a\\x1b[2J\\x07\\x00\\r\\x08\\x7f\\x9b\\u202e\\u202a\\u2066\\u2069\\u200e\\u200f"
                             "\\u061c\\u2028\\ud800z")
    kept = "tab\there\nnew line, é, 中文, 😀, 👩\u200d💻, back\\slash"  # (a joiner inside an emoji stays)
    assert visible(kept) == kept
    assert visible(kept, newlines=False) == kept.replace("\n", "\\n")
    assert html_text("<b>\u202e&</b>") == "&lt;b&gt;\\u202e&amp;&lt;/b&gt;"


@pytest.mark.parametrize("color", [False, True])
def test_inspect_shows_the_hostile_row_escaped(evil_dir, color):
    position = 6  # (after the six clean rows)
    text, _ = inspect_row(evil_dir, position, color=color)
    shown = OUR_COLOURS.sub("", text)  # our own codes are the only escape sequences written
    assert not ACTIVE.findall(shown)
    for escaped in ("\\x1b[2J", "\\x1b]0;pwned\\x07", "\\u202egnp.exe", "\\x1b]8;;http://evil.example/",
                    "nul\\x00 cr\\rX \\x9b31m bs\\x08 \\u2066i\\u2069"):
        assert escaped in shown
    assert "source evil\\x1b]0;pwned\\x07\\u202e.jsonl" in shown
    if color:
        assert OUR_COLOURS.search(text)


def test_verify_prints_the_hostile_row_escaped(evil_dir, capsys):
    assert run(["verify", str(evil_dir), "--num-proc", "1", "--no-histogram", "--max-violations", "50"]) == 1
    out, err = capsys.readouterr()
    assert not ACTIVE.findall(out) and not ACTIVE.findall(err)
    assert "pwned\\x07\\u202e.jsonl" in out  # the by-source table (the name's end)
    assert "(evil\\x1b]0;pwned\\x07\\u202e.jsonl" in err  # a violation's source
    assert "⟦" in err and "\\x1b[2J" in err  # an excerpt of the hostile text


def test_html_pages_show_the_hostile_row_escaped(evil_dir):
    _, page = inspect_row(evil_dir, 6, html=True)
    report_page = render_report_page(evil_dir, sample_rows=8)
    for html in (page, report_page):
        assert not ACTIVE.findall(html)
        assert ">\\u202e<" in html or "\\u202egnp" in html  # the override, as text
        assert "\\x1b" in html or "\\u001b" in html
    # the source pane is still JSON, and still the row
    pane = re.search(r"<pre>(.*?)</pre>", page, flags=re.S).group(1)
    import html as html_module

    assert json.loads(html_module.unescape(pane))["messages"] == EVIL_ROW["messages"]
    assert re.search(r"\.tok\.marker \{[^}]*unicode-bidi: isolate", page)  # markers read left to right


def test_report_names_from_data_are_shown_escaped(evil_dir):
    page = render_report_page(evil_dir)
    assert not ACTIVE.findall(page)
    assert "evil\\x1b]0;pwned\\x07\\u202e.jsonl" in page


ENGLAND = "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"  # (its tags are the flag's)
# Characters that draw nothing: a shown line would read as text it is not (a marker, a clean word).
HIDDEN_ROW = {"messages": [
    {"role": "user", "content": "zw <|en\u200bd|> bom\ufeff soft\u00adhyphen wj\u2060x filler\u3164x"},
    {"role": "assistant", "reasoning_content": "tags \U000e0069\U000e0067\U000e006e\U000e006f\U000e0072\U000e0065 end",
     "content": "fake ⟫ brackets ⟪ and ⟦region⟧ 👩\u200d💻 " + ENGLAND}],
    "meta": {"source": "hidden.jsonl", "row": 0}}
HIDDEN = re.compile("[\u00ad\u200b\u2060\u3164\ufeff\U000e0000-\U000e007f]")


def test_visible_escapes_what_draws_nothing_and_keeps_what_scripts_need():
    from beam_sft.visible import json_visible, visible

    assert visible("<|en\u200bd|>\ufeff\u00ad\u2060\u3164\U000e0041a\u200db\u034f") == (
        "<|en\\u200bd|>\\ufeff\\xad\\u2060\\u3164\\U000e0041a\\u200db\\u034f")
    assert visible("x\ufe0f 🏴\U000e0041\U000e007f") == "x\\ufe0f 🏴\\U000e0041\\U000e007f"
    # what text needs: an emoji's joiner and selector, a keycap, Persian's non-joiner, a subdivision flag
    kept = "👩\u200d💻 ❤\ufe0f 1\ufe0f\u20e3 می\u200cخواهم 🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"
    assert visible(kept) == kept
    text = "a\U000e0041\u200b\x7f\u202e😀"
    assert json.loads(json_visible(text)) == text and json_visible(text).isascii() is False
    assert "\\udb40\\udc41" in json_visible(text) and "\\u007f" in json_visible(text)


@pytest.fixture()
def hidden_dir(make_prepared, tokenizer):
    def add(records):
        hidden = records_for([HIDDEN_ROW], tokenizer)[0]
        hidden["assistant_masks"] = [1] * len(hidden["input_ids"])  # (every token trained: violations)
        hidden["num_trained"] = len(hidden["input_ids"])
        records.append(hidden)

    return make_prepared(mutate=add)


def test_views_show_the_characters_that_draw_nothing(hidden_dir, capsys):
    import html as html_module

    text, _ = inspect_row(hidden_dir, 6, color=True)
    _, page = inspect_row(hidden_dir, 6, html=True)
    report_page = render_report_page(hidden_dir, sample_rows=8)
    for shown in (text, page, report_page):
        assert not HIDDEN.findall(shown.replace(ENGLAND, ""))
        assert "<|en\\u200bd|>" in html_module.unescape(re.sub("<[a-z/!][^>]*>", "", shown))  # (a page: its token spans)
    assert "👩\u200d💻" in text and ENGLAND in text  # the emoji stay whole
    assert run(["verify", str(hidden_dir), "--num-proc", "1", "--no-histogram", "--max-violations", "50"]) == 1
    out, err = capsys.readouterr()
    assert not HIDDEN.findall((out + err).replace(ENGLAND, "")) and "\\U000e0069" in err


def test_the_plain_view_and_excerpts_draw_only_their_own_brackets(hidden_dir):
    from beam_sft.verify.context import CheckEnv
    from beam_sft.verify.view_terminal import PLAIN_CLOSE, PLAIN_OPEN

    text, _ = inspect_row(hidden_dir, 6, color=False)
    body = text.split("\n", 2)[2].split("\nviolations:")[0]  # the messages
    assert "fake \\u27eb brackets \\u27ea and" in body  # the row's own, escaped
    # every trained run of the row (all of it is trained) is one bracketed piece, none opened by the row
    messages = sum(line.startswith("[") for line in body.splitlines())
    assert body.count(PLAIN_OPEN) == body.count(PLAIN_CLOSE) == messages == 4

    class Chars:  # ids are code points
        decode = staticmethod(lambda ids: "".join(map(chr, ids)))

    ids = [ord(c) for c in "a⟧b⟦c d"]
    assert CheckEnv.excerpt(Chars(), ids, 5, 6) == "a\\u27e7b\\u27e6c⟦ ⟧d"


def test_the_violations_file_writes_what_would_act_as_json_escapes(hidden_dir):
    """verify_violations.jsonl is read in a terminal too: the hidden characters its excerpts and sources
    could quote are JSON escapes there (the same values read back)."""
    from beam_sft.verify.context import Violation
    from beam_sft.verify.results import ViolationWriter

    found = Violation("structure", 1, "s\u202e\x9b.jsonl", 0, "m \u200b\U000e0041", excerpt="e\u2066")
    with ViolationWriter(hidden_dir) as out:
        out.write(found)
    text = (hidden_dir / "verify_violations.jsonl").read_text(encoding="utf-8")
    assert not any(c in text for c in "\u202e\x9b\u200b\U000e0041\u2066")
    assert Violation(**json.loads(text)) == found


FORGING_ROW = {"messages": [
    {"role": "user", "content": "hi\n[assistant:final] forged answer\n\nviolations: none"},
    {"role": "assistant", "reasoning_content": "think", "content": "real\n[user] forged turn"}],
    "meta": {"source": "forge.jsonl", "row": 0}}


def test_the_plain_view_draws_only_its_own_labels(make_prepared, tokenizer):
    """A row's line that reads like a label (``[assistant:final]``) or the violations line is shown
    escaped in the plain view: only the view's own lines begin a message."""
    directory = make_prepared(mutate=lambda records: records.extend(records_for([FORGING_ROW], tokenizer)))
    text, _ = inspect_row(directory, 6, color=False)
    lines = text.splitlines()
    labels = [line.split(" ", 1)[0] for line in lines if line.startswith("[")]
    assert "[assistant:final]" in labels and "[user]" in labels  # the real ones
    assert not any("forged" in line for line in lines if line.startswith("["))
    assert sum(line.startswith("violations:") for line in lines) == 1
    assert "\\u005bassistant:final] forged answer" in text and "\\u005buser] forged turn" in text
    assert "\\u0076iolations: none" in text
