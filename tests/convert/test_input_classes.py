"""The input side, each defect as a class: one number rule (5), duplicate keys and two carriers
(6), Arrow values JSON has no type for (9), one huge row (10), encodings and compression (14); and
flat formats (Alpaca, prompt/answer/reasoning columns, a Harmony .txt file).
The prepare side of the same rules (same rows kept and rejected) is tests/prepare/test_input_classes.py."""

from __future__ import annotations

import codecs
import gzip
import json
from pathlib import Path

import pytest

from beam_sft.cli import main
from beam_sft.convert.options import ConvertOptions, options_from_dict
from beam_sft.convert.pipeline import SourceConversion, convert_row
from beam_sft.convert.rows import Rejection
from beam_sft.data import sources
from beam_sft.errors import BeamError

TOOL = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {
    "type": "object", "properties": {"x": {"type": "number", "description": "a number"}}}}}


def _codes(path: Path, **options) -> list[str]:
    out = []
    for result in SourceConversion(path, options=ConvertOptions(**options)):
        out.append(result.code if isinstance(result, Rejection) else "kept")
    return out


def _call_row(arguments) -> dict:
    return {"tools": [TOOL], "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "reasoning_content": "r", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
        {"role": "assistant", "reasoning_content": "r", "content": "done"}]}


def _code(raw, fmt="auto", **options) -> str:
    result = convert_row(raw, format=fmt, options=ConvertOptions(**options))
    return result.code if isinstance(result, Rejection) else "kept"


# --- class 5: one number rule, however the value arrives ---------------------------------------------

NUMBERS = ["1e400", "-1e400", "NaN", "Infinity", "-Infinity", "123e99999", "1e-400", "-2.5E-999"]


@pytest.mark.parametrize("number", NUMBERS)
def test_arguments_as_a_json_string_meet_the_object_rule(number):
    assert _code(_call_row({"x": 1})) == "kept"
    assert _code(_call_row('{"x": 1.5}')) == "kept"
    assert _code(_call_row(f'{{"x": {number}}}')) == "non_standard_number"
    # twice encoded, and nested at depth inside the string
    assert _code(_call_row(json.dumps(f'{{"x": {number}}}'))) == "non_standard_number"
    assert _code(_call_row(f'{{"x": {{"deep": [1, {number}]}}}}')) == "non_standard_number"


def test_every_json_string_carrier_meets_the_rule():
    # tools as a JSON string
    row = _call_row({"x": 1})
    tools = json.dumps([TOOL]).replace('"a number"}', '"a number", "default": 1e400}')
    assert _code({**row, "tools": tools}) == "non_standard_number"
    # tool_calls as a JSON string
    msgs = json.loads(json.dumps(row["messages"]))
    msgs[1]["tool_calls"] = json.dumps(msgs[1]["tool_calls"]).replace('"x": 1', '"x": 1e400')
    assert _code({"tools": [TOOL], "messages": msgs}) == "non_standard_number"
    # ShareGPT function_call value
    sharegpt = {"tools": json.dumps([TOOL]), "conversations": [
        {"from": "human", "value": "q"},
        {"from": "function_call", "value": '{"name": "f", "arguments": {"x": 1e400}}'},
        {"from": "observation", "value": "ok"},
        {"from": "gpt", "value": "<think>r</think>done"}]}
    assert _code(sharegpt) == "non_standard_number"
    assert _code(json.loads(json.dumps(sharegpt).replace("1e400", "2"))) != "non_standard_number"
    # Hermes <tool_call> body, as JSON and as a Python literal
    for body in ('{"name": "f", "arguments": {"x": 1e400}}', "{'name': 'f', 'arguments': {'x': 1e400}}"):
        hermes = {"messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": f"<think>r</think><tool_call>{body}</tool_call>"},
            {"role": "user", "content": "<tool_response>ok</tool_response>"},
            {"role": "assistant", "content": "<think>r</think>done"}], "tools": [TOOL]}
        assert _code(hermes) == "non_standard_number", body
        assert _code(json.loads(json.dumps(hermes).replace("1e400", "2"))) == "kept"


