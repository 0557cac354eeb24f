"""The eight defects found on public datasets, each with its own row, in every
reader they can occur in, plus the "Also" items that belong to the converters."""

from __future__ import annotations

import json

import pytest

from beam_sft.convert import ConvertOptions, Rejection, SourceConversion, convert_files, convert_row
from beam_sft.convert.harmony_text import convert_harmony
from beam_sft.convert.hermes import convert_hermes
from beam_sft.convert.openai import convert_openai
from beam_sft.convert.sharegpt import convert_sharegpt
from beam_sft.data.rejects import sources_table

F = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
CALL_F = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
OPTIONS = ConvertOptions()
LOOSE = ConvertOptions(require_declared_tools=False)


def code(result):
    return result.code if isinstance(result, Rejection) else None


def auto(raw, options=OPTIONS):
    return convert_row(raw, format="auto", options=options, source="s.jsonl", row=0)


# --- 1. reasoning tags anywhere -------------------------------------------------------------


ISSUE_1 = {
    "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "A: <think>plan</think>\n" + CALL_F},
    ],
    "tools": [F],
}


@pytest.mark.parametrize("read", [convert_hermes, lambda raw, options: auto(raw, options)])
def test_1_a_think_block_after_prefix_text_is_reasoning_not_trained_markup(read):
    row = read(ISSUE_1, options=OPTIONS)
    turn = row["messages"][1]
    assert turn["tool_calls"][0]["function"] == {"name": "f", "arguments": {}}
    assert "<think>" not in turn["reasoning_content"] and "</think>" not in turn["reasoning_content"]
    # Everything said before the call is analysis, in the order it was said.
    assert turn["reasoning_content"] == "A:\n\nplan"


def test_1_the_openai_reader_never_trains_tool_call_markup():
    assert isinstance(convert_row(ISSUE_1, format="openai", options=OPTIONS), Rejection)
    plain = {**ISSUE_1, "messages": [ISSUE_1["messages"][0], {"role": "assistant", "content": "<think>plan</think>" + CALL_F}]}
    assert code(convert_row(plain, format="openai", options=OPTIONS)) == "tool_call_markup_in_text"
    share = {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "<think>p</think>" + CALL_F}]}
    assert code(convert_row(share, format="sharegpt", options=OPTIONS)) == "tool_call_markup_in_text"


