"""Reasoning carriers, the whitespace rules, and the missing-reasoning policies."""

from __future__ import annotations

import pytest

from beam_sft.convert import ConvertOptions, Rejection, convert_row
from beam_sft.convert.openai import convert_openai
from beam_sft.convert.policy import apply_missing_reasoning
from beam_sft.convert.reasoning import split_inline_reasoning, strip_answer_tags

OPTIONS = ConvertOptions(require_declared_tools=False)


def assistant(**fields):
    row = convert_openai(
        {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", **fields}]}, options=OPTIONS
    )
    return row if isinstance(row, Rejection) else row["messages"][1]


@pytest.mark.parametrize(
    "fields",
    [
        {"reasoning_content": "R", "content": "A"},
        {"reasoning": "R", "content": "A"},
        {"thinking": "R", "content": "A"},
        {"content": "<think>R</think>A"},
        {"content": "<think>\nR\n</think>\n\nA"},
        {"content": "  <reasoning>\n R \n</reasoning>  A  "},
        {"content": "R</think>\n\nA"},
        {"content": "R\n</think>A"},
        {"content": [{"type": "reasoning", "text": "R"}, {"type": "text", "text": "A"}]},
        {"reasoning_content": "R", "content": "<think>\nR\n</think>A"},
    ],
)
def test_every_carrier_gives_the_same_turn(fields):
    assert assistant(**fields) == {"role": "assistant", "reasoning_content": "R", "content": "A"}


@pytest.mark.parametrize("content, reasoning, answer", [
    ("R\n</think>\n\nA", "R", "A"),  # DeepSeek-R1 / Qwen3: the opening tag was in the prompt
    ("R\n</think>A", "R", "A"),
    ("R</think>\nA", "R", "A"),
    ("</think>A", None, "A"),  # nothing before it: an empty reasoning carried over
    ("R  \t</think>\r\nA", "R", "A"),
])
def test_a_leading_closing_tag_at_a_lines_edge_ends_prompt_opened_reasoning(content, reasoning, answer):
    turn = assistant(content=content)
    assert not isinstance(turn, Rejection), turn
    assert (turn.get("reasoning_content"), turn["content"]) == (reasoning, answer)


@pytest.mark.parametrize("content", [
    "Write the closing tag </think> at the end of the block.",
    "Use </thinking> to close, then answer.",
    "A stray </reasoning>tag in a line.",
])
@pytest.mark.parametrize("shape", ["openai", "sharegpt"])
def test_a_closing_tag_inside_a_line_is_markup_not_the_end_of_reasoning(content, shape):
    """The text talks about the tag: half the answer must not become reasoning (found in a review:
    the row was kept with "Write the closing tag" as its reasoning)."""
    raw = ({"messages": [{"role": "user", "content": "How do I end it?"}, {"role": "assistant", "content": content}]}
           if shape == "openai" else
           {"conversations": [{"from": "human", "value": "How do I end it?"}, {"from": "gpt", "value": content}]})
    out = convert_row(raw, format=shape, options=OPTIONS)
    assert isinstance(out, Rejection) and out.code == "reasoning_markup_in_text", out


def test_field_reasoning_is_kept_byte_for_byte_inline_is_stripped():
    assert assistant(reasoning_content="\n R \n", content=" A\n")["reasoning_content"] == "\n R \n"
    assert assistant(reasoning_content="\n R \n", content=" A\n")["content"] == " A\n"
    assert assistant(content="<think>\n  R  \n</think>\n A \n") == {
        "role": "assistant",
        "reasoning_content": "R",
        "content": "A",
    }


def test_whitespace_only_reasoning_is_absent():
    assert assistant(reasoning_content=" \n", content="A") == {"role": "assistant", "content": "A"}
    assert assistant(content="<think>\n\n</think>\n\nA") == {"role": "assistant", "content": "A"}


@pytest.mark.parametrize(
    "fields, expected",
    [
        ({"reasoning_content": "x", "thinking": "y", "content": "A"}, "conflicting_reasoning"),
        ({"reasoning_content": "x", "content": "<think>y</think>A"}, "conflicting_reasoning"),
        ({"content": "<think>a</think>b<think>c</think>d"}, "interleaved_reasoning"),
        ({"content": "<think>a</think>b</think>"}, "interleaved_reasoning"),
        ({"content": "<think>never closed"}, "unclosed_reasoning_tag"),
        (
            {"content": [{"type": "text", "text": "A"}, {"type": "reasoning", "text": "late"}]},
            "interleaved_reasoning",
        ),
        ({"reasoning_content": 3, "content": "A"}, "malformed_row"),
    ],
)
def test_reasoning_that_cannot_be_one_analysis_message(fields, expected):
    assert assistant(**fields).code == expected


def test_a_tag_later_in_the_answer_is_never_trained_text():
    """Reasoning tags anywhere are read; what cannot be one analysis block is rejected."""
    with pytest.raises(Rejection) as info:
        split_inline_reasoning("Use <think> tags like <think>this</think>.")
    assert info.value.code == "interleaved_reasoning"
    assert assistant(content="Plain answer, <think> mentioned later").code == "unclosed_reasoning_tag"
    assert assistant(content="Answer first.<think>late</think>").code == "interleaved_reasoning"


def test_answer_tags():
    assert assistant(content="<think>R</think>\n<answer>\n42\n</answer>")["content"] == "42"
    kept = convert_openai(
        {
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "<think>R</think><answer>42</answer>"},
            ]
        },
        options=ConvertOptions(strip_answer_tags=False),
    )
    assert kept["messages"][1]["content"] == "<answer>42</answer>"
    assert strip_answer_tags("<answer>a</answer><answer>b</answer>") == "<answer>a</answer><answer>b</answer>"


