"""The converter and reader on hostile input: bad text, bad numbers, unreadable rests, empty and fake
sources, silent changes, and special tokens smuggled into any text field."""

from __future__ import annotations

import argparse
import json

import pytest

from beam_sft.cli import main as beam_main
from beam_sft.convert import ConvertOptions, Rejection, SourceConversion, convert_files, convert_row
from beam_sft.convert import cli as convert_cli
from beam_sft.convert.validate import forbidden_tokens

GOOD = {"messages": [{"role": "user", "content": "q"},
                     {"role": "assistant", "reasoning_content": "r", "content": "a"}]}
OPTIONS = ConvertOptions()


def run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="beam-sft")
    convert_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["convert", *argv])
    return args.func(args)


def code(result):
    return result.code if isinstance(result, Rejection) else None


def _lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --- 9.5: text that is not Unicode ----------------------------------------------------------


def test_5_a_lone_surrogate_in_valid_json_is_one_rejected_row_not_a_traceback(tmp_path):
    src = tmp_path / "a.jsonl"
    bad = json.dumps(GOOD).replace('"q"', '"\\ud800"')
    src.write_text(json.dumps(GOOD) + "\n" + bad + "\n" + json.dumps(GOOD) + "\n", encoding="utf-8")
    out, rej = tmp_path / "rows.jsonl", tmp_path / "rej.jsonl"
    report = convert_files([src], output=out, rejects=rej)
    assert (report.read, report.kept) == (3, 2)
    (record,) = _lines(rej)
    assert record["code"] == "invalid_text" and record["row"] == 1
    assert "\\ud800" in record["raw"]  # kept exactly, as ASCII-escaped JSON text


def test_5_bytes_that_are_not_utf8_reject_their_rows_and_are_not_replaced(tmp_path):
    for name in ("a.jsonl", "a.json"):
        src = tmp_path / name
        good = json.dumps(GOOD).encode()
        bad = json.dumps(GOOD).replace('"q"', '"Q"').encode().replace(b"Q", b"\xff\xfe")
        src.write_bytes((b"[" + good + b",\n" + bad + b"]") if name.endswith(".json") else good + b"\n" + bad + b"\n")
        results = list(SourceConversion(src, options=OPTIONS))
        assert [code(r) for r in results] == [None, "invalid_text"], name
        assert "\ufffd" not in json.dumps([r for r in results if isinstance(r, dict)])
        rej = tmp_path / "rej.jsonl"
        convert_files([src], output=tmp_path / "o.jsonl", rejects=rej)
        assert _lines(rej)[0]["code"] == "invalid_text"


# --- 9.8: an unreadable rest, a BOM -----------------------------------------------------------


def test_8_a_syntax_error_reports_the_byte_and_the_records_it_hides(tmp_path):
    items = [json.dumps(GOOD)] * 3000
    items[2000] = '{"messages": [oops]}'
    text = "[\n" + ",\n".join(items) + "\n]\n"
    src = tmp_path / "big.json"
    src.write_text(text, encoding="utf-8")
    report = convert_files([src], output=tmp_path / "o.jsonl", rejects=tmp_path / "r.jsonl")
    (s,) = report.sources
    assert (s.read, s.kept, dict(s.rejected)) == (2001, 2000, {"unreadable_rest": 1})
    byte = len(text[: text.index("{\"messages\": [oops")].encode())
    assert s.unreadable[0] == byte
    assert 950 <= s.unreadable[1] <= 1050  # about 1,000 more records
    assert f"unreadable from byte {byte} (about" in report.table()
    record = _lines(tmp_path / "r.jsonl")[0]
    assert record["code"] == "unreadable_rest" and f"byte {byte}" in record["message"]
    assert report.to_json()["sources"][0]["unreadable"]["byte"] == byte
    assert s.reject_rate > 0.3  # the hidden rest counts, so --max-reject-rate sees it