def test_harmony_text_arguments_cast_to_a_number_meet_the_rule(render_beam):
    messages = [{"role": "user", "content": "q"},
                {"role": "assistant", "reasoning_content": "r", "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"x": 2.5}}}]}]
    text = render_beam(messages, tools=[TOOL])
    assert "2.5" in text
    kept = convert_row({"text": text, "tools": [TOOL]}, format="harmony", options=ConvertOptions())
    assert kept["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"x": 2.5}
    for value in ("1e400", "-1e400", "Infinity", "NaN"):
        raw = {"text": text.replace("2.5", value), "tools": [TOOL]}
        result = convert_row(raw, format="harmony", options=ConvertOptions())
        assert isinstance(result, Rejection), value  # never a kept row holding Infinity
        assert result.code in ("non_standard_number", "harmony_malformed_arguments"), (value, result)
    assert convert_row({"text": text.replace("2.5", "1e400"), "tools": [TOOL]}, format="harmony",
                       options=ConvertOptions()).code == "non_standard_number"


@pytest.mark.parametrize("text", ["1e400", "NaN", "-Infinity", " inf ", "1e-400"])
def test_argument_text_typed_a_number_meets_the_rule_in_every_reader(text):
    """The number rule on argument TEXT the schema types as a number held only in the Harmony text
    reader: the same text in a Hermes/Qwen3-coder XML call, or a JSON string, was kept, and trains
    the model to write a number JSON cannot hold."""
    xml = f"<tool_call>\n<function=f>\n<parameter=x>\n{text}\n</parameter>\n</function>\n</tool_call>"
    hermes = {"messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": f"<think>r</think>{xml}"},
        {"role": "user", "content": "<tool_response>ok</tool_response>"},
        {"role": "assistant", "content": "<think>r</think>done"}], "tools": [TOOL]}
    assert _code(hermes, "hermes") == "non_standard_number", text
    assert _code(json.loads(json.dumps(hermes).replace(text.strip(), "2.5"))) == "kept"
    result = convert_row(_call_row({"x": text}), format="openai", options=ConvertOptions())
    assert result.code == "non_standard_number"
    assert result.message.startswith(
        "messages[1].tool_calls[0].function.arguments.x, typed a number by the schema of 'f', is the text '")
    as_text = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "string"}}}}}
    assert _code({**_call_row({"x": text}), "tools": [as_text]}, "openai") == "kept"  # a string may say NaN


def test_a_record_with_a_non_standard_number_is_rejected_per_line(tmp_path):
    path = tmp_path / "n.jsonl"
    good = json.dumps(_call_row({"x": 1}))
    path.write_text("\n".join([good, good.replace('"x": 1', '"x": 1e400'), good.replace('"x": 1', '"x": NaN'),
                               good]) + "\n")
    assert _codes(path) == ["kept", "non_standard_number", "non_standard_number", "kept"]


# --- class 6: duplicate keys at any depth, two carriers ----------------------------------------------

GOOD = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "reasoning_content": "r",
                                                          "content": "a"}]}
GOOD_TEXT = json.dumps(GOOD)
DUPLICATES = [
    GOOD_TEXT.replace('"content": "a"', '"content": "a", "content": "b"'),  # content twice
    GOOD_TEXT[:-1] + ', "messages": []}',  # messages twice
    GOOD_TEXT.replace('"role": "user", ', '"role": "user", "role": "system", '),
]


@pytest.mark.parametrize("shape", ["jsonl", "array", "concatenated"])
def test_duplicate_keys_reject_only_their_record(tmp_path, shape):
    records = [GOOD_TEXT, *DUPLICATES, GOOD_TEXT]
    path = tmp_path / ("d.jsonl" if shape == "jsonl" else "d.json")
    if shape == "jsonl":
        path.write_text("\n".join(records) + "\n")
    elif shape == "array":
        path.write_text("[" + ",\n".join(records) + "]")
    else:
        path.write_text("\n".join(json.dumps(json.loads(GOOD_TEXT), indent=1) if r == GOOD_TEXT else r
                                  for r in records))
    assert _codes(path) == ["kept", "duplicate_key", "duplicate_key", "duplicate_key", "kept"]


