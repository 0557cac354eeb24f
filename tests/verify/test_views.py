"""inspect's views: per-token text, the terminal view and the HTML page."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest

from beam_sft.harmony.spans import mask_runs
from beam_sft.verify.api import inspect_row, load_row
from beam_sft.verify.tokens import token_texts
from beam_sft.verify.view_terminal import PLAIN_CLOSE, PLAIN_OPEN, TRAINED

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def decode(tokenizer, ids):
    return tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)


def test_token_texts_join_to_the_decoded_row(clean_records, tokenizer):
    for record in clean_records:
        texts = token_texts(record["input_ids"], lambda ids: decode(tokenizer, ids))
        assert len(texts) == len(record["input_ids"])
        assert "".join(texts) == decode(tokenizer, record["input_ids"])
        assert "\ufffd" not in "".join(texts)


def test_terminal_view_labels_and_highlights(clean_dir):
    text, page = inspect_row(clean_dir, 1, color=True)
    assert page is None
    plain = ANSI.sub("", text)
    for label in ("[system]", "[developer]", "[user]", "[assistant:analysis]", "[assistant→get_weather]",
                  "[get_weather→assistant]", "[assistant:final]"):
        assert label in plain
    body = text.split("\n", 2)[2]  # past the header and legend lines
    highlighted = re.findall(re.escape(TRAINED) + r"(.*?)\x1b\[0m", body, flags=re.S)
    assert highlighted and highlighted[0].startswith("<|channel|>analysis")
    assert not any("<|start|>user" in h for h in highlighted)


def test_plain_view_brackets_exactly_the_trained_text(clean_dir, clean_records, tokenizer):
    text, _ = inspect_row(clean_dir, 2, color=False)
    assert "\x1b[" not in text
    record = clean_records[2]
    trained = [decode(tokenizer, record["input_ids"][a:b]) for a, b in mask_runs(record["assistant_masks"])]
    # Trained runs are bracketed per message, so join the bracketed pieces of each span back up.
    body = text.split("\n", 2)[2]  # past the header and legend lines
    pieces = re.findall(re.escape(PLAIN_OPEN) + "(.*?)" + re.escape(PLAIN_CLOSE), body, flags=re.S)
    assert "".join(pieces) == "".join(trained)


class TokenPage(HTMLParser):
    """Collects every token span (index, id, classes, text) and the <pre> source."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tokens: list[dict] = []
        self.pre: list[str] = []
        self._in_token = None
        self._in_pre = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "span" and "data-id" in attrs:
            self._in_token = {"i": int(attrs["data-i"]), "id": int(attrs["data-id"]),
                              "classes": attrs["class"].split(), "title": attrs["title"], "text": ""}
            self.tokens.append(self._in_token)
        elif tag == "pre":
            self._in_pre = True

    def handle_endtag(self, tag):
        if tag == "span":
            self._in_token = None
        elif tag == "pre":
            self._in_pre = False

    def handle_data(self, data):
        if self._in_token is not None:
            self._in_token["text"] += data
        elif self._in_pre:
            self.pre.append(data)


@pytest.mark.parametrize("position", [1, 3, 5])
def test_html_page_holds_every_token_in_order(clean_dir, clean_records, tokenizer, position):
    _, page = inspect_row(clean_dir, position, html=True)
    parser = TokenPage()
    parser.feed(page)
    parser.close()
    record = clean_records[position]
    assert [t["id"] for t in parser.tokens] == record["input_ids"]
    assert [t["i"] for t in parser.tokens] == list(range(len(record["input_ids"])))
    assert "".join(t["text"] for t in parser.tokens) == decode(tokenizer, record["input_ids"])
    assert [int("trained" in t["classes"]) for t in parser.tokens] == record["assistant_masks"]
    assert parser.tokens[0]["title"].startswith("#0 id ")
    assert json.loads("".join(parser.pre)) == json.loads(record["row"])  # the source, beside it


def test_html_escapes_markup_in_the_row(clean_dir):
    _, page = inspect_row(clean_dir, 3, html=True)  # row 3's user message holds HTML
    assert "<script>" not in page and "<b>" not in page
    assert "&lt;script&gt;" in page


def test_out_of_range_row(clean_dir):
    from beam_sft.errors import VerificationError

    with pytest.raises(VerificationError, match="out of range"):
        load_row(clean_dir, 99)


def test_inspect_lists_the_rows_violations(make_prepared, tokenizer):
    from tests.verify.test_invariants import train_user_turn

    directory = make_prepared(mutate=lambda records: train_user_turn(records, tokenizer))
    text, page = inspect_row(directory, 0, color=False, html=True)
    assert "[trained_context]" in text and "[span_start]" in text
    assert "<code>trained_context</code>" in page
    clean_text, clean_page = inspect_row(directory, 1, color=False, html=True)
    assert "violations: none" in clean_text and "no violations in this row" in clean_page