@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "hermes"])
def test_1_markup_that_cannot_be_placed_is_a_rejection_in_every_reader(fmt):
    texts = ["Answer. <think>late</think>", "x <think>a</think> y", "<think>a</think>b</think>",
             "open <think> only", "<thinking>a</think>"]
    for text in texts:
        if fmt == "sharegpt":
            raw = {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": text}]}
        else:
            raw = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": text}]}
        result = convert_row(raw, format=fmt, options=OPTIONS)
        assert isinstance(result, Rejection), (fmt, text, result)
        assert result.code in ("interleaved_reasoning", "unclosed_reasoning_tag"), (fmt, text, result)


def test_1_markup_in_an_explicit_reasoning_field_or_the_harmony_reader_is_caught_by_validation():
    raw = {"messages": [{"role": "user", "content": "q"},
                        {"role": "assistant", "reasoning_content": "<think>r</think>", "content": "a"}]}
    assert code(convert_row(raw, format="openai", options=OPTIONS)) == "reasoning_markup_in_text"
    harmony = ("<|start|>user<|message|>q<|end|><|start|>assistant<|channel|>analysis<|message|>"
               "<thinking>r</thinking><|end|><|start|>assistant<|channel|>final<|message|>a<|return|>")
    assert code(convert_row(harmony, format="harmony", options=OPTIONS)) == "reasoning_markup_in_text"
    # A weight-0 turn is context, not trained: validation leaves its fields alone.
    raw["messages"][1].update(weight=0)
    raw["messages"] += [{"role": "user", "content": "q"},
                        {"role": "assistant", "reasoning_content": "r", "content": "a"}]
    assert not isinstance(convert_row(raw, format="openai", options=OPTIONS), Rejection)


# --- 2. one format per row ------------------------------------------------------------------


ISSUE_2 = [
    {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<think>greet</think>hello"}]},
    {"messages": [
        {"role": "system", "content": '<tools>[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}]</tools>'},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": '<think>call f</think><tool_call>{"name": "f", "arguments": {}}</tool_call>'},
    ]},
]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_2_each_row_is_read_by_its_own_format_and_counted(tmp_path):
    src = _write(tmp_path / "merged.jsonl", ISSUE_2)
    conversion = SourceConversion(src, options=OPTIONS)
    results = list(conversion)
    assert [code(r) for r in results] == [None, None], results
    call_turn = results[1]["messages"][-1]
    assert call_turn["tool_calls"][0]["function"]["name"] == "f" and "content" not in call_turn
    assert call_turn["reasoning_content"] == "call f"
    assert dict(conversion.summary.formats) == {"openai": 1, "hermes": 1}
    report = convert_files([src], output=tmp_path / "o.jsonl")
    assert "hermes=1 openai=1" in report.table()
    assert report.to_json()["sources"][0]["formats"] == {"hermes": 1, "openai": 1}


def test_2_a_directory_reports_each_file_and_names_it_in_meta(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    _write(d / "a.jsonl", ISSUE_2[:1] * 2)
    _write(d / "b.jsonl", ISSUE_2[1:] * 3)
    out = tmp_path / "rows.jsonl"
    report = convert_files([d], output=out)
    assert [(s.source, s.read, s.format) for s in report.sources] == [
        (str(d / "a.jsonl"), 2, "openai"), (str(d / "b.jsonl"), 3, "hermes")]
    metas = [json.loads(line)["meta"] for line in out.read_text().splitlines()]
    assert metas[2:] == [{"source": str(d / "b.jsonl"), "row": i} for i in range(3)]
    # The streaming API on the directory names each row's file and its own row number too.
    rows = list(SourceConversion(d, options=OPTIONS))
    assert [(r["meta"]["source"], r["meta"]["row"]) for r in rows][1:3] == [
        (str(d / "a.jsonl"), 1), (str(d / "b.jsonl"), 0)]


# --- 3. string tool_calls -------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", None, [], "[]", "null"])
def test_3_empty_tool_calls_placeholders_mean_no_calls(value):
    raw = {"messages": [{"role": "user", "content": "q"},
                        {"role": "assistant", "content": "a", "reasoning_content": "r", "tool_calls": value}]}
    assert convert_openai(raw, options=OPTIONS)["messages"][1] == {
        "role": "assistant", "reasoning_content": "r", "content": "a"}


def test_3_tool_calls_as_a_json_string_is_parsed_in_every_reader():
    calls = json.dumps([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}])
    raw = {"messages": [{"role": "user", "content": "q"},
                        {"role": "assistant", "reasoning_content": "r", "tool_calls": calls},
                        {"role": "tool", "tool_call_id": "c1", "content": "ok"}], "tools": [F]}
    row = convert_openai(raw, options=OPTIONS)
    assert row["messages"][1]["tool_calls"][0]["function"] == {"name": "f", "arguments": {}}
    share = {"conversations": [{"from": "human", "value": "q"},
                               {"from": "gpt", "value": "", "reasoning_content": "r", "tool_calls": calls},
                               {"from": "observation", "value": "ok"}], "tools": [F]}
    assert convert_sharegpt(share, options=OPTIONS)["messages"][1]["tool_calls"][0]["id"] == "c1"
    assert code(convert_openai({**raw, "messages": [raw["messages"][0], {
        "role": "assistant", "reasoning_content": "r", "tool_calls": "[{bad"}]}, options=OPTIONS)) == "invalid_json"


# --- 4. loss_weight, value parts ------------------------------------------------------------


ISSUE_4 = {"messages": [
    {"role": "user", "content": "q1"},
    {"role": "assistant", "reasoning_content": "r1", "content": "a1", "loss_weight": 0.0},
    {"role": "user", "content": "q2"},
    {"role": "assistant", "reasoning_content": "r2", "content": "a2"},
]}


def test_4_loss_weight_sets_the_turn_weight():
    row = convert_openai(ISSUE_4, options=OPTIONS)
    assert row["messages"][1]["weight"] == 0 and "weight" not in row["messages"][3]
    share = {"conversations": [{"from": "human", "value": "q"},
                               {"from": "gpt", "value": "<think>r</think>a", "loss_weight": 0},
                               {"from": "human", "value": "q"}, {"from": "gpt", "value": "<think>r</think>a"}]}
    assert convert_sharegpt(share, options=OPTIONS)["messages"][1]["weight"] == 0
    for flag, value, weight in [("weight", 1.0, 1), ("loss", False, 0), ("train", True, 1), ("loss_weight", 1, 1)]:
        turn = {"role": "assistant", "reasoning_content": "r", "content": "a", flag: value}
        assert convert_openai({"messages": [ISSUE_4["messages"][0], turn]}, options=OPTIONS)["messages"][1].get(
            "weight", 1) == weight
    bad = {**ISSUE_4["messages"][1], "loss_weight": 0.5}
    assert code(convert_openai({"messages": [ISSUE_4["messages"][0], bad]}, options=OPTIONS)) == "bad_weight"
    both = {**ISSUE_4["messages"][1], "loss_weight": 0, "train": True}
    assert code(convert_openai({"messages": [ISSUE_4["messages"][0], both]}, options=OPTIONS)) == "bad_weight"


def test_4_text_parts_written_with_value_read_like_text_in_every_reader():
    parts = [{"type": "text", "value": "Who"}, {"type": "text", "value": "?"}]
    row = convert_openai({"messages": [{"role": "user", "content": parts},
                                       {"role": "assistant", "reasoning_content": "r", "content": "A"}]}, options=OPTIONS)
    assert row["messages"][0] == {"role": "user", "content": "Who?"}
    share = convert_sharegpt({"conversations": [{"from": "human", "value": parts},
                                                {"from": "gpt", "value": [{"type": "reasoning", "value": "r"},
                                                                          {"type": "text", "value": "A"}]}]},
                             options=OPTIONS)
    assert share["messages"] == [{"role": "user", "content": "Who?"},
                                 {"role": "assistant", "reasoning_content": "r", "content": "A"}]


# --- 5. media -------------------------------------------------------------------------------


ISSUE_5 = {"messages": [{"role": "user", "content": "<image>Who?"},
                        {"role": "assistant", "reasoning_content": "look", "content": "Two players."}],
           "images": ["1.jpg"]}


@pytest.mark.parametrize("column", ["images", "videos", "audios"])
def test_5_media_columns_reject_the_row_in_every_reader(column):
    raw = {**{k: v for k, v in ISSUE_5.items() if k != "images"}, column: ["1.jpg"]}
    for fmt in ("openai", "hermes"):
        assert code(convert_row(raw, format=fmt, options=OPTIONS)) == "non_text_content"
    share = {"conversations": [{"from": "human", "value": "<image>Who?"}, {"from": "gpt", "value": "x"}],
             column: ["1.jpg"]}
    assert code(convert_row(share, format="sharegpt", options=OPTIONS)) == "non_text_content"
    assert code(convert_harmony({"text": "<|start|>user<|message|>q<|end|>", column: ["a"]}, options=OPTIONS)) \
        == "non_text_content"


def test_5_an_empty_media_column_is_no_media_and_a_media_part_is_rejected():
    assert code(convert_row({**ISSUE_5, "images": []}, format="openai", options=OPTIONS)) is None
    parts = {"messages": [{"role": "user", "content": [{"type": "image", "image": "1.jpg"}]}]}
    assert code(convert_row(parts, format="openai", options=OPTIONS)) == "non_text_content"


# --- 6. text after the last tool call -------------------------------------------------------


ISSUE_6 = {"messages": [
    {"role": "user", "content": "remind me"},
    {"role": "assistant", "content": '<think>plan</think>\n<tool_call>{"name": "f", "arguments": {}}</tool_call>'
                                     "\nI have set the reminder."},
], "tools": [F]}


def test_6_text_after_a_tool_call_is_rejected_by_default_never_moved_before_it():
    result = convert_hermes(ISSUE_6, options=OPTIONS)
    assert code(result) == "text_after_tool_call"
    between = {**ISSUE_6, "messages": [ISSUE_6["messages"][0], {
        "role": "assistant", "content": "<think>p</think>" + CALL_F + " then " + CALL_F}]}
    assert code(convert_hermes(between, options=OPTIONS)) == "text_after_tool_call"


def test_6_with_the_drop_option_the_text_is_dropped_and_counted(tmp_path):
    options = ConvertOptions(text_after_tool_call="drop")
    row = convert_row(ISSUE_6, format="hermes", options=options)
    turn = row["messages"][1]
    assert turn["reasoning_content"] == "plan" and "content" not in turn
    assert "reminder" not in json.dumps(row["messages"])
    assert row["meta"]["notes"] == {"text_after_tool_call_dropped": 1}
    src = _write(tmp_path / "a.jsonl", [ISSUE_6])
    conversion = SourceConversion(src, options=options)
    list(conversion)
    assert conversion.summary.notes == {"text_after_tool_call_dropped": 1}
    assert "notes text_after_tool_call_dropped=1" in convert_files([src], options=options).table()


def test_6_a_text_part_after_a_tool_call_part_follows_the_same_rule():
    raw = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [
        {"type": "reasoning", "value": "r"},
        {"type": "tool_call", "value": json.dumps({"name": "f", "arguments": {}})},
        {"type": "text", "value": "Done."}]}], "tools": [F]}
    assert code(convert_openai(raw, options=OPTIONS)) == "text_after_tool_call"
    kept = convert_openai(raw, options=ConvertOptions(text_after_tool_call="drop"))
    assert kept["messages"][1]["tool_calls"] and "content" not in kept["messages"][1]