@pytest.mark.parametrize("name", ["a.json", "a.jsonl"])
def test_8_a_byte_order_mark_costs_nothing(tmp_path, name):
    src = tmp_path / name
    body = json.dumps([GOOD, GOOD]) if name.endswith(".json") else json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n"
    src.write_bytes(b"\xef\xbb\xbf" + body.encode())
    results = list(SourceConversion(src, options=OPTIONS))
    assert [code(r) for r in results] == [None, None]


# --- 9.9: empty sources ------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["", "\n  \n\t\n"])
def test_9_an_empty_source_is_named_and_exits_non_zero(tmp_path, capsys, content):
    src = tmp_path / "empty.jsonl"
    src.write_text(content)
    assert run_cli(str(src), "-o", str(tmp_path / "o.jsonl")) == 1
    out, err = capsys.readouterr()
    assert "the source is empty" in out and "no row was kept" in err


# --- 9.15: a fake parquet ----------------------------------------------------------------------


def test_15_a_fake_parquet_is_a_clear_error_naming_the_file(tmp_path, capsys):
    src = tmp_path / "fake.parquet"
    src.write_text("not parquet at all")
    assert beam_main(["convert", str(src), "-o", str(tmp_path / "o.jsonl")]) != 0
    err = capsys.readouterr().err
    assert str(src) in err and "Parquet" in err and "Traceback" not in err


# --- 9.16: silent changes ----------------------------------------------------------------------


@pytest.mark.parametrize("user", [{"role": "user", "content": None}, {"role": "user", "contnet": "q"},
                                  {"role": "user"}])
def test_16_user_content_null_or_misspelled_is_rejected_not_empty(user):
    raw = {"messages": [user, GOOD["messages"][1]]}
    result = convert_row(raw, format="openai", options=OPTIONS)
    assert code(result) == "missing_content"
    share = {"conversations": [{"from": "human", "vlaue": "q"}, {"from": "gpt", "value": "<think>r</think>a"}]}
    assert code(convert_row(share, format="sharegpt", options=OPTIONS)) == "missing_content"


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_16_nan_and_infinity_are_rejected(tmp_path, literal):
    src = tmp_path / "a.jsonl"
    row = json.dumps({**GOOD, "tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "number", "default": 0}}}}}]}).replace('"default": 0', f'"default": {literal}')
    src.write_text(row + "\n")
    rej = tmp_path / "r.jsonl"
    convert_files([src], output=tmp_path / "o.jsonl", rejects=rej)
    record = _lines(rej)[0]  # the rejects file itself is standard JSON
    assert record["code"] == "non_standard_number"


@pytest.mark.parametrize("effort, expected", [(0, "bad_reasoning_effort"), (-3, "bad_reasoning_effort"),
                                              (4, None), (8, None), ("none", "bad_reasoning_effort")])
def test_16_reasoning_effort_below_1_is_rejected_below_8_warned(effort, expected):
    result = convert_row({**GOOD, "reasoning_effort": effort}, format="openai", options=OPTIONS)
    assert code(result) == expected
    if expected is None:
        notes = result["meta"].get("notes", {})
        assert ("reasoning_effort_below_8" in notes) == (effort < 8)


def test_16_convert_rejects_template_kwargs_prepare_would_reject():
    from beam_sft.convert.validate import RESERVED_TEMPLATE_KWARGS

    for name in ("tokenize", "tools", "add_generation_prompt"):
        assert name in RESERVED_TEMPLATE_KWARGS
        raw = {**GOOD, "chat_template_kwargs": {name: True}}
        assert code(convert_row(raw, format="openai", options=OPTIONS)) == "bad_template_kwargs"


def test_16_a_wrong_format_rejecting_everything_exits_non_zero(tmp_path):
    src = tmp_path / "a.jsonl"
    src.write_text(json.dumps(GOOD) + "\n")
    assert run_cli(str(src), "-o", str(tmp_path / "o.jsonl"), "--format", "sharegpt") == 1
    assert run_cli(str(src), "-o", str(tmp_path / "o.jsonl")) == 0


@pytest.mark.parametrize("rate", ["nan", "inf", "-0.1", "1.5"])
def test_16_max_reject_rate_must_be_a_fraction(tmp_path, rate):
    with pytest.raises(SystemExit):
        run_cli("x.jsonl", "-o", str(tmp_path / "o.jsonl"), "--max-reject-rate", rate)


def test_16_files_a_directory_skips_are_named_and_hidden_ones_are_left_out(tmp_path):
    d = tmp_path / "d"
    (d / ".cache").mkdir(parents=True)
    (d / "a.jsonl").write_text(json.dumps(GOOD) + "\n")
    (d / "b.jsonl.bz2").write_bytes(b"BZh")  # a .gz is read (through gzip); other compressions are not
    (d / "notes.txt").write_text("x")
    (d / ".hidden.jsonl").write_text(json.dumps(GOOD) + "\n")
    (d / ".cache" / "c.jsonl").write_text(json.dumps(GOOD) + "\n")
    report = convert_files([d], output=tmp_path / "o.jsonl")
    assert [s.source for s in report.sources] == [str(d / "a.jsonl")]
    table = report.table()
    assert f"{d / 'b.jsonl.bz2'}: skipped" in table and f"{d / 'notes.txt'}: skipped" in table
    assert ".hidden" not in table and ".cache" not in table


# --- 9.2: special tokens smuggled into text ------------------------------------------------------


TOKEN = "<|endoftext|>"
TOOL = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {
    "type": "object", "properties": {"x": {"type": "string", "description": "arg"}}}}}


