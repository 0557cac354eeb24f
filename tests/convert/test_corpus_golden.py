"""Every file of ../shared/corpus converts without a crash; counts and rows are pinned byte for byte.

For each file and each missing-reasoning policy: read = kept + rejected, and the counts by reason
code match the golden file. The golden file also pins the converter's output (before the policy
and validation) for the first two rows it converts and the first one with tool calls, and which
rows the default policy keeps.
Regenerate with ``BEAM_UPDATE_GOLDEN=1 pytest tests/convert/test_corpus_golden.py`` and review
the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from beam_sft.convert import CONVERTERS, FORMAT_CONVERTERS, ConvertOptions, Rejection, SourceConversion
from beam_sft.data.sources import BadRecord, iter_records
from tests.conftest import corpus_dir

GOLDEN = Path(__file__).parent / "golden"
POLICIES = ("drop", "truncate", "unmask")
CORPUS = corpus_dir()
FILES = sorted(p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*.json*")) if CORPUS else []


def _summarise(path: Path) -> dict:
    out: dict = {"file": None, "format": None, "counts": {}, "converted": [], "kept_rows": []}
    for policy in POLICIES:
        conversion = SourceConversion(path, options=ConvertOptions(missing_reasoning=policy))
        results = list(conversion)
        s = conversion.summary
        assert s.read == s.kept + s.n_rejected == len(results)
        out["format"] = conversion.format
        out["counts"][policy] = {"read": s.read, "kept": s.kept, "rejected": dict(sorted(s.rejected.items()))}
        if policy == "drop":
            out["kept_rows"] = [r["meta"]["row"] for r in results if not isinstance(r, Rejection)]
    # The first two rows the converter turns into BeamRows, plus the first one with tool calls.
    converter = CONVERTERS[FORMAT_CONVERTERS[out["format"]]]
    with_calls = False
    for index, raw in iter_records(path):
        result = None if isinstance(raw, BadRecord) else converter(raw, options=ConvertOptions())
        if result is None or isinstance(result, Rejection):
            continue
        calls = any(m.get("tool_calls") for m in result["messages"])
        if len(out["converted"]) < 2 or (calls and not with_calls):
            out["converted"].append({"row": index, "beam_row": result})
            with_calls = with_calls or calls
        if len(out["converted"]) >= 2 and with_calls:
            break
    return out


def _golden_text(name: str, summary: dict) -> str:
    return json.dumps({**summary, "file": name}, ensure_ascii=False, indent=1) + "\n"


@pytest.mark.parametrize("name", FILES)
def test_corpus_file_matches_golden(name, shared_corpus):
    text = _golden_text(name, _summarise(shared_corpus / name))
    golden = GOLDEN / (name.replace("/", "__") + ".golden.json")
    if os.environ.get("BEAM_UPDATE_GOLDEN") == "1":
        golden.write_text(text, encoding="utf-8")
    assert golden.is_file(), f"no golden file for {name}: run with BEAM_UPDATE_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8")


def test_every_corpus_file_has_a_golden_and_no_stale_ones(shared_corpus):
    expected = {name.replace("/", "__") + ".golden.json" for name in FILES}
    assert FILES, "the corpus is empty"
    assert {p.name for p in GOLDEN.glob("*.golden.json")} == expected
