"""The input classes through ``prepare``: the same rows kept and rejected (with the same codes) as
``convert`` keeps and rejects, for Parquet timestamp/binary/decimal columns (class 9), every number
form (5), duplicate keys and two carriers (6), gzip (14), a huge row (10); and flat formats."""

from __future__ import annotations

import datetime
import gzip
import json
import time

import pytest

from beam_sft.cli import main
from tests.encode.conftest import simple_row
from tests.prepare.test_readers import _line, _same


def test_parquet_timestamp_binary_and_decimal_columns(tmp_path, tokenizer_dir, tokenizer):
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 4
    path = tmp_path / "typed.parquet"
    pq.write_table(pa.table({
        "messages": [simple_row(i)["messages"] for i in range(n)],
        "created": pa.array([datetime.datetime(2024, 5, 1, 12, 0, i) for i in range(n)], pa.timestamp("ms")),
        "blob": pa.array([b"\x00\x01", b"\xff", None, b""], pa.binary()),
        "price": pa.array([decimal.Decimal("1.25")] * n, pa.decimal128(6, 2)),
        "score": pa.array([0.5, float("inf"), 1.0, float("nan")]),
    }), path)
    entry = _same(tmp_path, tokenizer_dir, tokenizer, path)
    assert (entry["read"], entry["kept"]) == (4, 2) and entry["rejected"] == {"non_standard_number": 2}


def test_numbers_duplicates_and_carriers(tmp_path, tokenizer_dir, tokenizer):
    good = simple_row(0)
    call = {"messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "reasoning_content": "r", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"x": 1e400}'}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
        {"role": "assistant", "reasoning_content": "r", "content": "done"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}
    text = json.dumps(good)
    lines = [
        text,
        json.dumps(call),
        json.dumps(call).replace("1e400", "NaN"),
        text.replace('"content": "Answer 0."', '"content": "Answer 0.", "content": "B"'),
        text[:-1] + ', "messages": []}',
        json.dumps({**good, "conversations": [{"from": "human", "value": "q"}]}),
        text.replace('"Question 0?"', "1e400"),
        text,
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    entry = _same(tmp_path, tokenizer_dir, tokenizer, path)
    assert entry["kept"] == 2 and entry["rejected"] == {
        "non_standard_number": 3, "duplicate_key": 2, "conflicting_carriers": 1}
    array = tmp_path / "mixed.json"
    array.write_text("[" + ",\n".join(lines) + "]")
    assert _same(tmp_path / "a", tokenizer_dir, tokenizer, array)["rejected"] == entry["rejected"]


def test_gzip_sources(tmp_path, tokenizer_dir, tokenizer):
    plain = "".join(_line(simple_row(i)) for i in range(5)) + '{"broken\n'
    for name in ("g.jsonl.gz", "g.jsonl", "g.json.gz"):
        path = tmp_path / name
        path.write_bytes(gzip.compress(plain.encode()))
        entry = _same(tmp_path / name.replace(".", "_"), tokenizer_dir, tokenizer, path)
        assert (entry["read"], entry["kept"], entry["rejected"]) == (6, 5, {"invalid_json": 1}), name


def test_a_huge_row_is_bounded_and_named(tmp_path, tokenizer_dir, tokenizer):
    from beam_sft.prepare import PrepareConfig, SourceSpec, prepare

    path = tmp_path / "big.jsonl"
    big = simple_row(1, answer="word " * 400_000)  # 2 MB: the bound below is lowered to keep this fast
    path.write_text(_line(simple_row(0)) + _line(big) + _line(simple_row(2)))
    start = time.perf_counter()
    out = prepare(PrepareConfig(sources=[SourceSpec(path=str(path), convert={"max_row_chars": 100_000})],
                                tokenizer=str(tokenizer_dir), output=str(tmp_path / "out"), num_proc=1))
    assert time.perf_counter() - start < 60
    report = json.loads((out / "report.json").read_text())
    (entry,) = report["sources"].values()
    assert (entry["read"], entry["kept"], entry["rejected"]) == (3, 2, {"row_too_large": 1})
    (line,) = (out / "rejects.jsonl").read_text().splitlines()
    reject = json.loads(line)
    assert reject["row"] == 1 and reject["code"] == "row_too_large" and len(line) < 5000


def test_flat_formats_through_prepare(tmp_path, tokenizer_dir, tokenizer):
    path = tmp_path / "alpaca.jsonl"
    path.write_text("".join(_line(r) for r in [
        {"instruction": "Add.", "input": "2 and 2", "output": "4", "reasoning": "Sum."},
        {"instruction": "Say hi.", "input": "", "output": "<think>Greet.</think>Hi"},
        {"instruction": "No reasoning.", "input": "", "output": "x"},
    ]))
    entry = _same(tmp_path, tokenizer_dir, tokenizer, path)
    assert entry["format"] == "alpaca" and (entry["kept"], entry["rejected"]) == (2, {"missing_reasoning": 1})


@pytest.mark.parametrize("data", [b"\xff\xfe" + '{"a": 1}\n'.encode("utf-16-le"), '{"a": 1}\n'.encode("utf-16-be")])
def test_utf16_is_one_line_from_prepare(tmp_path, tokenizer_dir, capsys, data):
    path = tmp_path / "w.jsonl"
    path.write_bytes(data * 4)
    code = main(["prepare", "--data", str(path), "--tokenizer", str(tokenizer_dir), "--output",
                 str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and "Traceback" not in "\n".join(err)
    assert "UTF-16" in err[-1] and "re-encode it as UTF-8" in err[-1]
    assert not (tmp_path / "out").exists()


def test_a_harmony_txt_file_through_prepare(tmp_path, tokenizer_dir, tokenizer):
    from beam_sft.harmony import markers

    s, m, e, c = markers.START, markers.MESSAGE, markers.END, markers.CHANNEL
    path = tmp_path / "t.txt"
    path.write_text(f"{s}user{m}2+2?{e}{s}assistant{c}analysis{m}Add.{e}{s}assistant{c}final{m}4{markers.RETURN}\n")
    entry = _same(tmp_path, tokenizer_dir, tokenizer, path)
    assert (entry["format"], entry["read"], entry["kept"]) == ("harmony", 1, 1)
