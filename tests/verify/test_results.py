"""report.json's "verify" section (golden), the terminal table, the histogram."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from beam_sft.dataset_folder.load import recorded_digests
from beam_sft.dataset_folder.report_json import dump_json
from beam_sft.verify.api import verify_prepared
from beam_sft.verify.results import format_table, write_histogram
from tests.verify.test_invariants import untrain_final_return

GOLDEN = Path(__file__).parent / "golden"


def assert_golden(name: str, text: str) -> None:
    """Compare ``text`` with golden/NAME byte for byte; BEAM_UPDATE_GOLDEN=1 rewrites it."""
    path = GOLDEN / name
    if os.environ.get("BEAM_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"missing golden file {path}: run with BEAM_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs (BEAM_UPDATE_GOLDEN=1 to accept)"



def test_verify_section_golden(make_prepared):
    directory = make_prepared()
    result = verify_prepared(directory, histogram=False)
    assert result.ok
    assert set(result.stats["timing"]) == {"seconds", "phases", "num_proc"}
    assert set(result.stats["timing"]["phases"]) == {"load", "start", "rows", "folder"}
    # the parts that vary: timing, and the digests of the files (checked against the report's here)
    assert result.stats["verified_files"] == recorded_digests(json.loads((directory / "report.json").read_text()))
    untimed = {k: v for k, v in result.stats.items() if k not in ("timing", "verified_files", "verified_report")}
    assert_golden("verify_section.json", dump_json(untimed))
    assert_golden("verify_table.txt", format_table(result.stats) + "\n")


def test_section_is_merged_into_report(make_prepared, tokenizer):
    directory = make_prepared(mutate=lambda records: untrain_final_return(records, tokenizer))
    before = json.loads((directory / "report.json").read_text())
    result = verify_prepared(directory)
    after = json.loads((directory / "report.json").read_text())
    # nothing else touched (the seal is made again over the new section)
    assert {k: v for k, v in after.items() if k not in ("verify", "integrity")} == \
        {k: v for k, v in before.items() if k != "integrity"}
    section = after["verify"]
    assert section == result.stats and section["ok"] is False
    assert section["violations"] == {"total": 1, "rows": 1, "by_rule": {"span_end": 1}}
    assert section["max_length"] == 512  # from report.json's length_policy
    assert section["rejections"]["by_code"] == {"marker_in_text": 1, "missing_reasoning": 2}
    lines = (directory / "verify_violations.jsonl").read_text().splitlines()
    assert [json.loads(line)["rule"] for line in lines] == ["span_end"]
    png = directory / "report_lengths.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_channel_fractions_add_up(make_prepared):
    stats = verify_prepared(make_prepared(), write=False).stats
    channels = stats["trained_by_channel"]
    assert sum(c["tokens"] for c in channels.values()) == stats["trained_tokens"]
    assert channels["other"]["tokens"] == 0
    assert all(channels[c]["tokens"] > 0 for c in ("analysis", "final", "tool_call"))
    assert sum(s["trained_tokens"] for s in stats["by_source"].values()) == stats["trained_tokens"]


def test_rejects_file_cut_short_is_a_violation(make_prepared):
    # An empty rejects.jsonl where report.json counts 3 rejections is a file cut short, not a fallback.
    directory = make_prepared(rejects=[])
    result = verify_prepared(directory, write=False)
    assert not result.ok and {v.rule for v in result.violations} == {"rejects_count"}
    assert result.stats["rejections"]["by_code"] == {} and result.stats["rejections"]["consistent"] is False


def test_inconsistent_rejections_are_flagged(make_prepared):
    directory = make_prepared(rejects=[{"source": "alpha.jsonl", "row": 9, "code": "other"}])
    rejected = verify_prepared(directory, write=False).stats["rejections"]
    assert rejected["by_code"] == {"other": 1} and rejected["consistent"] is False


def test_table_lists_violations(make_prepared, tokenizer):
    directory = make_prepared(mutate=lambda records: untrain_final_return(records, tokenizer))
    table = format_table(verify_prepared(directory, write=False).stats)
    assert "violations 1: span_end 1" in table and "rows 6 (checked 6)" in table


def test_histogram_is_drawn_without_matplotlib(tmp_path, monkeypatch):
    import zlib

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # any import of it would fail
    path = write_histogram(tmp_path, {3: 2, 10: 1}, [1, 0, 2])
    assert path == tmp_path / "report_lengths.png"
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    idat = data.index(b"IDAT")
    length = int.from_bytes(data[idat - 4:idat], "big")
    pixels = zlib.decompress(data[idat + 4:idat + 4 + length])
    assert len(pixels) == height * (1 + 3 * width)  # one filter byte and RGB per line


def test_histogram_draws_the_counts(tmp_path):
    import numpy as np

    from beam_sft.verify.png import lengths_figure

    image = lengths_figure({5: 10}, [0] * 19 + [4])
    blue = np.all(image == (0x44, 0x77, 0xAA), axis=2)
    green = np.all(image == (0x22, 0x88, 0x33), axis=2)
    assert blue.any() and green.any()
    assert np.flatnonzero(green.any(axis=0)).min() > 900  # the one full bin is the last one, at 1.0
