"""The pairs reader on rows shaped as LDJnr/Capybara's (``conversation`` of ``input``/``output``) and
the Firefly format's (``conversation`` of ``human``/``assistant``, with a ``system`` column): the exact
rows they become, and each near miss rejected with its code and the pair's place."""

from __future__ import annotations

import pytest

from beam_sft.convert import ColumnMap, ConvertOptions, Rejection, convert_row
from beam_sft.convert.detect import classify
from beam_sft.convert.pairs import convert_pairs
from tests.convert.readers_util import codes, run_source, write_jsonl

UNMASK = ConvertOptions(missing_reasoning="unmask")
CAPYBARA = {"source": "GPT4LLM", "conversation": [
    {"input": "What is 1+1?", "output": "2"},
    {"input": "And 2+2?", "output": "<think>Add two.</think>4"}]}
FIREFLY = {"conversation_id": 7, "category": "Brainstorming", "system": "Be brief.", "conversation": [
    {"human": "Name a color.", "assistant": "<think>Any will do.</think>Red."}]}
PAIRS = CAPYBARA["conversation"]


def _convert(raw, options=UNMASK, format="auto"):
    return convert_row(raw, format=format, options=options, source="s.jsonl", row=3)


def test_a_capybara_row_is_its_turns_in_order():
    row = _convert(CAPYBARA)
    assert row == {"messages": [
        {"role": "user", "content": "What is 1+1?"},
        {"role": "assistant", "content": "2", "weight": 0},  # no reasoning: unmasked to context
        {"role": "user", "content": "And 2+2?"},
        {"role": "assistant", "reasoning_content": "Add two.", "content": "4"}],
        "meta": {"source": "s.jsonl", "row": 3, "notes": {"pairs:conversation(input+output)": 1}}}


def test_a_firefly_row_with_its_system_column():
    row = _convert(FIREFLY, options=ConvertOptions())
    assert row == {"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Name a color."},
        {"role": "assistant", "reasoning_content": "Any will do.", "content": "Red."}],
        "meta": {"source": "s.jsonl", "row": 3, "notes": {"pairs:conversation(human+assistant)": 1}}}


def test_the_missing_reasoning_policy_applies_as_to_an_openai_row():
    rejected = _convert(CAPYBARA, options=ConvertOptions(missing_reasoning="drop"))
    assert rejected.code == "missing_reasoning" and "conversation[0].output" in rejected.message
    reversed_turns = {"conversation": PAIRS[::-1]}  # the reasoned turn first: the bare one after it is cut
    cut = _convert(reversed_turns, options=ConvertOptions(missing_reasoning="truncate"))
    assert cut["messages"] == [{"role": "user", "content": "And 2+2?"},
                               {"role": "assistant", "reasoning_content": "Add two.", "content": "4"}]


def test_the_list_under_conversations_and_a_mapped_key():
    row = _convert({"conversations": CAPYBARA["conversation"]})
    assert row["meta"]["notes"] == {"pairs:conversations(input+output)": 1}
    mapped = ConvertOptions(missing_reasoning="unmask", columns=ColumnMap(conversations="dialog"))
    row = _convert({"dialog": CAPYBARA["conversation"]}, options=mapped)
    assert row["messages"][3]["content"] == "4" and row["meta"]["notes"] == {"pairs:dialog(input+output)": 1}


def test_a_pairs_other_keys_are_its_answers_read_as_on_an_openai_message():
    row = _convert({"conversation": [
        {"input": "q", "output": "a", "reasoning": "Think.", "turn": 1},  # reasoning read, `turn` ignored
        {"input": "q2", "output": "b", "thinking": "More.", "weight": 0}]})
    assert row["messages"] == [
        {"role": "user", "content": "q"}, {"role": "assistant", "reasoning_content": "Think.", "content": "a"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "reasoning_content": "More.", "content": "b", "weight": 0}]


def _with(i: int, item) -> dict:
    items = list(PAIRS)
    items[i] = item
    return {"source": "x", "conversation": items}


