"""Fuzz tier: hostile rows for the glaive, gemini, bedrock and chat_log readers, the batch join and
the pythonic-call parser. Each example row of the reader tests has one value (at any depth) replaced
by a generated hostile one; every result is a kept row or a Rejection with a code of the table,
never a converter error (a reader that raised something other than a Rejection)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_sft.convert.options import ConvertOptions
from beam_sft.convert.pipeline import convert_row
from beam_sft.convert.pythonic import parse_pythonic_calls
from beam_sft.convert.rows import Rejection
from beam_sft.reject_codes import REASON_CODES
from tests.convert import test_bedrock, test_chat_log, test_gemini, test_glaive

pytestmark = pytest.mark.fuzz

ROWS = [test_glaive.ROW, test_glaive.NO_FUNCTIONS, test_gemini.ROW, test_gemini.THOUGHTS, test_bedrock.ROW,
        test_chat_log.OPENAI, test_chat_log.PROXY]
HOSTILE = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20), st.sampled_from(["<|endoftext|>", "<functioncall> {'name'", "[f(x=1)]", "USER:", "{",
                                           "ASSISTANT: <functioncall> {\"name\": \"f\", \"arguments\": '"]),
    st.lists(st.none() | st.integers() | st.text(max_size=4), max_size=3),
    st.dictionaries(st.sampled_from(["text", "role", "toolUse", "functionCall", "parts", "content", "name"]),
                    st.none() | st.text(max_size=4) | st.integers(), max_size=3))


def _places(value, path=()):
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _places(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _places(item, (*path, i))


def _replace(row, path, new):
    row = copy.deepcopy(row)
    if not path:
        return new
    node = row
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new
    return row


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), pythonic=st.booleans())
def test_a_hostile_value_anywhere_is_kept_or_rejected_with_a_code(data, pythonic):
    row = data.draw(st.sampled_from(ROWS))
    path = data.draw(st.sampled_from(list(_places(row))))
    hostile = _replace(row, path, data.draw(HOSTILE))
    options = ConvertOptions(pythonic_tool_calls=pythonic, missing_reasoning="unmask")
    result = convert_row(hostile, format="auto", options=options)
    if isinstance(result, Rejection):
        assert result.code in REASON_CODES and result.code != "converter_error", result.message
    for fmt in ("glaive", "gemini", "bedrock", "chat_log"):  # read by a reader it was not meant for, too
        other = convert_row(hostile, format=fmt, options=options)
        assert not isinstance(other, Rejection) or other.code != "converter_error", (fmt, other.message)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("[](),=' \"abcx0123._*{}:\\\n")), max_size=60))
def test_the_pythonic_parser_never_raises(text):
    parsed = parse_pythonic_calls(text)
    if parsed is not None:
        said, calls = parsed
        assert text.startswith(said) and calls and all(isinstance(c["function"]["arguments"], dict) for c in calls)
