"""``validate._rendered_strings`` (the no-path join the marker and added-token rules search first)
holds exactly the strings ``iter_rendered_text`` yields, so a search that misses the join misses
every text: the fast path can never let a forbidden text through."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from beam_sft.convert.options import ConvertOptions
from beam_sft.convert.validate import _markers, _rendered_strings, _special_tokens, iter_rendered_text

TEXT = st.lists(st.sampled_from(list("ab <|>x\n") + ["<|start|>", "<tok>", "é"]), max_size=6).map("".join)
VALUE = st.recursive(st.none() | st.integers() | TEXT,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                     max_leaves=12)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system"]), "content": TEXT},
    optional={"reasoning_content": TEXT, "name": TEXT, "tool_call_id": TEXT, "weight": st.integers(0, 1),
              "extra": VALUE,
              "tool_calls": st.lists(st.fixed_dictionaries({"id": TEXT, "function": st.fixed_dictionaries(
                  {"name": TEXT, "arguments": VALUE})}), max_size=2)})
ROW = st.fixed_dictionaries({"messages": st.lists(MESSAGE, min_size=1, max_size=4)},
                            optional={"tools": VALUE, "chat_template_kwargs": VALUE})


@settings(max_examples=300, deadline=None)
@given(ROW)
def test_join_holds_exactly_the_rendered_texts(row):
    assert sorted(_rendered_strings(row).split("\0")) == sorted(
        [text for _, text in iter_rendered_text(row)] or [""])


@settings(max_examples=300, deadline=None)
@given(ROW)
def test_fast_rules_agree_with_the_path_walk(row):
    options = ConvertOptions(forbidden_tokens=("<tok>",))
    slow_marker = next((p for p, t in iter_rendered_text(row) if "<|start|>" in t), None)
    slow_token = next((p for p, t in iter_rendered_text(row) if "<tok>" in t), None)
    marker = _markers(row, options)
    token = _special_tokens(row, options)
    assert (marker is None) == (slow_marker is None)
    assert (token is None) == (slow_token is None)
    if marker is not None:
        assert slow_marker in marker[1]
    if token is not None:
        assert slow_token in token[1]