def _smuggled(field: str | None) -> dict:
    tool = json.loads(json.dumps(TOOL))
    row = {"messages": [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "reasoning_content": "r", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"x": {"deep": ["v"]}}}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
        {"role": "assistant", "reasoning_content": "r2", "content": "a"},
    ], "tools": [tool], "chat_template_kwargs": {"model_identity": "I am"}}
    m = row["messages"]
    where = {
        "system": lambda: m[0].update(content="s" + TOKEN),
        "user": lambda: m[1].update(content="pre" + TOKEN + "post"),
        "reasoning": lambda: m[2].update(reasoning_content="r" + TOKEN),
        "argument": lambda: m[2]["tool_calls"][0]["function"]["arguments"]["x"]["deep"].append(TOKEN),
        "argument_key": lambda: m[2]["tool_calls"][0]["function"]["arguments"].update({"k" + TOKEN: 1}),
        "tool_result": lambda: m[3].update(content=TOKEN),
        "answer": lambda: m[4].update(content="a" + TOKEN),
        "tool_description": lambda: tool["function"].update(description=TOKEN),
        "schema": lambda: tool["function"]["parameters"]["properties"]["x"].update(description=TOKEN),
        "schema_key": lambda: tool["function"]["parameters"]["properties"].update({TOKEN: {"type": "string"}}),
        "other_tool_name": lambda: row["tools"].append({"type": "function", "function": {"name": "g" + TOKEN}}),
        "model_identity": lambda: row["chat_template_kwargs"].update(model_identity="I am " + TOKEN),
    }
    if field is not None:
        where[field]()
    return row


FIELDS = ["system", "user", "reasoning", "argument", "argument_key", "tool_result", "answer",
          "tool_description", "schema", "schema_key", "other_tool_name", "model_identity"]


@pytest.mark.parametrize("field", FIELDS)
def test_2_a_forbidden_token_in_any_text_field_is_rejected_naming_field_and_token(field):
    options = ConvertOptions(forbidden_tokens=(TOKEN,))
    assert code(convert_row(_smuggled(None), format="openai", options=options)) is None
    result = convert_row(_smuggled(field), format="openai", options=options)
    assert code(result) == "special_token_in_text", (field, result)
    assert TOKEN in result.message and ("messages[" in result.message or "tools" in result.message
                                        or "chat_template_kwargs" in result.message)
    # Without the option the same row is kept: the rule is the tokenizer's, not a guess.
    assert code(convert_row(_smuggled(field), format="openai", options=OPTIONS)) is None


