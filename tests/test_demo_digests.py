"""The demo's prepared folders are the same bytes from one layout of the code to the next.

A move or rename of modules (a layout change) must not change what ``prepare`` writes. ``make demo``'s
two folders (its seeded rows and the samples, the fixture tokenizer trained on the demo's corpus) are
prepared here exactly as ``beam_sft.demo`` prepares them, and what their report.json records as data
digests is compared with a golden file:

- ``files``: size and SHA-256 of every data file (the Arrow shard, dataset_info.json, rejects.jsonl,
  the tokenizer's files), but state.json's digest (``datasets`` writes a random ``_fingerprint`` in
  it on every save; its size is kept);
- ``fingerprint_parts``: the digests of the inputs (each source's data, the tokenizer, the chat and
  response templates, the forbidden tokens), not ``code`` (the code's own digest changes with any
  edit) and not paths;
- the counts: per source (read, kept, rejected by code, rows out), rejects, mix, tokens.

Times, paths, the code digest and the fingerprints built from it are left out. The Arrow bytes depend
on the libraries' versions: with other versions than the golden's the test skips, saying which.
Regenerate with ``BEAM_UPDATE_GOLDEN=1 pytest -m slow tests/test_demo_digests.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden" / "demo_report_digests.json"
UNSTABLE_DIGESTS = ("state.json",)  # datasets' random _fingerprint: size only
INPUT_DIGESTS = ("template", "tokenizer", "forbidden_tokens", "response_template")


def data_digests(report: dict) -> dict:
    """What ``report`` records about the folder's data (see the module docstring), nothing else."""
    files = {}
    for name, entry in report["files"]["files"].items():
        files[name] = {"size": entry["size"]} if name in UNSTABLE_DIGESTS else dict(entry)
    parts = report["fingerprint_parts"]
    return {
        "files": {"algorithm": report["files"]["algorithm"], "files": files},
        "inputs": {key: parts[key] for key in INPUT_DIGESTS},
        "source_data": {source["label"]: source["data"] for source in parts["sources"]},
        "sources": {label: {k: v for k, v in entry.items() if k != "path"}
                    for label, entry in report["sources"].items()},
        "rejects": report["rejects"],
        "mix": report["mix"],
        "tokens": report["tokens"],
    }


def test_data_digests_leave_out_times_paths_and_the_code():
    report = {"files": {"algorithm": "sha256", "files": {"a.arrow": {"size": 1, "sha256": "x"},
                                                          "state.json": {"size": 2, "sha256": "random"}}},
              "fingerprint_parts": {"code": "c", "template": "t", "tokenizer": "k", "forbidden_tokens": "f",
                                    "response_template": "r", "sources": [{"label": "s", "data": "d", "path": "/p"}]},
              "sources": {"s": {"read": 1, "path": "/p"}}, "rejects": {}, "mix": {}, "tokens": {},
              "timing": {"seconds": 1.0}}
    out = data_digests(report)
    assert out["files"]["files"]["state.json"] == {"size": 2}
    assert out["files"]["files"]["a.arrow"] == {"size": 1, "sha256": "x"}
    assert "c" not in json.dumps(out["inputs"]) and "/p" not in json.dumps(out) and "timing" not in out


@pytest.mark.slow
def test_the_demo_folders_match_the_golden_digests(tmp_path):
    from beam_sft.demo import DemoSettings, fixture_options, prepare_folders, write_rows
    from beam_sft.harmony.fixture import build_fixture

    settings = DemoSettings()
    fixture = build_fixture(tmp_path / "fixture", with_model=False, options=fixture_options(settings))
    train_rows, heldout_rows = write_rows(tmp_path, settings)
    folders = prepare_folders(tmp_path, fixture, train_rows, heldout_rows)
    reports = [json.loads((folder / "report.json").read_text(encoding="utf-8")) for folder in folders]
    libraries = reports[0]["fingerprint_parts"]["libraries"]
    text = json.dumps({"libraries": libraries,
                       "folders": {folder.name: data_digests(report) for folder, report in zip(folders, reports, strict=True)}},
                      ensure_ascii=False, indent=1, sort_keys=True) + "\n"
    if os.environ.get("BEAM_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text, encoding="utf-8")
    assert GOLDEN.is_file(), "no golden digests: run with BEAM_UPDATE_GOLDEN=1"
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    if golden["libraries"] != libraries:
        pytest.skip(f"the golden was written with {golden['libraries']}, these are {libraries}: regenerate it")
    assert text == GOLDEN.read_text(encoding="utf-8")
