"""Property: whatever reasoning markup an assistant text holds, at any position (prefix
text, several blocks, stray or nested tags, tool calls inside or beside blocks), no kept row has
that markup in a trained field, nor in the trained tokens the chat template renders for it.

The rendered check goes through ``apply_chat_template(..., return_assistant_tokens_mask=True)``
on the fixture tokenizer: the reference path the encoder is proven against.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_sft.convert import ConvertOptions, Rejection, convert_row
from beam_sft.convert.reasoning import REASONING_MARKUP, REASONING_TAGS
from beam_sft.convert.validate import TOOL_CALL_MARKUP
from beam_sft.verify.invariants import REASONING_MARKUP as VERIFY_MARKUP

F = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
CALL_F = '<tool_call>{"name": "f", "arguments": {}}</tool_call>'
WORDS = ["A: ", "plan", " ", "\n", "answer.", "Done", "\n\n"]
BODIES = ["plan", "", " step ", "a <think> b", CALL_F, "x</thinking>y", "\n"]



def _spelled(tag: str, upper: bool, pad: str) -> str:
    """A tag as written in the wild: ``<THINK>``, ``< /think >`` (verify's reasoning_markup rule finds
    these; a converter that knew only ``<think>`` kept them, and the run then failed verification)."""
    name = tag.strip("</>")
    name = name.upper() if upper else name
    return f"<{pad}/{pad}{name}{pad}>" if tag.startswith("</") else f"<{pad}{name}{pad}>"


spelling = st.tuples(st.booleans(), st.sampled_from(["", "", " ", "  "]))
spelled_pair = st.builds(lambda pair, how: (_spelled(pair[0], *how), _spelled(pair[1], *how)),
                         st.sampled_from(REASONING_TAGS), spelling)
block = st.builds(lambda pair, body: pair[0] + body + pair[1], st.one_of(st.sampled_from(REASONING_TAGS), spelled_pair),
                  st.sampled_from(BODIES))
piece = st.one_of(st.sampled_from(WORDS), st.sampled_from(REASONING_MARKUP),
                  st.builds(_spelled, st.sampled_from(REASONING_MARKUP), *(st.just(x) for x in (True, " "))),
                  block, st.just(CALL_F))
marked_text = st.lists(piece, min_size=1, max_size=6).map("".join).filter(lambda t: VERIFY_MARKUP.search(t))

OPTION_SETS = [
    ConvertOptions(),
    ConvertOptions(text_after_tool_call="drop"),
    ConvertOptions(tool_call_content="reject"),
    ConvertOptions(missing_reasoning="unmask"),
]


def _rows(text: str, where: str) -> list[tuple[str, dict]]:
    """The text as an assistant turn in each reader's shape, in the field ``where`` names."""
    user = {"role": "user", "content": "q"}
    if where == "content":
        assistant = {"role": "assistant", "content": text}
    elif where == "reasoning":
        assistant = {"role": "assistant", "reasoning_content": text, "content": "a"}
    else:  # a tool-call argument value
        assistant = {"role": "assistant", "reasoning_content": "r", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": json.dumps({"x": text})}}]}
    messages = [user, assistant] + ([{"role": "tool", "tool_call_id": "c", "content": "ok"}]
                                    if where == "argument" else [])
    openai = {"messages": messages, "tools": [F]}
    share_turn = {"from": "gpt", "value": assistant.get("content", "")}
    if "reasoning_content" in assistant:
        share_turn["reasoning_content"] = assistant["reasoning_content"]
    sharegpt = {"conversations": [{"from": "human", "value": "q"}, share_turn], "tools": [F]}
    out = [("auto", openai), ("openai", openai), ("hermes", openai)]
    if where != "argument":
        out += [("sharegpt", sharegpt), ("auto", sharegpt)]
    return out


def _trained_strings(row: dict):
    for msg in row["messages"]:
        if msg["role"] != "assistant" or msg.get("weight", 1) == 0:
            continue
        for key in ("content", "reasoning_content"):
            if msg.get(key):
                yield msg[key]
        for call in msg.get("tool_calls") or []:
            yield json.dumps(call["function"], ensure_ascii=False)


def _kept(text: str, where: str, options: ConvertOptions) -> list[dict]:
    kept = []
    for fmt, raw in _rows(text, where):
        result = convert_row(raw, format=fmt, options=options)
        if not isinstance(result, Rejection):
            kept.append(result)
    return kept


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


@PROPERTY
@given(text=marked_text, where=st.sampled_from(["content", "reasoning", "argument"]),
       which=st.integers(0, len(OPTION_SETS) - 1))
def test_no_kept_row_trains_reasoning_markup_in_any_field(text, where, which):
    for row in _kept(text, where, OPTION_SETS[which]):
        for value in _trained_strings(row):
            assert not VERIFY_MARKUP.search(value), (text, row)
        for msg in row["messages"]:
            if msg["role"] == "assistant" and msg.get("weight", 1):
                for key in ("content", "reasoning_content"):
                    assert not any(tag in (msg.get(key) or "") for tag in TOOL_CALL_MARKUP), (text, row)


def test_the_generator_reaches_kept_rows_and_rejections():
    """The property is not vacuous: marked texts are kept (markup read away) and rejected."""
    assert _kept("<think>plan</think>answer.", "content", ConvertOptions())
    assert _kept("A: <think>plan</think>" + CALL_F, "content", ConvertOptions())
    assert not _kept("answer.<think>plan</think>", "content", ConvertOptions())
    assert _kept("<THINK>plan</THINK>answer.", "content", ConvertOptions())


def test_tags_in_any_case_and_spacing_are_read_as_tags_never_trained():
    (row,) = _kept("< Think >plan</THINK >\n\nanswer.", "content", ConvertOptions())[:1]
    assistant = row["messages"][1]
    assert (assistant["reasoning_content"], assistant["content"]) == ("plan", "answer.")
    # beside a reasoning field, tags left in the text are refused per row (they reached verify, which
    # failed the whole run on them)
    for text in ("r <Thinking>x</Thinking>", "</ REASONING>"):
        assert not _kept(text, "reasoning", ConvertOptions())
        result = convert_row({"messages": [{"role": "user", "content": "q"},
                                           {"role": "assistant", "reasoning_content": text, "content": "a"}]},
                             format="openai", options=ConvertOptions())
        assert isinstance(result, Rejection) and result.code == "reasoning_markup_in_text", result


def test_converter_and_verify_agree_on_what_a_tag_is():
    from beam_sft.convert.reasoning import find_reasoning_markup

    samples = ["<think>", "</THINK>", "< thinking >", "</ Reasoning\t>", "<think\n>", "<thinks>", "<thin k>",
               "think", "<reasoner>", "< / think >"]
    found = [text for text in samples if VERIFY_MARKUP.search(text)]
    assert len(found) == 5  # what verify fails a run on, the converter must see (it may see more)
    for text in found:
        assert find_reasoning_markup(text), text


@pytest.fixture(scope="module")
def trained_text(tokenizer):
    def render(row: dict) -> str:
        out = tokenizer.apply_chat_template(row["messages"], tools=row.get("tools"), tokenize=True,
                                            return_dict=True, return_assistant_tokens_mask=True,
                                            **(row.get("chat_template_kwargs") or {}))
        ids = [i for i, m in zip(out["input_ids"], out["assistant_masks"], strict=True) if m]
        return tokenizer.decode(ids)

    return render


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=marked_text, where=st.sampled_from(["content", "reasoning", "argument"]))
def test_no_kept_row_renders_reasoning_markup_into_trained_tokens(trained_text, text, where):
    for row in _kept(text, where, ConvertOptions(text_after_tool_call="drop")):
        rendered = trained_text(row)
        assert "<|channel|>" in rendered  # the mask covered the assistant turn
        assert not VERIFY_MARKUP.search(rendered), (text, rendered)


def test_known_marked_rows_render_without_markup(trained_text):
    rows = _kept("A: <think>plan</think>" + CALL_F, "content", ConvertOptions())
    rows += _kept("<thinking>plan</thinking>\nanswer.", "content", ConvertOptions())
    assert len(rows) >= 3
    for row in rows:
        rendered = trained_text(row)
        assert "plan" in rendered and not any(tag in rendered for tag in REASONING_MARKUP), rendered