# --- 7. <thinking> --------------------------------------------------------------------------


def test_7_thinking_tags_are_reasoning_in_every_reader():
    row = convert_openai({"messages": [{"role": "user", "content": "hi"},
                                       {"role": "assistant", "content": "<thinking>plan</thinking>\nanswer"}]},
                         options=OPTIONS)
    assert row["messages"][1] == {"role": "assistant", "reasoning_content": "plan", "content": "answer"}
    share = convert_sharegpt({"conversations": [{"from": "human", "value": "hi"},
                                                {"from": "gpt", "value": "<thinking>plan</thinking>\nanswer"}]},
                             options=OPTIONS)
    assert share["messages"][1] == row["messages"][1]


# --- 8. one role table ----------------------------------------------------------------------


def test_8_every_reader_accepts_the_same_role_aliases():
    from beam_sft.convert import parts, sharegpt

    assert sharegpt.SPEAKERS is parts.ROLE_ALIASES
    for alias in ("bot", "gpt", "model", "chatgpt", "Assistant"):
        raw = {"messages": [{"role": "human", "content": "q"},
                            {"role": alias, "reasoning_content": "r", "content": "a"}]}
        assert convert_openai(raw, options=OPTIONS)["messages"] == [
            {"role": "user", "content": "q"}, {"role": "assistant", "reasoning_content": "r", "content": "a"}]
    raw = {"messages": [{"role": "user", "content": "q"},
                        {"role": "function_call", "content": json.dumps({"name": "f", "arguments": {}}),
                         "reasoning_content": "r"},
                        {"role": "observation", "content": "ok"}], "tools": [F]}
    row = convert_openai(raw, options=OPTIONS)
    assert [m["role"] for m in row["messages"]] == ["user", "assistant", "tool"]
    assert row["messages"][2]["name"] == "f"
    assert code(convert_openai({"messages": [{"role": "narrator", "content": "x"}]}, options=OPTIONS)) == "unknown_role"


