"""verify on what ``beam-sft prepare`` really writes."""

from __future__ import annotations

import json

from beam_sft.verify import verify_prepared
from tests.verify.conftest import beam_rows


def _prepare():
    from beam_sft.prepare import prepare
    from beam_sft.prepare.config import PrepareConfig, SourceSpec

    return prepare, PrepareConfig, SourceSpec


def test_verify_passes_on_prepare_output(tmp_path, fixture_dir):
    prepare, PrepareConfig, SourceSpec = _prepare()
    source = tmp_path / "rows.jsonl"
    rows = [{k: v for k, v in row.items() if k != "meta"} for row in beam_rows()]
    source.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    config = PrepareConfig(sources=[SourceSpec(path=str(source), name="rows")], tokenizer=str(fixture_dir),
                           output=str(tmp_path / "prepared"), max_length=1024, num_proc=1, verify=False,
                           cache=False)
    directory = prepare(config)
    result = verify_prepared(directory)
    assert result.ok, "\n".join(v.format() for v in result.violations)
    assert result.stats["rows_checked"] == len(rows)
    report = json.loads((directory / "report.json").read_text())
    assert report["verify"] == result.stats and "sources" in report  # merged, prepare's sections kept
