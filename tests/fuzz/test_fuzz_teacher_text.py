"""Fuzz tier: what a row, a cache file or a judge supplies to ``reason``, generated.

- the prompt: placeholders, headers, labels and every line break inside every row field never
  expand nor forge a header (``beam_sft.reason.prompt``), at many more examples than the default tier;
- the answer cache: any JSON value as an entry is a miss or a well-typed answer, never an exception;
- a judge's reply: a verdict exactly when its first line is ``VERDICT: yes|no`` and a reason follows;
- the consistency check: any text and any ``tools``/``tool_calls`` shapes, never an exception.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_sft.reason.cache import parse_entry
from beam_sft.reason.consistency import check_consistency
from beam_sft.reason.judge import Unparseable, parse_verdict
from tests.reason import test_prompt

pytestmark = pytest.mark.fuzz

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                  max_size=5), max_leaves=12)


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(fields=st.tuples(*[test_prompt._TEXT] * 9), turn=st.sampled_from([2, 4]))
def test_fuzz_prompt_row_text_never_expands_nor_forges(fields, turn):
    test_prompt.test_property_row_text_never_expands_nor_forges_headers.hypothesis.inner_test(fields, turn)


@settings(max_examples=1000, deadline=None)
@given(entry=_JSON | st.fixed_dictionaries({"text": _JSON, "finish_reason": _JSON, "tokens": _JSON},
                                           optional={"origin": _JSON}))
def test_fuzz_cache_entry_is_a_miss_or_well_typed(entry):
    parsed = parse_entry(entry)
    if parsed is not None:
        c = parsed.completion
        assert isinstance(c.text, str) and (c.finish_reason is None or isinstance(c.finish_reason, str))
        assert type(c.tokens) is int and c.tokens >= 0


@settings(max_examples=1000, deadline=None)
@given(head=st.sampled_from(["VERDICT: yes", "VERDICT: no", "Verdict: yes", "VERDICT:yes", "VERDICT: yes.",
                             " VERDICT: no", "VERDICT: maybe", ""]),
       tail=st.text(max_size=40), finish=st.sampled_from(["stop", "length", None]))
def test_fuzz_a_verdict_only_in_the_strict_format(head, tail, finish):
    text = head + tail
    try:
        verdict, reason = parse_verdict(text, finish)
    except Unparseable:
        return
    first, _, rest = text.partition("\n")
    assert finish != "length" and first.rstrip(" \t\r") == f"VERDICT: {verdict}" and verdict in ("yes", "no")
    assert reason and reason == rest.strip()[:500]


@settings(max_examples=1000, deadline=None)
@given(text=st.text(max_size=60), tools=_JSON, message=_JSON)
def test_fuzz_consistency_never_raises(text, tools, message):
    problem = check_consistency(text, message if isinstance(message, dict) else {}, tools)
    assert problem is None or problem[0] == "teacher_inconsistent"