@pytest.mark.parametrize("raw, code, message", [
    (_with(1, {"input": "And 2+2?"}), "missing_content", "conversation[1].output is missing (keys: 'input')"),
    (_with(1, {"input": "And 2+2?", "output": None}), "missing_content", "conversation[1].output is null"),
    (_with(1, {"output": "4", "input": None}), "missing_content", "conversation[1].input is null"),
    (_with(1, {"input": 5, "output": "4"}), "malformed_row", "conversation[1].input is a int, not text"),
    (_with(1, {"input": "q", "output": [{"type": "text", "text": "4"}]}), "malformed_row",
     "conversation[1].output is a list, not text"),
    (_with(1, "And 2+2?"), "malformed_row", "conversation[1] is a str, not an input/output pair"),
    (_with(1, {"role": "user", "content": "And 2+2?"}), "malformed_row", "conversation[1] has 'role'"),
    (_with(1, {"from": "human", "value": "And 2+2?"}), "malformed_row", "conversation[1] has 'from'"),
    # the spelling is the list's (its first pair's): another spelling later is that pair's missing keys
    (_with(1, {"human": "And 2+2?", "assistant": "4"}), "missing_content", "conversation[1].input is missing"),
    (_with(1, {"input": "q", "output": "<think>open"}), "unclosed_reasoning_tag", "conversation[1].output:"),
    (_with(1, {"input": "q", "output": "<think>a</think>4", "reasoning": "b"}), "conflicting_reasoning",
     "conversation[1].output:"),
    (_with(1, {"input": "q", "output": ""}), "empty_assistant", "conversation[1].output has neither"),
    (_with(1, {"input": "q", "output": "4", "weight": 3}), "bad_weight", "is 3, not 0/1"),
    (_with(1, {"input": "<|start|>", "output": "4"}), "harmony_marker_in_text", "conversation[1].input"),
    ({**CAPYBARA, "system": 3}, "malformed_row", "'system' is not a string"),
    ({**CAPYBARA, "conversations": PAIRS}, "conflicting_carriers", "conversations and conversation"),
    ({**CAPYBARA, "messages": [{"role": "user", "content": "q"}]}, "conflicting_carriers",
     "messages and conversation"),
    ({**CAPYBARA, "conversations": [{"from": "human", "value": "q"}]}, "conflicting_carriers",
     "conversations and conversation"),
    ({**CAPYBARA, "instruction": "q", "output": "a"}, "conflicting_carriers", "conversation and instruction/output"),
])
def test_near_misses_are_rejected_with_their_code_and_place(raw, code, message):
    result = _convert(raw)
    assert isinstance(result, Rejection) and (result.code, result.source, result.row) == (code, "s.jsonl", 3)
    assert message in result.message and "\n" not in result.message


def test_read_as_pairs_a_row_without_a_pair_list_says_what_it_holds():
    for raw, message in [
        ({"source": "x", "conversation": []}, "'conversation' is an empty list"),
        ({"conversation": "What is 1+1?"}, "'conversation' is a str, not a list"),
        ({"conversation": [{"input": "q"}]}, "'conversation' is a list with no input/output or human/assistant pair"),
        ({"dialog": PAIRS}, "no 'conversation' or 'conversations' list of pairs in the row (keys found: 'dialog')"),
        ([PAIRS], "a row is a list, not an object"),
    ]:
        result = _convert(raw, format="pairs")
        assert (result.code, message in result.message) == ("malformed_row", True), result.message
    both = convert_pairs({"conversation": PAIRS, "conversations": PAIRS}, options=UNMASK)  # the reader alone
    assert both.code == "conflicting_carriers" and "'conversation' and 'conversations'" in both.message


@pytest.mark.parametrize("raw, expected", [
    (CAPYBARA, "pairs"),
    (FIREFLY, "pairs"),
    ({"conversations": PAIRS}, "pairs"),
    ({"conversation": [{"input": "q"}, {"input": "q2", "output": "a"}]}, "pairs"),  # named in its rejection
    # LMSYS-Chat-1M and WildChat keep OpenAI messages under `conversation`: not pairs
    ({"conversation": [{"role": "user", "content": "hi"}]}, "openai"),
    # ShareGPT turns with stray input/output keys stay ShareGPT's
    ({"conversations": [{"from": "human", "value": "hi", "input": "x", "output": "y"}]}, "sharegpt"),
    # a code set's test cases are not a conversation: no other key is guessed
    ({"instruction": "Write f.", "output": "def f(): ...", "tests": [{"input": "1", "output": "2"}]}, "alpaca"),
    ({"conversation": []}, None),
])
def test_classify(raw, expected):
    assert classify(raw, ColumnMap()) == expected


def test_format_auto_on_a_file_of_pair_rows(tmp_path):
    path = write_jsonl(tmp_path / "capybara.jsonl", [CAPYBARA, FIREFLY, _with(1, {"input": "q"})])
    results, conversion = run_source(path, fill=None, missing_reasoning="unmask")
    assert conversion.format == "pairs" and conversion.detection.startswith("pairs: 3 of 3 sampled rows")
    assert codes(results) == ["kept", "kept", "missing_content"]
    assert dict(conversion.summary.formats) == {"pairs": 3}
    assert dict(conversion.summary.notes) == {"pairs:conversation(input+output)": 1,
                                              "pairs:conversation(human+assistant)": 1}