def test_duplicate_keys_in_json_strings_decoded_later():
    assert _code(_call_row('{"x": 1, "x": 2}')) == "duplicate_key"
    assert _code(_call_row('{"x": {"a": 1, "a": 1}}')) == "duplicate_key"
    hermes = {"messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "<think>r</think><tool_call>{'name': 'f', 'name': 'g', "
                                         "'arguments': {}}</tool_call>"},
        {"role": "user", "content": "<tool_response>ok</tool_response>"},
        {"role": "assistant", "content": "<think>r</think>done"}], "tools": [TOOL]}
    assert _code(hermes) == "duplicate_key"


def test_a_one_conversation_array_with_a_duplicate_key_is_one_rejection(tmp_path):
    path = tmp_path / "conv.json"
    path.write_text('[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "content": "b"}, '
                    '{"role": "user", "content": "more"}]')
    assert _codes(path) == ["duplicate_key"]


def test_two_carriers_are_rejected_not_picked():
    sharegpt = [{"from": "human", "value": "q"}, {"from": "gpt", "value": "<think>r</think>a"}]
    assert _code({**GOOD, "conversations": sharegpt}) == "conflicting_carriers"
    assert _code({**GOOD, "instruction": "q", "output": "a"}) == "conflicting_carriers"
    assert _code({"conversations": sharegpt, "instruction": "q", "output": "a"}) == "conflicting_carriers"
    # mapped columns are the carriers
    assert _code({"dialog": GOOD["messages"], "conversations": sharegpt},
                 columns=options_from_dict({"columns": {"messages": "dialog"}}).columns) == "conflicting_carriers"
    assert _code({**GOOD, "conversations": None}) == "kept"  # an Arrow null is not a carrier
    assert _code({**GOOD, "conversations": []}) == "kept"  # nor an empty column of a union schema
    assert _code({**GOOD, "instruction": "", "output": ""}) == "kept"


# --- class 9: Arrow values JSON has no type for ---------------------------------------------------


def test_parquet_dates_bytes_decimals_become_json_in_the_reader(tmp_path):
    import datetime
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    n = 3
    pq.write_table(pa.table({
        "messages": [GOOD["messages"]] * n,
        "created": pa.array([datetime.datetime(2024, 1, 2, 3, 4, 5)] * n, pa.timestamp("us")),
        "day": pa.array([datetime.date(2024, 1, 2)] * n),
        "blob": pa.array([b"\x00\xff", b"", None], pa.binary()),
        "price": pa.array([decimal.Decimal("1.50")] * n, pa.decimal128(5, 2)),
        "score": pa.array([1.0, float("inf"), float("nan")]),
    }), path)
    records = [r for _, r in sources.iter_records(path)]
    assert records[0]["created"] == "2024-01-02T03:04:05" and records[0]["day"] == "2024-01-02"
    assert records[0]["blob"] == {"$binary": 2} and records[0]["price"] == 1.5
    json.dumps(records[0], allow_nan=False)
    assert _codes(path) == ["kept", "non_standard_number", "non_standard_number"]
    # a binary column used as text is rejected, never decoded into text
    used = tmp_path / "used.parquet"
    pq.write_table(pa.table({"instruction": pa.array([b"q"], pa.binary()), "output": ["a"],
                             "reasoning": ["r"]}), used)
    assert _codes(used) == ["malformed_row"]


# --- class 10: the cost of one row is bounded ---------------------------------------------------------


def test_a_huge_row_is_refused_before_conversion(tmp_path):
    path = tmp_path / "big.jsonl"
    big = {"messages": [{"role": "user", "content": "x" * 5000}, GOOD["messages"][1]]}
    path.write_text(GOOD_TEXT + "\n" + json.dumps(big) + "\n" + GOOD_TEXT + "\n")
    assert _codes(path, max_row_chars=4000) == ["kept", "row_too_large", "kept"]
    assert _codes(path) == ["kept", "kept", "kept"]  # the default bound (4 Mi characters) holds it
    (rejection,) = [r for r in SourceConversion(path, options=ConvertOptions(max_row_chars=4000))
                    if isinstance(r, Rejection)]
    assert rejection.row == 1 and "max_row_chars 4000" in rejection.message
    assert len(json.dumps(rejection.to_json())) < 2000  # the rejects line does not carry the huge row again
    with pytest.raises(BeamError, match="max_row_chars"):
        options_from_dict({"max_row_chars": 0})


