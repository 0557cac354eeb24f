"""``beam-sft reason`` reads what ``convert`` reads: a Batch API pair (``--batch-input`` /
``--batch-output``), glaive rows without reasoning (the teacher is asked), tools declared by use
(``--infer-tools``); on the real server (``transformers serve``, tests/reason/conftest.py). Every
record ends kept or rejected with a code."""

from __future__ import annotations

import json

from beam_sft.cli import main
from tests.convert import test_batch_join as batch
from tests.convert import test_glaive
from tests.convert.readers_util import write_jsonl
from tests.convert.test_trajectories import tau_row


def _read(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_reason_reads_a_batch_pair_glaive_rows_and_infers_tools(tmp_path, transformers_server, capsys):
    s = transformers_server
    batch_in = write_jsonl(tmp_path / "in.jsonl", [batch.request("r1"), batch.request("r2")])
    batch_out = write_jsonl(tmp_path / "out.jsonl", [batch.output("r1"), batch.output("r9")])
    glaive = write_jsonl(tmp_path / "glaive.jsonl", [test_glaive.NO_FUNCTIONS])
    tau = write_jsonl(tmp_path / "tau.jsonl", [tau_row(1, "a@x.com")])
    out, rejects, summary = tmp_path / "rows.jsonl", tmp_path / "rejects.jsonl", tmp_path / "summary.json"
    main(["reason", str(glaive), str(tau), "--batch-input", str(batch_in), "--batch-output", str(batch_out),
          "--infer-tools", "-o", str(out), "--rejects", str(rejects), "--summary-json", str(summary),
          "--base-url", s.base_url, "--model", s.model, "--max-tokens", "8", "--cache-dir", str(tmp_path / "c"), "-q"])
    kept, rejected = _read(out), _read(rejects)
    report = json.loads(summary.read_text())
    assert report["read"] == len(kept) + len(rejected) == 5  # glaive 1, tau 1, batch: pair + 2 unmatched lines
    by_source = {src["source"]: src for src in report["sources"]}
    pair = next(v for k, v in by_source.items() if "batch of" in k)
    assert pair["by_code"] == {"batch_missing_request": 1, "batch_missing_response": 1} and pair["kept"] == 1
    assert by_source[str(tau)]["kept"] == 1 and by_source[str(tau)]["notes"] == {"inferred_tools": 1, "messages_key:traj": 1}
    glaive_entry = by_source[str(glaive)]  # no reasoning: the teacher was asked; its text kept or refused
    assert glaive_entry["kept"] + glaive_entry["rejected"] == 1
    assert all(code.startswith("teacher_") for code in glaive_entry["by_code"])
    assert "1 turn(s) without reasoning" in capsys.readouterr().out
