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
    assert "dataset reasoning of trained turns: data 1, inline_tags 1, teacher 2; teacher refused: teacher_empty 1" \
        in shown


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


def _config(tmp_path, src, base_url, **teacher):
    import yaml

    path = tmp_path / "prepare.yaml"
    path.write_text(yaml.safe_dump({"sources": [{"path": str(src)}], "missing_reasoning": "unmask",
                                    "reasoning": {"base_url": base_url, "model": "t",
                                                  "cache_dir": str(tmp_path / "cache"), **teacher}}))
    return path


def test_prepare_reasoning_block_runs_the_same_step(tmp_path, fixture_dir, capsys):
    """The config's reasoning block: the parent asks (one request per turn), the encode workers read
    the cache; the rows equal those `beam-sft reason` writes; a second prepare asks nothing."""
    src = write_rows(tmp_path / "rows.jsonl")
    with StubServer() as stub:
        cfg = _config(tmp_path, src, stub.base_url)
        out = tmp_path / "prepared"
        args = ["prepare", "--config", str(cfg), "--tokenizer", str(fixture_dir), "--output", str(out),
                "--num-proc", "1", "--quiet"]
        assert main(args) == 0
        assert len(stub.requests) == 3
        report = json.loads((out / "report.json").read_text())
        assert report["reasoning"]["turns"] == {"data": 1, "inline_tags": 1, "teacher": 3}
        assert report["verify"]["ok"] is True
        assert main(["reason", str(src), "-o", str(tmp_path / "r.jsonl"), "--base-url", stub.base_url,
                     "--model", "t", "--cache-dir", str(tmp_path / "cache"), "--missing-reasoning", "unmask",
                     "-q"]) == 0
        assert len(stub.requests) == 3  # the same questions: all from the cache
        assert main(args) == 0 and len(stub.requests) == 3  # a second prepare: a cache hit
    from datasets import load_from_disk

    prepared = [json.loads(r)["messages"] for r in load_from_disk(str(out))["row"]]
    assert prepared == [r["messages"] for r in read(tmp_path / "r.jsonl")]


def test_prepare_reasoning_block_budget_then_resume(tmp_path, fixture_dir):
    src = write_rows(tmp_path / "rows.jsonl")
    with StubServer() as stub:
        out = tmp_path / "prepared"
        args = ["prepare", "--config", str(_config(tmp_path, src, stub.base_url, max_requests=1, concurrency=1)),
                "--tokenizer", str(fixture_dir), "--output", str(out), "--num-proc", "1", "--quiet"]
        assert main(args) == 0
        first = json.loads((out / "report.json").read_text())["reasoning"]
        assert first["turns"]["teacher"] == 1 and first["teacher_refused"] == {"teacher_budget_exhausted": 2}
        assert main(args) == 0  # not a cache hit: the turns left are asked (the budget is per run)
        second = json.loads((out / "report.json").read_text())["reasoning"]
        assert second["turns"]["teacher"] == 2 and len(stub.requests) == 2


def test_prepare_reasoning_block_rejects_unknown_keys(tmp_path, fixture_dir, capsys):
    cfg = _config(tmp_path, tmp_path / "x.jsonl", "http://127.0.0.1:9/v1", max_request=3)
    assert main(["prepare", "--config", str(cfg), "--tokenizer", str(fixture_dir)]) != 0
    assert "reasoning.max_request: unknown key" in capsys.readouterr().err


def test_prepare_reasoning_judge_block_judges_and_counts_verdicts(tmp_path, fixture_dir, capsys):
    """``reasoning.judge`` in the prepare config: the parent asks teacher and judge, the workers read
    both from the cache; the report counts the verdicts, inspect shows a turn's, a rerun asks nothing."""
    from tests.reason.test_judge import teacher_and_judge

    src = write_rows(tmp_path / "rows.jsonl")

    def behave(n, body):  # the Italy turn gets a "no"
        prompt = body["messages"][0]["content"]
        if "=== The reasoning to check ===" in prompt and "Italy" in prompt:
            return Reply(text="VERDICT: no\nIt argues for Milan.")
        return teacher_and_judge("VERDICT: yes\nfine")(n, body)
    with StubServer(behave) as stub:
        cfg = _config(tmp_path, src, stub.base_url, judge={"model": "referee"})
        out = tmp_path / "prepared"
        args = ["prepare", "--config", str(cfg), "--tokenizer", str(fixture_dir), "--output", str(out),
                "--num-proc", "1", "--quiet"]
        assert main(args) == 0
        assert len(stub.requests) == 6 and [b["model"] for b in stub.requests].count("referee") == 3
        report = json.loads((out / "report.json").read_text())
        assert report["verify"]["ok"] is True
        assert report["reasoning"]["judge_verdicts"] == {"no": 1, "yes": 2}
        assert report["reasoning"]["teacher_refused"] == {"teacher_inconsistent": 1}
        assert "judge: no 1, yes 2" in capsys.readouterr().out
        assert main(["inspect", str(out), "--row", "0", "--no-color"]) == 0
        shown = capsys.readouterr().out
        assert "; judge referee: yes" in shown and "judge: no 1, yes 2" in shown
        out2 = tmp_path / "prepared2"
        assert main([*args[:-5], "--output", str(out2), "--num-proc", "1", "--quiet"]) == 0
        assert len(stub.requests) == 6  # teacher and judge answers from the cache


def test_prepare_reasoning_judge_block_rejects_unknown_keys(tmp_path, fixture_dir, capsys):
    cfg = _config(tmp_path, tmp_path / "x.jsonl", "http://127.0.0.1:9/v1", judge={"modle": "j"})
    assert main(["prepare", "--config", str(cfg), "--tokenizer", str(fixture_dir)]) != 0
    assert "reasoning.judge.modle: unknown key" in capsys.readouterr().err