def test_max_row_chars_flag(tmp_path, capsys):
    path = tmp_path / "big.jsonl"
    path.write_text(GOOD_TEXT + "\n" + json.dumps({**GOOD, "pad": "y" * 3000}) + "\n")
    rejects = tmp_path / "rej.jsonl"
    assert main(["convert", str(path), "-o", str(tmp_path / "o.jsonl"), "--rejects", str(rejects),
                 "--max-row-chars", "1000"]) == 0
    assert [json.loads(x)["code"] for x in rejects.read_text().splitlines()] == ["row_too_large"]


# --- class 14: encodings and compression --------------------------------------------------------------


@pytest.mark.parametrize("encoding,bom", [("utf-16-le", codecs.BOM_UTF16_LE), ("utf-16-be", codecs.BOM_UTF16_BE),
                                          ("utf-16-le", b""), ("utf-16-be", b""),
                                          ("utf-32-le", codecs.BOM_UTF32_LE), ("utf-32-le", b""),
                                          ("utf-32-be", b"")])
@pytest.mark.parametrize("name", ["w.jsonl", "w.json"])
def test_wide_text_is_one_clear_error(tmp_path, capsys, encoding, bom, name):
    path = tmp_path / name
    path.write_bytes(bom + (GOOD_TEXT + "\n").encode(encoding) * 3)
    with pytest.raises(BeamError, match=r"UTF-(16|32)-(LE|BE).*re-encode it as UTF-8"):
        list(SourceConversion(path))
    assert main(["convert", str(path), "-o", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "UTF-" in err[0] and "Traceback" not in err[0]


@pytest.mark.parametrize("magic,name", [(b"BZh91AY", "bzip2"), (b"\xfd7zXZ\x00\x00", "xz"),
                                        (b"\x28\xb5\x2f\xfd\x00", "zstd"), (b"PK\x03\x04\x00", "zip")])
def test_other_compressions_are_named(tmp_path, magic, name):
    path = tmp_path / "c.jsonl"
    path.write_bytes(magic + b"\x00" * 20)
    with pytest.raises(BeamError, match=f"{name}-compressed"):
        list(SourceConversion(path))


@pytest.mark.parametrize("name", ["g.jsonl.gz", "g.jsonl", "g.json.gz"])
def test_gzip_is_read_transparently(tmp_path, name):
    plain = tmp_path / "plain.jsonl"
    bad = '{"messages": [}'
    plain.write_text("\n".join([GOOD_TEXT, bad, DUPLICATES[0], GOOD_TEXT]) + "\n")
    path = tmp_path / name
    path.write_bytes(gzip.compress(plain.read_bytes()))
    assert _codes(path) == _codes(plain) == ["kept", "invalid_json", "duplicate_key", "kept"]
    # byte offsets count decompressed bytes: the same as the plain file's
    plain_bad = [r for r in SourceConversion(plain) if isinstance(r, Rejection)]
    gz_bad = [r for r in SourceConversion(path) if isinstance(r, Rejection)]
    assert [r.message for r in gz_bad] == [r.message for r in plain_bad]
    assert f"at byte {len(GOOD_TEXT) + 1})" in gz_bad[0].message


def test_gzip_array_and_a_cut_off_gzip(tmp_path, capsys):
    path = tmp_path / "a.json.gz"
    path.write_bytes(gzip.compress(json.dumps([GOOD, GOOD]).encode()))
    assert _codes(path) == ["kept", "kept"]
    data = gzip.compress(("\n".join([GOOD_TEXT] * 2000) + "\n").encode())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(BeamError, match="gzip stream is corrupt or cut off"):
        list(SourceConversion(cut))
    assert main(["convert", str(cut), "-o", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "gzip stream is corrupt" in err.strip().splitlines()[-1]


def test_a_directory_reads_gz_files(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.jsonl.gz").write_bytes(gzip.compress((GOOD_TEXT + "\n").encode()))
    (d / "b.jsonl").write_text(GOOD_TEXT + "\n")
    files, skipped = sources.expand_source(d)
    assert [f.name for f in files] == ["a.jsonl.gz", "b.jsonl"] and not skipped


def test_nul_bytes_in_utf8_text_are_not_taken_for_utf16(tmp_path):
    path = tmp_path / "nul.jsonl"
    path.write_bytes((GOOD_TEXT + "\n").encode() + b'{"x": "\x00"}\n' + (GOOD_TEXT + "\n").encode())
    assert _codes(path)[0] == "kept" and len(_codes(path)) == 3


# --- flat formats ----------------------------------------------------------------------------------


def test_alpaca_rows(tmp_path):
    rows = [
        {"instruction": "Add the numbers.", "input": "2 and 2", "output": "4", "reasoning": "2+2=4."},
        {"instruction": "Say hi.", "input": "", "output": "<think>Greet.</think>Hi!"},
        {"instruction": "Name a colour.", "input": "", "output": "Blue."},  # no reasoning
        {"system": "Be brief.", "instruction": "And 3+3?", "input": "", "output": "6", "reasoning": "Sum.",
         "history": [["What is 1+1?", "2"]]},
        {"instruction": "q", "output": 3},  # not text
        {"instruction": "q", "input": "", "output": "a", "history": [["only one"]]},
    ]
    path = tmp_path / "alpaca.json"
    path.write_text(json.dumps(rows))
    conversion = SourceConversion(path)
    results = list(conversion)
    assert conversion.format == "alpaca"
    codes = [r.code if isinstance(r, Rejection) else "kept" for r in results]
    assert codes == ["kept", "kept", "missing_reasoning", "missing_reasoning", "malformed_row", "malformed_row"]
    assert results[0]["messages"] == [{"role": "user", "content": "Add the numbers.\n\n2 and 2"},
                                      {"role": "assistant", "reasoning_content": "2+2=4.", "content": "4"}]
    assert results[1]["messages"][1] == {"role": "assistant", "reasoning_content": "Greet.", "content": "Hi!"}
    # unmask: the history's turn without reasoning stays as context (weight 0), the last one trains
    unmasked = list(SourceConversion(path, options=ConvertOptions(missing_reasoning="unmask")))
    row = unmasked[3]
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant", "user", "assistant"]
    assert row["messages"][2].get("weight") == 0 and row["messages"][4]["reasoning_content"] == "Sum."


@pytest.mark.parametrize(("row", "user", "note"), [
    ({"prompt": "2+2?", "completion": " 4", "reasoning": "Add."}, "2+2?", "columns:prompt+completion"),  # TRL standard
    ({"question": "2+2?", "answer": "4", "thinking": "Add."}, "2+2?", "columns:question+answer"),
    ({"query": "2+2?", "response": "<think>Add.</think>4"}, "2+2?", "columns:query+response"),
    ({"problem": "2+2?", "solution": "4", "reasoning_content": "Add.", "level": 1}, "2+2?", "columns:problem+solution"),
    ({"instruction": "Add.", "context": "2 and 2", "response": "4", "category": "qa", "reasoning": "Add."},
     "Add.\n\n2 and 2", "columns:instruction+response"),  # databricks-dolly-15k's columns
    # nvidia/OpenCodeReasoning's columns (the reasoning inline in the answer; `solution` is the code alone)
    ({"id": "x", "input": "2+2?", "output": "<think>\nAdd.\n</think>\n\n4", "source": "cf", "solution": "4"},
     "2+2?", "columns:input+output"),
    # NVIDIA's `reasoning: on` says how the answer was made; the reasoning is the inline block
    ({"input": "2+2?", "output": "<think>Add.</think>4", "reasoning": "on"}, "2+2?", "columns:input+output"),
])
def test_well_known_flat_columns_read_unmapped_and_noted(tmp_path, row, user, note):
    """They were malformed_row ("no 'messages' list", or Alpaca's "column 'instruction' is missing")
    unless --columns mapped them; each is read by its pair, and the summary's notes say which."""
    path = tmp_path / "flat.jsonl"
    path.write_text(json.dumps(row) + "\n")
    conversion = SourceConversion(path)
    (result,) = list(conversion)
    assert conversion.format == "alpaca", result
    assert result["messages"][0] == {"role": "user", "content": user}
    assert result["messages"][1]["reasoning_content"] == "Add." and result["messages"][1]["content"].strip() == "4"
    assert result["meta"]["notes"] == {note: 1}


@pytest.mark.parametrize(("row", "code"), [
    ({"question": "q", "answer": "a", "reasoning": "r", "thinking": "t"}, "conflicting_reasoning"),
    ({"question": "q", "answer": "a", "prompt": "p", "completion": "c", "reasoning": "r"}, "malformed_row"),
    ({"question": "q", "answer": 4, "reasoning": "r"}, "malformed_row"),  # not text: no pair
    # Alpaca's input beside a misspelled instruction: input/output as the pair would drop "Add" unsaid
    ({"instructions": "Add", "input": "2+2", "output": "4", "reasoning": "r"}, "malformed_row"),
    ({"Instruction": "Add", "input": "2+2", "output": "4", "reasoning": "r"}, "malformed_row"),
])
def test_a_flat_row_whose_columns_cannot_be_told_is_not_guessed(row, code):
    """Two reasoning columns, or two known pairs: which is meant cannot be told, so none is picked."""
    assert _code(row) == code


def test_a_reasoning_switch_is_not_reasoning_but_a_mapped_column_is_read():
    row = {"input": "q", "output": "a", "reasoning": "Off"}
    assert _code(row) == "missing_reasoning"  # "Off" is no reasoning text: the answer has none
    mapped = options_from_dict({"columns": {"reasoning": "cot"}})
    result = convert_row({"input": "q", "output": "a", "cot": "think", "reasoning": "on"}, format="auto", options=mapped)
    assert result["messages"][1]["reasoning_content"] == "think"


def test_mapped_columns_are_never_overridden_by_a_known_pair():
    row = {"question": "q", "answer": "a", "Q": "mine", "A": "yours", "reasoning": "r"}
    result = convert_row(row, format="auto", options=options_from_dict({"columns": {"prompt": "Q", "answer": "A"}}))
    assert result["messages"][0]["content"] == "mine" and "notes" not in result["meta"]


def test_cot_columns(tmp_path):
    # The column layout of FreedomIntelligence/medical-o1-reasoning-SFT (Question, Complex_CoT, Response).
    path = tmp_path / "cot.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"Question": "A 45-year-old has chest pain. First test?", "Complex_CoT": "Chest pain: rule out MI first.",
         "Response": "An ECG."},
        {"Question": "q", "Complex_CoT": "", "Response": "a"},
        {"Question": "q", "Response": "a"},
    ]) + "\n")
    options = options_from_dict({"columns": {"prompt": "Question", "reasoning": "Complex_CoT", "answer": "Response"}})
    conversion = SourceConversion(path, options=options)
    results = list(conversion)
    assert conversion.format == "alpaca"
    assert results[0]["messages"][1] == {"role": "assistant", "reasoning_content": "Chest pain: rule out MI first.",
                                         "content": "An ECG."}
    assert [r.code for r in results[1:]] == ["missing_reasoning", "missing_reasoning"]


def test_cot_columns_through_the_cli(tmp_path):
    path = tmp_path / "cot.jsonl"
    path.write_text(json.dumps({"Question": "q", "Complex_CoT": "c", "Response": "a"}) + "\n")
    out = tmp_path / "o.jsonl"
    assert main(["convert", str(path), "-o", str(out), "--columns", "prompt=Question", "--columns",
                 "reasoning=Complex_CoT", "--columns", "answer=Response"]) == 0
    (row,) = map(json.loads, out.read_text().splitlines())
    assert row["messages"][1]["reasoning_content"] == "c"


def test_a_harmony_txt_file_is_one_row(tmp_path):
    from beam_sft.harmony import markers

    s, m, e, c = markers.START, markers.MESSAGE, markers.END, markers.CHANNEL
    text = f"{s}user{m}2+2?{e}{s}assistant{c}analysis{m}Add.{e}{s}assistant{c}final{m}4{markers.RETURN}\n"
    path = tmp_path / "t.txt"
    path.write_text(text)
    conversion = SourceConversion(path)
    (row,) = list(conversion)
    assert conversion.format == "harmony"
    assert row["messages"] == [{"role": "user", "content": "2+2?"},
                               {"role": "assistant", "reasoning_content": "Add.", "content": "4"}]
    path.write_text(text.replace(markers.RETURN, ""))  # cut off: one row, rejected
    assert [r.code for r in SourceConversion(path)] == ["harmony_malformed"]



# Three rows of hiyouga/LLaMA-Factory data/alpaca_en_demo.json @ 3053a806e9c55c27159e77ee240a6e050f12e675
# (Apache-2.0; data from the Alpaca-GPT4 set), copied unchanged: items 2, 6 and 9 of the file.
ALPACA_EN_DEMO = [
    {"instruction": "Transform the following sentence using a synonym: The car sped quickly.", "input": "",
     "output": "The car accelerated rapidly."},
    {"instruction": "Given the parameters of a triangle, find out its perimeter.",
     "input": "Side 1 = 4\nSide 2 = 6\nSide 3 = 8",
     "output": "The perimeter of a triangle is the sum of the lengths of its sides. In this case, the perimeter "
               "would be the sum of side 1, side 2, and side 3. So, \nPerimeter = Side 1 + Side 2 + Side 3\n"
               "          = 4 + 6 + 8\n          = 18\n\nTherefore, the perimeter of the triangle is 18 units."},
    {"instruction": "Reword this sentence to increase clarity", "input": "The idea of her being so brave made me smile",
     "output": "The thought of her displaying such courage brought a smile to my face."},
]


def test_real_alpaca_rows_exact_counts(tmp_path):
    path = tmp_path / "alpaca_en_demo.json"
    path.write_text(json.dumps(ALPACA_EN_DEMO, indent=2))
    for policy, code in (("drop", "missing_reasoning"), ("unmask", "no_trained_turn"), ("truncate", "no_trained_turn")):
        conversion = SourceConversion(path, options=ConvertOptions(missing_reasoning=policy))
        results = list(conversion)
        assert conversion.format == "alpaca" and conversion.summary.read == 3
        assert [r.code for r in results] == [code] * 3, policy
    # With reasoning attached (what `beam-sft reason` writes), every row is kept as it was given.
    filled = [{**r, "reasoning": "Think it through."} for r in ALPACA_EN_DEMO]
    path.write_text(json.dumps(filled))
    rows = list(SourceConversion(path))
    assert all(not isinstance(r, Rejection) for r in rows)
    assert rows[1]["messages"][0]["content"] == ("Given the parameters of a triangle, find out its perimeter.\n\n"
                                                 "Side 1 = 4\nSide 2 = 6\nSide 3 = 8")
    assert [r["messages"][1]["content"] for r in rows] == [r["output"] for r in ALPACA_EN_DEMO]


def test_one_file_reached_twice_is_refused_not_converted_twice(tmp_path, capsys):
    # `convert a.jsonl ./a.jsonl` (or a folder and a file in it) converted every row twice, unsaid
    folder = tmp_path / "data"
    folder.mkdir()
    src = folder / "a.jsonl"
    src.write_text(GOOD_TEXT + "\n", encoding="utf-8")
    for inputs in ([str(src), str(folder / "." / "a.jsonl")], [str(folder), str(src)]):
        out = tmp_path / "o.jsonl"
        assert main(["convert", *inputs, "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert "both read" in err and "converted twice" in err and len(err.strip().splitlines()) == 1, err
        assert not out.exists()


def test_a_dataset_folder_and_a_file_of_its_split_are_refused_not_converted_twice(tmp_path, capsys):
    # a folder laid out as on the hub is one dataset source (its train split), not a list of files: the
    # check asks the same listing the reader reads by (sources.files_read), so its file counts as read
    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    (repo / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n"
                                    "    path: data/train-*\n---\n", encoding="utf-8")
    src = repo / "data" / "train-00000-of-00001.jsonl"
    src.write_text(GOOD_TEXT + "\n", encoding="utf-8")
    out = tmp_path / "o.jsonl"
    assert main(["convert", str(repo), str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{repo} and {src} both read {src}" in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_a_file_that_is_one_object_wrapping_its_rows_says_where_they_are(tmp_path):
    """`{"version": 1, "data": [row, ...]}` is one record (datasets reads it as one row too, unless told
    `field: data`): its one rejection says the rows are under `data` and how to read them, where it
    said only that no `messages` list was found."""
    row = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"version": "1", "data": [row, row, row]}, indent=2), encoding="utf-8")
    results = list(SourceConversion(path, options=ConvertOptions()))
    assert len(results) == 1 and isinstance(results[0], Rejection) and results[0].code == "malformed_row"
    assert "'data' holds 3 rows" in str(results[0]) and "field: data" in str(results[0])
    assert "jq -c '.data[]'" in str(results[0])


@pytest.mark.parametrize(("fmt", "key", "value", "said"), [
    ("openai", "messages", "hello", "'messages' is the text 'hello', not a list of messages"),
    ("openai", "messages", '[{"role": "user"}]', "it looks like JSON text of a list"),
    ("openai", "messages", {"role": "user"}, "'messages' is a dict, not a list of messages"),
    ("sharegpt", "conversations", 7, "'conversations' is an int, not a list of messages"),
])
def test_a_conversation_key_that_is_not_a_list_is_named_as_such(fmt, key, value, said):
    """It said "no 'messages' list in the row (keys found: 'messages')": the key was there."""
    from beam_sft.convert import ConvertOptions, convert_row

    result = convert_row({key: value}, format=fmt, options=ConvertOptions())
    assert result.code == "malformed_row" and said in result.message


def test_a_system_column_beside_messages_is_the_conversations_system_prompt():
    """An OpenAI row's `system` column (as Anthropic-style exports and LLaMA-Factory write it) was
    dropped without a word; ShareGPT's was read. Both readers now put it first, once."""
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "reasoning_content": "g", "content": "hello"}]
    row = convert_row({"system": "Be brief.", "messages": turns}, format="openai", options=ConvertOptions())
    assert row["messages"][0] == {"role": "system", "content": "Be brief."} and len(row["messages"]) == 3
    again = convert_row({"system": "Be brief.", "messages": [{"role": "system", "content": "Be brief."}, *turns]},
                        format="openai", options=ConvertOptions())
    assert again["messages"] == row["messages"]  # the same prompt in both places is not written twice
    assert _code({"system": {"text": "x"}, "messages": turns}, "openai") == "malformed_row"
    sharegpt = convert_row({"system": "Be brief.", "conversations": [
        {"from": "human", "value": "hi"}, {"from": "gpt", "value": "<think>g</think>hello"}]},
        format="sharegpt", options=ConvertOptions())
    assert sharegpt["messages"] == row["messages"]


def test_a_mapped_column_holding_one_text_in_a_list_is_that_text():
    """simplescaling/s1K keeps each reasoning as a one-item list (`thinking_trajectories`), so mapping
    it was malformed_row ("a list, not text"); one text in a list is that text, several are refused."""
    options = options_from_dict({"columns": {"prompt": "question", "reasoning": "thinking_trajectories",
                                             "answer": "attempt"}})
    row = {"question": "2+2?", "thinking_trajectories": ["Two and two make four."], "attempt": "4",
           "solution": "4", "cot_type": "math"}
    result = convert_row(row, format="auto", options=options)
    assert result["messages"][1] == {"role": "assistant", "reasoning_content": "Two and two make four.", "content": "4"}
    found = convert_row({**row, "thinking_trajectories": ["a", "b"]}, format="auto", options=options)
    assert isinstance(found, Rejection) and found.code == "malformed_row" and "thinking_trajectories" in found.message