def test_reject_is_internal():
    with pytest.raises(Rejection):
        split_inline_reasoning("<think>")


# --- policies -------------------------------------------------------------------------------


def _row(*turns):
    messages = []
    for i, reasoning in enumerate(turns):
        messages.append({"role": "user", "content": f"q{i}"})
        msg = {"role": "assistant", "content": f"a{i}"}
        if reasoning:
            msg["reasoning_content"] = reasoning
        messages.append(msg)
    return {"messages": messages}


def test_drop_rejects_and_names_the_turn():
    result = convert_row(_row("r", None), format="openai", options=ConvertOptions())
    assert result.code == "missing_reasoning" and "messages[3]" in result.message


def test_truncate_keeps_up_to_the_last_reasoned_turn_before_the_first_gap():
    row = apply_missing_reasoning(_row("r0", "r1", None, "r3"), "truncate")
    assert [m["content"] for m in row["messages"]] == ["q0", "a0", "q1", "a1"]
    assert (
        convert_row(
            _row(None, "r1"), format="openai", options=ConvertOptions(missing_reasoning="truncate")
        ).code
        == "no_trained_turn"
    )


def test_unmask_keeps_turns_as_context():
    result = convert_row(
        _row(None, "r1"), format="openai", options=ConvertOptions(missing_reasoning="unmask")
    )
    assert result["messages"][1] == {"role": "assistant", "content": "a0", "weight": 0}
    assert result["messages"][3] == {"role": "assistant", "reasoning_content": "r1", "content": "a1"}
    assert (
        convert_row(_row(None), format="openai", options=ConvertOptions(missing_reasoning="unmask")).code
        == "no_trained_turn"
    )


def test_weight_zero_turns_need_no_reasoning():
    row = _row(None, "r1")
    row["messages"][1]["weight"] = 0
    assert not isinstance(convert_row(row, format="openai", options=ConvertOptions()), Rejection)


def test_policies_leave_their_input_alone():
    row = _row(None, "r1")
    before = repr(row)
    apply_missing_reasoning(row, "unmask")
    apply_missing_reasoning(row, "truncate")
    assert repr(row) == before


# OpenThoughts-114k / Bespoke-Stratos-17k / Sky-T1 write an assistant turn as below (the layout of
# open-thoughts/OpenThoughts-114k's `conversations[1].value`, text shortened): before, the markers were
# not reasoning tags, so the thought went into the trained answer with its markers, and the row was
# counted as one without reasoning.
OPEN_THOUGHTS = ("<|begin_of_thought|>\n\nOkay, subtract one from both sides.\n\n<|end_of_thought|>\n\n"
                 "<|begin_of_solution|>\n\nThe solution is $x = 1$.\n\n<|end_of_solution|>")


def test_open_thoughts_markers_are_reasoning_and_the_solution_is_the_answer():
    from beam_sft.convert.sharegpt import convert_sharegpt

    row = convert_sharegpt({"system": "Think first.", "conversations": [
        {"from": "user", "value": "Solve x+1=2"}, {"from": "assistant", "value": OPEN_THOUGHTS}]},
        options=ConvertOptions())
    assert row["messages"][-1] == {"role": "assistant", "reasoning_content": "Okay, subtract one from both sides.",
                                   "content": "The solution is $x = 1$."}


@pytest.mark.parametrize(("content", "code"), [
    ("<|begin_of_thought|>\n\nnever closed", "unclosed_reasoning_tag"),
    ("<|BEGIN_OF_THOUGHT|>a<think>b</think><|end_of_thought|>c", "interleaved_reasoning"),
    ("the marker <|end_of_thought|> inside a line", "reasoning_markup_in_text"),
    ("answer first <| begin_of_thought |>plan<|end_of_thought|>", "interleaved_reasoning"),
])
def test_open_thoughts_markers_misplaced_are_refused(content, code):
    with pytest.raises(Rejection) as err:
        split_inline_reasoning(content)
    assert err.value.code == code


def test_a_stray_thought_marker_in_trained_text_is_refused_by_validate_and_verify():
    from beam_sft.convert.reasoning import find_reasoning_markup
    from beam_sft.verify.invariants import REASONING_MARKUP

    for text in ("<|end_of_thought|>", "<| Begin_of_Thought |>"):
        assert find_reasoning_markup(f"a {text} b") == text
        assert REASONING_MARKUP.search(f"a {text} b").group(0) == text
    assert find_reasoning_markup("<|begin_of_solution|>") is None  # an answer wrapper, not reasoning


def test_solution_markers_are_stripped_only_around_a_whole_answer():
    assert strip_answer_tags("<|begin_of_solution|>\n42\n<|end_of_solution|>") == "42"
    kept = "<|begin_of_solution|>1<|end_of_solution|> and 2"
    assert strip_answer_tags(kept) == kept
    assert strip_answer_tags("<|begin_of_solution|><|end_of_solution|>") == ""