def test_2_forbidden_tokens_come_from_the_tokenizer_without_the_markers(tokenizer, tmp_path, fixture_dir, capsys):
    tokens = forbidden_tokens(tokenizer)
    assert TOKEN in tokens and not any(t.startswith("<|") and t in ("<|start|>", "<|end|>", "<|return|>")
                                       for t in tokens)
    src = tmp_path / "a.jsonl"
    src.write_text(json.dumps(_smuggled("user")) + "\n" + json.dumps(_smuggled("system")) + "\n")
    rej = tmp_path / "r.jsonl"
    assert run_cli(str(src), "-o", str(tmp_path / "o.jsonl"), "--rejects", str(rej),
                   "--tokenizer", str(fixture_dir)) == 1
    assert {r["code"] for r in _lines(rej)} == {"special_token_in_text"}


# --- Python literals that JSON has no form for (Hermes bodies, pythonic calls) -------------------

PYTHONIC = ConvertOptions(pythonic_tool_calls=True)


def _call_turn(text: str) -> dict:
    return {"messages": [{"role": "user", "content": "go"},
                         {"role": "assistant", "reasoning_content": "r", "content": text}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}


@pytest.mark.parametrize("value", ["...", "{1, 2}", "b'ab'", "1j", "{(1, 2): 3}", "frozenset()"])
def test_a_literal_json_cannot_hold_is_a_malformed_call_never_a_converter_error(value):
    """literal_eval accepts sets, bytes, complex numbers, Ellipsis and tuple keys; JSON has no form for
    them. The Hermes body is malformed_tool_call; the pythonic list is not a call list (text)."""
    hermes = convert_row(_call_turn(f"<tool_call>{{'name': 'f', 'arguments': {{'x': {value}}}}}</tool_call>"),
                         format="hermes", options=OPTIONS)
    assert code(hermes) == "malformed_tool_call", hermes
    non_string_key = convert_row(_call_turn("<tool_call>{'name': 'f', 'arguments': {1: 2}}</tool_call>"),
                                 format="hermes", options=OPTIONS)
    assert code(non_string_key) == "malformed_tool_call", non_string_key
    pythonic = convert_row(_call_turn(f"[f(x={value})]"), format="openai", options=PYTHONIC)
    assert not isinstance(pythonic, Rejection), pythonic
    assert pythonic["messages"][-1].get("tool_calls") is None and pythonic["messages"][-1]["content"] == f"[f(x={value})]"


def test_a_pythonic_dict_with_a_key_twice_is_duplicate_key():
    row = convert_row(_call_turn("[f(x={'a': 1, 'a': 2})]"), format="openai", options=PYTHONIC)
    assert code(row) == "duplicate_key", row
    nested = convert_row(_call_turn("[f(x=[{'b': {'c': 1, 'c': 1}}])]"), format="openai", options=PYTHONIC)
    assert code(nested) == "duplicate_key", nested
    tuple_ok = convert_row(_call_turn("[f(x=(1, 2), y={'k': None})]"), format="openai", options=PYTHONIC)
    assert tuple_ok["messages"][-1]["tool_calls"][0]["function"]["arguments"] == {"x": [1, 2], "y": {"k": None}}


def test_a_python_literal_that_underflows_is_non_standard_number_as_in_json():
    """1e-400 reads as 0.0 in Python as in JSON: the value would change unsaid (1e400 becomes inf)."""
    hermes = convert_row(_call_turn("<tool_call>{'name': 'f', 'arguments': {'x': [1, 1e-400]}}</tool_call>"),
                         format="hermes", options=OPTIONS)
    assert code(hermes) == "non_standard_number", hermes
    pythonic = convert_row(_call_turn("[f(x=-2.5E-999)]"), format="openai", options=PYTHONIC)
    assert code(pythonic) == "non_standard_number", pythonic
    zero = convert_row(_call_turn("[f(x=0.0, y=0e-999, z='1e-400')]"), format="openai", options=PYTHONIC)
    assert zero["messages"][-1]["tool_calls"][0]["function"]["arguments"] == {"x": 0.0, "y": 0.0, "z": "1e-400"}
