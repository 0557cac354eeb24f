"""``prepare`` interprets its config once (``beam_sft.prepare.resolved``): the fingerprint and the
records writer read the same resolved options, and a deprecated spelling is reported once."""

from __future__ import annotations

import json

from beam_sft.prepare import PrepareConfig, SourceSpec, cache, records
from beam_sft.prepare.resolved import resolve


def test_one_resolution_feeds_the_fingerprint_and_the_records(tmp_path, tokenizer, capsys):
    data = tmp_path / "a.jsonl"
    data.write_text(json.dumps({"dialog": [{"role": "user", "content": "hi"}]}) + "\n")
    config = PrepareConfig(sources=[SourceSpec(path=str(data), column_map={"messages": "dialog"})])
    plan = resolve(config, tokenizer)
    assert capsys.readouterr().err.count("column_map is deprecated") == 1
    parts = cache.fingerprint_parts(plan, tokenizer)
    jobs, _, total = records.write_records(plan, tmp_path / "records.arrow")
    assert "deprecated" not in capsys.readouterr().err  # said once, when resolved; no reader says it again
    assert total == 1 and jobs[0].options is plan.sources[0].options  # the encode batches get these options
    assert plan.sources[0].options.columns.messages == "dialog" and plan.forbidden_tokens
    assert jobs[0].options.forbidden_tokens == plan.forbidden_tokens
    assert parts["sources"][0]["data"] == plan.sources[0].data_digest and parts["code"] == plan.code_digest
