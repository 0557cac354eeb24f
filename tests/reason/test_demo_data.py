"""The demo's data (beam_sft/data/samples/) with its reasoning removed: ``beam-sft reason`` fills
every trained turn or refuses it with a code (against ``transformers serve``: the tiny random model
writes nothing usable, so every turn is refused and accounted); against the stub, every turn is
filled, ``prepare`` of the result verifies, and the report counts the teacher's turns."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from beam_sft.cli import main
from tests.reason.stub_server import StubServer
from tests.reason.test_reason import read

REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")


@pytest.fixture(scope="module")
def stripped(tmp_path_factory):
    """The samples as BeamRows (convert), every reasoning field removed: what a dataset without
    reasoning looks like to the reason step."""
    from beam_sft.convert import ConvertOptions
    from beam_sft.convert.pipeline import iter_source
    from beam_sft.convert.rows import Rejection

    samples = resources.files("beam_sft.data").joinpath("samples")
    out = tmp_path_factory.mktemp("demo") / "no_reasoning.jsonl"
    n = 0
    with open(out, "w", encoding="utf-8") as fh:
        for path in sorted(str(p) for p in samples.iterdir() if p.name.endswith((".jsonl", ".json"))):
            for row in iter_source(path, options=ConvertOptions(missing_reasoning="unmask")):
                if isinstance(row, Rejection):
                    continue
                messages = [{k: v for k, v in m.items() if k not in REASONING_KEYS} for m in row["messages"]]
                fh.write(json.dumps({**row, "messages": messages, "meta": {}}) + "\n")
                n += 1
    assert n >= 20
    return out


def _trained_turns(path) -> int:
    return sum(1 for r in read(path) for m in r["messages"] if m["role"] == "assistant" and m.get("weight", 1) != 0)


def _run(tmp_path, src, base_url, model, *extra):
    out, rejects, summary = tmp_path / "out.jsonl", tmp_path / "rejects.jsonl", tmp_path / "summary.json"
    main(["reason", str(src), "-o", str(out), "--rejects", str(rejects), "--base-url", base_url, "--model", model,
          "--cache-dir", str(tmp_path / "cache"), "--summary-json", str(summary), "-q", *extra])
    teacher = json.loads(summary.read_text())["teacher"]
    assert len(read(out)) + len(read(rejects)) == len(read(src))
    return read(out), read(rejects), teacher


def test_demo_data_against_transformers_serve(tmp_path, stripped, transformers_server):
    s = transformers_server
    kept, rejected, teacher = _run(tmp_path, stripped, s.base_url, s.model, "--max-tokens", "4",
                                   "--concurrency", "4")
    # under drop (the default) a row's turns after a refused one are not asked: at least one per row
    rows = len(read(stripped))
    assert rows <= teacher["asked"] <= _trained_turns(stripped)
    if not teacher["filled"]:  # every reply refused: the first turn of each row, and no other
        assert teacher["asked"] == rows
    # every turn asked is filled or refused with a code
    assert teacher["asked"] == teacher["filled"] + sum(teacher["rejected"].values())
    assert all(code.startswith("teacher_") for code in teacher["rejected"])
    assert {r["code"] for r in rejected} <= set(teacher["rejected"])


def test_demo_data_filled_prepared_and_counted(tmp_path, stripped, fixture_dir):
    with StubServer() as stub:
        kept, rejected, teacher = _run(tmp_path, stripped, stub.base_url, "stub", "--concurrency", "8")
    assert not rejected and teacher["filled"] == teacher["asked"] == _trained_turns(stripped)
    out = tmp_path / "prepared"
    assert main(["prepare", "--data", str(tmp_path / "out.jsonl"), "--tokenizer", str(fixture_dir), "--output",
                 str(out), "--num-proc", "1", "--no-cache", "--quiet"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["verify"]["ok"] is True
    assert report["reasoning"]["turns"] == {"teacher": teacher["filled"]}
