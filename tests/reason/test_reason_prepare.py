"""Filled rows go through ``prepare`` and verify: the provenance in ``meta.reasoning`` is not
rendered (masks and parse_mismatch unchanged), the report counts turns by reasoning source and
teacher refusals by code, and ``inspect`` shows a row's provenance."""

from __future__ import annotations

import json

from beam_sft.cli import main
from tests.reason.stub_server import Reply, StubServer
from tests.reason.test_reason import ROWS, read, write_rows


def _prepare(tmp_path, fixture_dir, src, name="prepared", *extra):
    out = tmp_path / name
    status = main(["prepare", "--data", str(src), "--tokenizer", str(fixture_dir), "--output", str(out),
                   "--num-proc", "1", "--no-cache", "--quiet", *extra])
    return status, out


def test_filled_rows_prepare_verify_and_are_counted(tmp_path, fixture_dir, capsys):
    with StubServer(lambda n, body: Reply(text="") if "Italy" in body["messages"][0]["content"] else Reply()) as stub:
        assert main(["reason", str(write_rows(tmp_path / "rows.jsonl")), "-o", str(tmp_path / "out.jsonl"),
                     "--rejects", str(tmp_path / "rej.jsonl"), "--base-url", stub.base_url, "--model", "t",
                     "--cache-dir", str(tmp_path / "cache"), "--missing-reasoning", "unmask", "-q"]) == 0
    kept = read(tmp_path / "out.jsonl")
    assert len(kept) == len(ROWS)
    status, out = _prepare(tmp_path, fixture_dir, tmp_path / "out.jsonl")
    assert status == 0
    report = json.loads((out / "report.json").read_text())
    assert report["verify"]["ok"] is True
    assert "reasoning of trained turns: data 1, inline_tags 1, teacher 2; teacher refused: teacher_empty 1" in \
        capsys.readouterr().out
    # row 0: teacher; row 1: data + refused (unmasked); row 2: teacher + inline tags
    assert report["reasoning"] == {"turns": {"data": 1, "inline_tags": 1, "teacher": 2},
                                   "teacher_refused": {"teacher_empty": 1}}
    capsys.readouterr()
    assert main(["inspect", str(out), "--row", "0", "--no-color"]) == 0
    shown = capsys.readouterr().out
    assert "reasoning: turn 1 teacher (t @ 127.0.0.1:" in shown


def test_prepare_of_rows_without_provenance_counts_them_unrecorded(tmp_path, fixture_dir):
    src = write_rows(tmp_path / "plain.jsonl", [{"messages": [{"role": "user", "content": "q"},
                     {"role": "assistant", "reasoning_content": "r", "content": "a"}]}])
    status, out = _prepare(tmp_path, fixture_dir, src)
    assert status == 0
    assert json.loads((out / "report.json").read_text())["reasoning"] == {"turns": {"unrecorded": 1},
                                                                          "teacher_refused": {}}


def test_dropped_rows_count_their_teacher_code(tmp_path, fixture_dir):
    with StubServer(lambda n, body: Reply(text="<think>x</think>")) as stub:
        main(["reason", str(write_rows(tmp_path / "rows.jsonl")), "-o", str(tmp_path / "out.jsonl"),
              "--rejects", str(tmp_path / "rej.jsonl"), "--base-url", stub.base_url, "--model", "t",
              "--cache-dir", str(tmp_path / "cache"), "-q"])
    assert [r["code"] for r in read(tmp_path / "rej.jsonl")] == ["teacher_markup"] * 3