# --- Also -----------------------------------------------------------------------------------


def test_also_no_messages_list_names_the_keys_found_and_the_column_option():
    result = convert_openai({"dialog": [], "id": 3}, options=OPTIONS)
    assert result.code == "malformed_row"
    assert "'dialog', 'id'" in result.message and "columns" in result.message
    share = convert_sharegpt({"turns": []}, options=OPTIONS)
    assert "'turns'" in share.message and "columns" in share.message


@pytest.mark.parametrize("policy", ["unmask", "truncate"])
def test_also_no_trained_turn_says_missing_reasoning_is_why(policy):
    raw = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    result = convert_row(raw, format="openai", options=ConvertOptions(missing_reasoning=policy))
    assert result.code == "no_trained_turn"
    assert "had no reasoning" in result.message and f"missing_reasoning={policy}" in result.message


def test_also_the_table_says_missing_reasoning_is_why_nothing_is_trained(tmp_path):
    src = _write(tmp_path / "a.jsonl", [{"messages": [{"role": "user", "content": "q"},
                                                      {"role": "assistant", "content": "a"}]}] * 2)
    table = convert_files([src], options=ConvertOptions(missing_reasoning="unmask")).table()
    assert "no_trained_turn=2" in table
    assert "2 rejected no_trained_turn because trained turns had no reasoning (missing_reasoning=unmask)" in table


def test_also_the_column_mapping_is_columns_and_column_map_is_read_with_a_warning(capsys):
    from beam_sft.convert.options import options_from_dict

    assert options_from_dict({"column_map": {"messages": "dialog"}}).columns.messages == "dialog"
    assert "column_map is deprecated" in capsys.readouterr().err


def test_also_the_reasons_table_renders_from_report_data():
    text = sources_table({"a.jsonl": {"format": "openai", "read": 3, "kept": 0,
                                      "rejected": {"missing_reasoning": 3}}})
    assert "missing_reasoning=3" in text and text.splitlines()[-1].startswith("TOTAL")


def test_1_and_6_the_same_rules_hold_for_sharegpt_containers_and_transcripts():
    share = {"conversations": [{"from": "human", "value": "hi"},
                               {"from": "gpt", "value": "A: <think>plan</think>\n" + CALL_F}], "tools": [F]}
    turn = auto(share)["messages"][1]
    assert turn["reasoning_content"] == "A:\n\nplan" and turn["tool_calls"][0]["function"]["name"] == "f"
    assert code(convert_row(share, format="sharegpt", options=OPTIONS)) == "interleaved_reasoning"
    transcript = ("SYSTEM: s\nUSER: remind me\nASSISTANT:\n<think>plan</think>\n" + CALL_F
                  + "\nI have set the reminder.")
    assert code(convert_row(transcript, format="hermes", options=LOOSE)) == "text_after_tool_call"
    kept = convert_row(transcript, format="hermes", options=ConvertOptions(require_declared_tools=False,
                                                                           text_after_tool_call="drop"))
    assert kept["messages"][-1]["reasoning_content"] == "plan" and kept["meta"]["notes"]
