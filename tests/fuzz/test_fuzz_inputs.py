"""Fuzz tier: generated hostile inputs of the input-side classes (number forms, duplicate keys,
two carriers, encodings and compression, one huge row), through ``beam-sft convert`` (in process, as
the console script runs it) and, for a few examples, ``prepare``. For each input: the exit code,
stderr is one line per error and never a traceback, every record is accounted for (kept + rejected ==
read == records written), each hostile record gets the code of its class, and the input files are
byte for byte what they were."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import lzma
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_sft.cli import main

pytestmark = pytest.mark.fuzz

NUMBERS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "9e99999", "1E309"]
TOOL = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {
    "type": "object", "properties": {"x": {"type": "number", "description": "n"}}}}}


class Raw:
    """A number written as this text, verbatim (not JSON)."""

    def __init__(self, text: str):
        self.text = text


class Dup(dict):
    """An object written with its first key twice (the second time with ``again``)."""

    def __init__(self, value: dict, again):
        super().__init__(value)
        self.again = again


def dump(value) -> str:
    """JSON text that may hold a Raw number or a Dup object (which json.dumps cannot write)."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        items = [f"{json.dumps(k)}: {dump(v)}" for k, v in value.items()]
        if isinstance(value, Dup) and value:
            items.append(f"{json.dumps(next(iter(value)))}: {dump(value.again)}")
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(dump(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _row(i: int, arguments: str | None = None) -> dict:
    if arguments is None:
        return {"messages": [{"role": "user", "content": f"q{i}"},
                             {"role": "assistant", "reasoning_content": "r", "content": f"a{i}"}]}
    return {"tools": [TOOL], "messages": [
        {"role": "user", "content": f"q{i}"},
        {"role": "assistant", "reasoning_content": "r", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
        {"role": "assistant", "reasoning_content": "r", "content": f"a{i}"}]}


def _dicts(value, out):
    if isinstance(value, dict):
        out.append(value)
        for v in value.values():
            _dicts(v, out)
    elif isinstance(value, list):
        for v in value:
            _dicts(v, out)
    return out


def _replace(value, target, new):
    """``value`` with the dict ``target`` (by identity) replaced by ``new``."""
    if value is target:
        return new
    if isinstance(value, dict):
        return {k: _replace(v, target, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, target, new) for v in value]
    return value


@st.composite
def records(draw):
    """``(JSON text of one record, the code it must get or "kept")``."""
    i = draw(st.integers(0, 999))
    kind = draw(st.sampled_from(["clean", "clean_call", "number", "number_in_string", "number_twice_encoded",
                                 "duplicate", "duplicate_in_string", "carriers"]))
    if kind == "clean":
        return dump(_row(i)), "kept"
    if kind == "clean_call":
        return dump(_row(i, json.dumps({"x": draw(st.floats(-1e300, 1e300))}))), "kept"
    number = draw(st.sampled_from(NUMBERS))
    if kind == "number_in_string":
        return dump(_row(i, dump({"x": Raw(number)}))), "non_standard_number"
    if kind == "number_twice_encoded":
        return dump(_row(i, json.dumps(dump({"x": [1, {"y": Raw(number)}]})))), "non_standard_number"
    if kind == "duplicate_in_string":
        return dump(_row(i, dump(Dup({"x": 1}, draw(st.integers()))))), "duplicate_key"
    row = _row(i, json.dumps({"x": 1}) if draw(st.booleans()) else None)
    targets = _dicts(row, [])
    target = draw(st.sampled_from(targets))
    if kind == "number":
        new = {**target, draw(st.sampled_from(["n", "x", "weight"])) + "_": Raw(number)}
        return dump(_replace(row, target, new)), "non_standard_number"
    if kind == "duplicate":
        again = draw(st.sampled_from(["other", 1, None, [], {"z": 1}]))
        return dump(_replace(row, target, Dup(target, again))), "duplicate_key"
    row["conversations"] = [{"from": "human", "value": "q"}, {"from": "gpt", "value": "<think>r</think>a"}]
    return dump(row), "conflicting_carriers"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(argv: list[str], capsys) -> tuple[int, list[str]]:
    code = main(argv)  # an exception escaping here is the traceback a user would see
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, [line for line in err.splitlines() if "error" in line]


def _write(path: Path, texts: list[str], shape: str) -> None:
    if shape.startswith("array"):
        data = ("[" + ",\n".join(texts) + "]").encode()
    else:
        data = ("\n".join(texts) + "\n").encode()
    path.write_bytes(gzip.compress(data) if shape.endswith("gz") else data)


NAMES = {"jsonl": "in.jsonl", "array": "in.json", "jsonl_gz": "in.jsonl.gz", "array_gz": "in.json.gz",
         "jsonl_gz_misnamed": "in.jsonl"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(records(), min_size=1, max_size=8), shape=st.sampled_from(sorted(NAMES)))
def test_every_hostile_record_is_accounted_for_with_its_code(tmp_path_factory, capsys, rows, shape):
    d = tmp_path_factory.mktemp("fz")
    src = d / NAMES[shape]
    _write(src, [t for t, _ in rows], shape.replace("_misnamed", ""))
    before = _digest(src)
    out, rej, summary = d / "rows.jsonl", d / "rejects.jsonl", d / "summary.json"
    code, errors = _run(["convert", str(src), "-o", str(out), "--rejects", str(rej), "--summary-json",
                         str(summary)], capsys)
    expected = [c for _, c in rows]
    assert code == (0 if "kept" in expected else 1) and errors == []
    report = json.loads(summary.read_text())
    kept = out.read_text().splitlines()
    rejected = [json.loads(x) for x in rej.read_text().splitlines()]
    assert report["read"] == len(rows) == len(kept) + len(rejected) and report["kept"] == len(kept)
    got = {r["row"]: r["code"] for r in rejected}
    assert [got.get(i, "kept") for i in range(len(rows))] == expected
    assert _digest(src) == before


ENCODINGS = ["utf-16-le", "utf-16-be", "utf-16", "utf-32-le", "utf-32-be", "utf-32"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(records(), min_size=1, max_size=4),
       how=st.sampled_from(ENCODINGS + ["bz2", "xz"]), bom=st.booleans(),
       name=st.sampled_from(["in.jsonl", "in.json", "in.ndjson"]))
def test_unreadable_encodings_are_one_line_and_touch_nothing(tmp_path_factory, capsys, rows, how, bom, name):
    d = tmp_path_factory.mktemp("enc")
    text = "\n".join(t for t, _ in rows) + "\n"
    if how == "bz2":
        data = bz2.compress(text.encode())
    elif how == "xz":
        data = lzma.compress(text.encode())
    else:
        data = text.encode(how)  # "utf-16"/"utf-32" write a byte-order mark
        if bom and how.endswith(("-le", "-be")):
            data = ("\ufeff" + text).encode(how)
    src = d / name
    src.write_bytes(data)
    mine = d / "rows.jsonl"
    mine.write_text("the user's file\n")
    code, errors = _run(["convert", str(src), "-o", str(mine)], capsys)
    assert code == 2 and len(errors) == 1
    word = {"bz2": "bzip2", "xz": "xz"}.get(how, "UTF-")
    assert word in errors[0] and str(src) in errors[0]
    assert mine.read_text() == "the user's file\n" and src.read_bytes() == data


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=6), bound=st.integers(200, 2500))
def test_a_row_over_the_bound_is_named_and_the_rest_kept(tmp_path_factory, capsys, sizes, bound):
    d = tmp_path_factory.mktemp("big")
    texts = [dump({**_row(i), "pad": "p" * n}) for i, n in enumerate(sizes)]
    src = d / "in.jsonl"
    src.write_text("\n".join(texts) + "\n")
    out, rej = d / "rows.jsonl", d / "rejects.jsonl"
    _run(["convert", str(src), "-o", str(out), "--rejects", str(rej), "--max-row-chars", str(bound)], capsys)
    big = {i for i, t in enumerate(texts) if len(json.dumps(json.loads(t), ensure_ascii=False)) > bound}
    rejected = [json.loads(x) for x in rej.read_text().splitlines()]
    assert {r["row"] for r in rejected} == big and all(r["code"] == "row_too_large" for r in rejected)
    assert len(out.read_text().splitlines()) == len(texts) - len(big)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(rows=st.lists(records(), min_size=2, max_size=6), shape=st.sampled_from(["jsonl", "array", "jsonl_gz"]))
def test_prepare_keeps_and_rejects_what_convert_does(tmp_path_factory, fixture_dir, capsys, rows, shape):
    d = tmp_path_factory.mktemp("prep")
    src = d / NAMES[shape]
    _write(src, [t for t, _ in rows], shape)
    before = _digest(src)
    code = main(["prepare", "--data", str(src), "--tokenizer", str(fixture_dir), "--output", str(d / "out"),
                 "--quiet", "--num-proc", "1"]) if "kept" in [c for _, c in rows] else None
    if code is None:
        return
    assert "Traceback" not in capsys.readouterr().err and code == 0
    report = json.loads((d / "out" / "report.json").read_text())
    (entry,) = report["sources"].values()
    assert entry["read"] == len(rows) == entry["kept"] + sum(entry["rejected"].values())
    expected: dict[str, int] = {}
    for _, c in rows:
        if c != "kept":
            expected[c] = expected.get(c, 0) + 1
    assert entry["rejected"] == expected
    assert _digest(src) == before
