"""``prepare`` reads sources with convert's reader, so every reading rule holds in both commands alike
(a directory is reported file by file, ``--format auto`` decides per row). Each case runs ``prepare`` and ``convert``'s ``SourceConversion`` on the same
source and compares, row by row, where each record went (kept, or rejected with which code), and
checks read = kept + rejected in the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beam_sft.convert.options import ConvertOptions
from beam_sft.convert.pipeline import SourceConversion
from beam_sft.convert.rows import Rejection
from beam_sft.convert.validate import forbidden_tokens
from beam_sft.errors import BeamError, NothingKept
from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
from tests.encode.conftest import simple_row


def _prepare(tmp_path: Path, tokenizer_dir, path: Path, fmt: str = "auto", name: str | None = None) -> tuple[dict, set]:
    """prepare's report section of the one source, and ``{(source, row, code or "kept")}``."""
    from datasets import load_from_disk

    out = prepare(PrepareConfig(sources=[SourceSpec(path=str(path), format=fmt, name=name)],
                                tokenizer=str(tokenizer_dir), output=str(tmp_path / "out"), num_proc=1))
    report = json.loads((out / "report.json").read_text())
    (label, entry), = report["sources"].items()
    assert entry["read"] == entry["kept"] + sum(entry["rejected"].values())
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    # (verified: rejects.jsonl counts by the source's label, as report.json; a folder's line names its file)
    assert all(r["source"] == label and r.get("file") != label for r in rejects)
    where = {(r.get("file", r["source"]), r["row"], r["code"]) for r in rejects}
    where |= {(m["source"], m["row"], "kept") for m in (json.loads(r)["meta"] for r in load_from_disk(str(out))["row"])}
    return entry, where


def _convert(path: Path, tokenizer, fmt: str = "auto", name: str | None = None) -> tuple[SourceConversion, set]:
    conversion = SourceConversion(path, format=fmt, source=name,
                                  options=ConvertOptions(forbidden_tokens=tuple(sorted(forbidden_tokens(tokenizer)))))
    where = set()
    for result in conversion:
        if isinstance(result, Rejection):
            where.add((result.source, result.row, result.code))
        else:
            where.add((result["meta"]["source"], result["meta"]["row"], "kept"))
    return conversion, where


def _same(tmp_path, tokenizer_dir, tokenizer, path: Path) -> dict:
    entry, prepared = _prepare(tmp_path, tokenizer_dir, path)
    conversion, converted = _convert(path, tokenizer, name=str(path))
    assert prepared == converted
    assert entry["read"] == conversion.summary.read and entry["rejected"] == dict(conversion.summary.rejected)
    return entry


def _line(row: dict) -> str:
    return json.dumps(row, ensure_ascii=False) + "\n"


def test_a_bom_costs_a_jsonl_file_no_row(tmp_path, tokenizer_dir, tokenizer):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "".join(_line(simple_row(i)) for i in range(3)).encode())
    entry = _same(tmp_path, tokenizer_dir, tokenizer, path)
    assert (entry["read"], entry["kept"]) == (3, 3)


def test_a_bom_does_not_make_a_json_array_unreadable(tmp_path, tokenizer_dir, tokenizer):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps([simple_row(i) for i in range(3)]).encode())
    entry = _same(tmp_path, tokenizer_dir, tokenizer, path)
    assert (entry["read"], entry["kept"]) == (3, 3)


def test_a_bad_byte_is_rejected_never_replaced(tmp_path, tokenizer_dir, tokenizer):
    path = tmp_path / "bytes.jsonl"
    bad = _line(simple_row(1)).encode().replace(b"Question", b"Qu\xffestion")
    path.write_bytes(_line(simple_row(0)).encode() + bad + b'{"not json \xff\n' + _line(simple_row(3)).encode())
    entry = _same(tmp_path, tokenizer_dir, tokenizer, path)
    assert entry["rejected"] == {"invalid_text": 1, "invalid_json": 1} and entry["kept"] == 2
    rejects = (tmp_path / "out" / "rejects.jsonl").read_text()
    assert "\ufffd" not in rejects and "udcff" in rejects  # the byte is kept visible, escaped
    assert "line at byte" in rejects  # the invalid line's position, as convert words it


def test_a_lone_surrogate_is_rejected(tmp_path, tokenizer_dir, tokenizer):
    path = tmp_path / "surrogate.jsonl"
    path.write_text(_line(simple_row(0)) + _line(simple_row(1)).replace("Question", "\\ud800Question"))
    entry = _same(tmp_path, tokenizer_dir, tokenizer, path)
    assert entry["rejected"] == {"invalid_text": 1}


