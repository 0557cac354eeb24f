"""Every record a source read is kept or rejected, once: verify holds the dataset's row indices and
rejects.jsonl's to the records of each source, not only to their counts. A forger who relabels a kept
row as a rejected one (or points a rejects line at a row that does not exist) and seals report.json
again passes every count; these cases must fail ``row_count``."""

from __future__ import annotations

import json
import shutil

import pytest

from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
from beam_sft.verify.api import verify_prepared

GOOD = {"messages": [{"role": "user", "content": "hi {i}"},
                     {"role": "assistant", "reasoning_content": "r", "content": "ok {i}"}]}


def _line(i: int) -> str:
    return json.dumps(json.loads(json.dumps(GOOD).replace("{i}", str(i)))) + "\n"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, fixture_dir):
    root = tmp_path_factory.mktemp("accounting")
    (root / "a.jsonl").write_text(_line(0) + '{"messages": broken\n' + _line(2) + _line(3))
    folder = root / "data"
    folder.mkdir()
    (folder / "x.jsonl").write_text(_line(10) + "[oops\n")
    (folder / "y.jsonl").write_text('{"bad": 1\n' + _line(12))
    out = prepare(PrepareConfig(sources=[SourceSpec(path=str(root / "a.jsonl"), name="a"),
                                         SourceSpec(path=str(folder), name="dir", weight=2)],
                                tokenizer=str(fixture_dir), output=str(root / "out"), num_proc=1))
    return out


def forged(prepared, tmp_path, rows=None, rejects=None):
    """A copy with the rows (dicts of the Arrow table) and rejects lines changed, digested and sealed again."""
    import pyarrow as pa

    from beam_sft.dataset_folder.integrity import file_digests
    from beam_sft.dataset_folder.report_json import dump_json, seal

    directory = shutil.copytree(prepared, tmp_path / "forged")
    (arrow,) = directory.glob("data-*.arrow")
    with pa.OSFile(str(arrow), "rb") as fh:
        table = pa.ipc.open_stream(fh).read_all()
    records = table.to_pylist()
    lines = [json.loads(line) for line in (directory / "rejects.jsonl").read_text().splitlines()]
    if rows:
        rows(records)
    if rejects:
        rejects(lines)
    with pa.OSFile(str(arrow), "wb") as fh, pa.ipc.new_stream(fh, table.schema) as writer:
        writer.write_table(pa.Table.from_pylist(records, schema=table.schema))
    (directory / "rejects.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = json.loads((directory / "report.json").read_text())
    report["files"] = file_digests(directory)
    (directory / "report.json").write_text(dump_json(seal(report)))
    return directory


def test_a_clean_folder_accounts_for_every_record(prepared):
    lines = [json.loads(line) for line in (prepared / "rejects.jsonl").read_text().splitlines()]
    assert {(r["source"], r.get("index", r["row"])) for r in lines} == {("a", 1), ("dir", 1), ("dir", 2)}
    assert verify_prepared(prepared).ok


def _relabel(records):
    first = next(r for r in records if r["source"] == "a")
    first["row_index"] = 1  # a rejected row's index; row 0 of a is now neither kept nor rejected


def _file_line(lines):
    line = next(r for r in lines if "file" in r)
    return line


@pytest.mark.parametrize("change", [
    lambda lines: _file_line(lines).pop("index"),
    lambda lines: _file_line(lines).update(index="1"),
    lambda lines: lines[0].update(row=0.0),
    lambda lines: lines[0].update(row=0, file="somewhere/else.jsonl"),
])
def test_a_rejects_line_that_names_no_record_is_a_violation_never_a_skip(prepared, tmp_path, change):
    """One line without a whole-number index (a folder's line) or row switched the accounting off for
    its whole source, and a kept row relabelled as a rejected one passed."""
    result = verify_prepared(forged(prepared, tmp_path, _relabel, change))
    assert not result.ok
    assert any(v.rule in ("rejects_count", "row_count") for v in result.violations)


@pytest.mark.parametrize(("rows", "rejects", "said"), [
    (_relabel, None, "both kept and rejected"),
    (None, lambda lines: lines[0].update(row=0), "both kept and rejected"),
    (None, lambda lines: lines[0].update(row=999), "not records it read"),
    (None, lambda lines: lines[1].update(index=2), "more than once"),
    (lambda records: records.__setitem__(0, {**records[0], "row_index": 500}), None, "not records it read"),
])
def test_a_record_neither_kept_nor_rejected_or_both_is_a_row_count(prepared, tmp_path, rows, rejects, said):
    result = verify_prepared(forged(prepared, tmp_path, rows, rejects))
    assert not result.ok
    messages = [v.message for v in result.violations if v.rule == "row_count"]
    assert any(said in m for m in messages), messages
