"""``check_record(raw, max_chars, text=...)``: told from the record's JSON text, the same answer as
serializing the record (``text_passes``), on JSON written every way a file writes it; and prepare's one
serialization of a kept row (``row_column``) rejects what ``convert_row``'s late check rejected."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_sft.convert import pipeline
from beam_sft.convert.pipeline import DUMPS_GROWTH, check_record, late_rejection, text_passes
from beam_sft.data import jsontext
from beam_sft.errors import Rejection
from beam_sft.prepare.batch import row_column

# Numbers written the shortest way that grows the most when Python writes them back (repr).
GROWING_NUMBERS = ["9e15", "1e9", "-9e15", "1e-7", "0e0", "1E2", "5e-324", "1.5", "-0", "12"]
TEXTS = st.text(alphabet=st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["\\u00e9", "é", "\\ud83d\\ude00", "\\ud800", "\\uDFFF", "\\\\ud800", "\\n", "\\/", "\\u0000", "\"", "\\\\"])


def _string_literal(body: str) -> str:
    """A JSON string literal around ``body``: escapes in ``body`` (from TEXTS) are kept as written."""
    if "\\" in body and any(body.startswith(e) for e in ("\\u", "\\n", "\\/", "\\\\")):
        return '"' + body + '"'
    return json.dumps(body, ensure_ascii=False)


def _json_texts():
    scalars = st.one_of(st.sampled_from(GROWING_NUMBERS), st.integers(-10**6, 10**6).map(str),
                        st.sampled_from(["true", "false", "null"]), TEXTS.map(_string_literal))
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=5).map(lambda xs: "[" + ",".join(xs) + "]"),
            st.lists(st.tuples(TEXTS.map(_string_literal), inner), max_size=5).map(
                lambda kv: "{" + ",".join(f"{k}:{v}" for k, v in kv) + "}"),
            st.tuples(st.sampled_from(["", " ", "\n  "]), inner).map(lambda p: p[0] + p[1] + p[0]),
        ),
        max_leaves=25,
    )


def _decoded(text: str):
    try:
        return jsontext.loads(text)
    except (ValueError, RecursionError):
        return None  # not a record prepare hands to check_record (a BadRecord instead)


@settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=_json_texts(), slack=st.integers(-3, 3))
def test_text_gives_the_serializations_answer(text, slack):
    raw = _decoded(text)
    if raw is None:
        return
    dumped = len(json.dumps(raw, ensure_ascii=False))
    assert dumped <= DUMPS_GROWTH * len(text), (text, dumped)
    for max_chars in (None, max(1, dumped + slack), max(1, DUMPS_GROWTH * len(text) + slack)):
        assert check_record(raw, max_chars, text=text) == check_record(raw, max_chars), (text, max_chars)


@pytest.mark.parametrize("number", GROWING_NUMBERS)
def test_growth_bound_holds_for_the_worst_numbers(number):
    text = "[" + ",".join([number] * 50) + "]"
    assert len(json.dumps(jsontext.loads(text), ensure_ascii=False)) <= DUMPS_GROWTH * len(text)


def test_a_surrogate_escape_is_found_by_the_serialization():
    raw = jsontext.loads('{"a": "x\\ud800"}')
    assert text_passes('{"a": "x\\ud800"}', None) is False
    assert check_record(raw, text='{"a": "x\\ud800"}')[0] == "invalid_text"
    # an escaped backslash before "ud800" is no escape: still "not sure", never a wrong pass
    assert text_passes('{"a": "\\\\ud800"}', None) is False
    assert check_record(jsontext.loads('{"a": "\\\\ud800"}'), text='{"a": "\\\\ud800"}') is None


@pytest.mark.parametrize("mutation", ["growth", "escape"])
def test_the_property_catches_a_weakened_shortcut(monkeypatch, mutation):
    """Mutation: a growth bound too small, or a surrogate escape not looked for, and the differential
    above finds a record whose answer changes."""
    if mutation == "growth":
        monkeypatch.setattr(pipeline, "DUMPS_GROWTH", 1)
        text, max_chars = "[9e15]", 10  # 6 characters as written, 20 as Python writes it
        assert check_record(jsontext.loads(text), max_chars)[0] == "row_too_large"
    else:
        monkeypatch.setattr(pipeline, "_SURROGATE_ESCAPE", pipeline.re.compile("(?!)"))
        text, max_chars = '["\\udc80"]', None
    raw = jsontext.loads(text)
    assert check_record(raw, max_chars, text=text) != check_record(raw, max_chars)


ROW = {"messages": [{"role": "user", "content": "q"},
                    {"role": "assistant", "reasoning_content": "r", "content": "a"}]}


def test_row_column_is_the_old_serialization():
    row = {**ROW, "meta": {"source": "s.jsonl", "row": 3}}
    assert row_column(row) == json.dumps(row, ensure_ascii=False)


@pytest.mark.parametrize(("value", "code"), [(math.inf, "non_standard_number"), (math.nan, "non_standard_number"),
                                             ("\ud800", "invalid_text")])
def test_row_column_rejects_what_the_late_check_rejects(value, code):
    row = {**ROW, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"default": value}}}]}
    found = row_column({**row, "meta": {"source": "s", "row": 0}})
    assert isinstance(found, Rejection) and found.code == code
    assert found.code == late_rejection(row).code and found.message == late_rejection(row).message


def test_a_surrogate_in_meta_is_not_the_rows_rejection():
    """The late check looks at the row as converted; meta (a source path) is serialized as before."""
    row = {**ROW, "meta": {"source": "bad\udcff.jsonl", "row": 0}}
    assert late_rejection(row) is None
    assert row_column(row) == json.dumps(row, ensure_ascii=False)


def test_the_first_bad_place_is_named_and_an_undecodable_byte_is_called_a_byte():
    """The walk names the first bad value in the row's own order (it named the last), and a
    U+DC80..U+DCFF (how the reader keeps a byte that is not UTF-8) is described as that byte."""
    raw = {"messages": [{"role": "user", "content": "h\udcff"},
                        {"role": "assistant", "content": "t\udcffnk", "x": "\ud800"}]}
    code, message = check_record(raw)
    assert code == "invalid_text"
    assert message.startswith("row.messages[0].content is not valid Unicode text (U+DCFF at character 1:")
    assert "the byte 0xFF, which is not UTF-8" in message
    code, message = check_record({"a": ["ok", {"b": "\ud800", "c": "\udcff"}]})
    assert message == "row.a[1].b is not valid Unicode text (a lone surrogate U+D800 at character 0)"
    code, message = check_record({"k\ud800": "v\udcff"})
    assert message.startswith("row (key) is not valid Unicode text (a lone surrogate U+D800")