def test_a_syntax_error_hides_the_rest_counted_and_said(tmp_path, tokenizer_dir, tokenizer, capsys):
    from beam_sft.data.rejects import sources_table

    items = [json.dumps(simple_row(i)) for i in range(3000)]
    items[2000] = items[2000][:-1] + ",}"  # a syntax error at item 2,000
    path = tmp_path / "big.json"
    path.write_text("[" + ",\n".join(items) + "]")
    entry = _same(tmp_path, tokenizer_dir, tokenizer, path)
    assert (entry["read"], entry["kept"], entry["rejected"]) == (2001, 2000, {"unreadable_rest": 1})
    byte = len(("[" + ",\n".join(items[:2000]) + ",\n").encode())
    (rest,) = entry["unreadable"]
    assert rest["byte"] == byte and 900 <= rest["about_more_records"] <= 1100
    conversion, _ = _convert(path, tokenizer)
    assert conversion.summary.unreadable == (rest["byte"], rest["about_more_records"])
    assert f"unreadable from byte {byte} (about {rest['about_more_records']} more records)" in sources_table(
        {"big.json": entry})
    (reject,) = [json.loads(r) for r in (tmp_path / "out" / "rejects.jsonl").read_text().splitlines()]
    assert reject["message"].startswith(f"unreadable from byte {byte} (about ")


def test_a_directory_names_each_rows_file_and_its_own_row(tmp_path, tokenizer_dir, tokenizer):
    folder = tmp_path / "data"
    (folder / ".cache").mkdir(parents=True)
    # a rejected row in a folder source: counted under the source's label, its line naming its file
    (folder / "a.jsonl").write_text("".join(_line(simple_row(i)) for i in range(2)) + '{"messages": broken\n')
    (folder / "b.json").write_text(json.dumps([simple_row(i) for i in range(3)]))
    (folder / ".hidden.jsonl").write_text(_line(simple_row(9)))
    (folder / ".cache" / "c.jsonl").write_text(_line(simple_row(9)))
    (folder / "notes.txt").write_text("x")
    (folder / "old.jsonl.bz2").write_bytes(b"BZh")  # a .gz would be read (gzip); other compressions are not
    entry, prepared = _prepare(tmp_path, tokenizer_dir, folder, name="dir")
    assert prepared == {(str(folder / "a.jsonl"), 0, "kept"), (str(folder / "a.jsonl"), 1, "kept"),
                        (str(folder / "a.jsonl"), 2, "invalid_json"),
                        *((str(folder / "b.json"), i, "kept") for i in range(3))}
    assert _convert(folder, tokenizer, name="dir")[1] == prepared
    assert {Path(s["path"]).name for s in entry["skipped"]} == {"notes.txt", "old.jsonl.bz2"}
    assert entry["read"] == 6 and entry["kept"] == 5


def test_a_fake_parquet_is_a_clear_error_naming_the_file(tmp_path, tokenizer_dir):
    path = tmp_path / "fake.parquet"
    path.write_text("not parquet")
    with pytest.raises(BeamError, match=r"fake\.parquet: not a readable Parquet file"):
        _prepare(tmp_path, tokenizer_dir, path)


def test_auto_decides_per_row_and_counts_formats(tmp_path, tokenizer_dir):
    """Two rows from public data: the Hermes tool-call row becomes a tool call, not trained text."""
    from datasets import load_from_disk

    path = tmp_path / "merged.jsonl"
    path.write_text(
        '{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"<think>greet</think>hello"}]}\n'
        '{"messages":[{"role":"system","content":"<tools>[{\\"type\\":\\"function\\",\\"function\\":{\\"name\\":\\"f\\",'
        '\\"parameters\\":{\\"type\\":\\"object\\",\\"properties\\":{}}}}]</tools>"},{"role":"user","content":"go"},'
        '{"role":"assistant","content":"<think>call f</think><tool_call>{\\"name\\": \\"f\\", \\"arguments\\": {}}'
        '</tool_call>"}]}\n')
    entry, _ = _prepare(tmp_path, tokenizer_dir, path)
    assert entry["kept"] == 2 and entry["formats"] == {"hermes": 1, "openai": 1}
    rows = [json.loads(r) for r in load_from_disk(str(tmp_path / "out"))["row"]]
    call = rows[1]["messages"][-1]
    assert call["tool_calls"][0]["function"]["name"] == "f" and not call.get("content")
    assert "<tool_call>" not in json.dumps(rows[1]["messages"][-1])


def test_nothing_kept_prints_convert_s_table(tmp_path, tokenizer_dir):
    path = tmp_path / "none.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}\n')
    with pytest.raises(NothingKept) as info:
        _prepare(tmp_path, tokenizer_dir, path)
    assert "source" in str(info.value) and "format" in str(info.value) and "missing_reasoning=1" in str(info.value)
    assert "TOTAL" in str(info.value)  # data.rejects.format_summary_table, the one renderer
