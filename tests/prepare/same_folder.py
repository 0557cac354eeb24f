"""``assert_same_folder``: two prepared folders are the same folder, as one unsharded ``prepare``
writes it: every column of every row in the same order, the same rejects bytes, the same data
files, the same report but for what differs between any two runs of one config (timing, the
dataset's per-run ``state.json`` fingerprint and the seal over it, the output path) and the
``engine`` section of a merged folder."""

from __future__ import annotations

import copy
import json
from pathlib import Path

# state.json holds the run's own dataset fingerprint (unique per run, as datasets' was): two local
# runs of one config differ there too.
PER_RUN_FILES = ("state.json",)


def comparable_report(folder: Path, *, probe: bool = True, verify_tokenizer: bool = True) -> dict:
    report = copy.deepcopy(json.loads((Path(folder) / "report.json").read_text()))
    for key in ("timing", "engine", "integrity"):
        report.pop(key, None)
    report["config"].pop("output", None)
    verify = report.get("verify") or {}
    verify.pop("timing", None)
    verify.pop("verified_report", None)  # the digest of the report verify saw, timing and all
    if not verify_tokenizer:  # merge-shards' verify loads DIR/tokenizer; prepare's proves its own the same
        verify.pop("tokenizer", None)
    for name in PER_RUN_FILES:
        report["files"]["files"].pop(name, None)
        (report.get("verify") or {}).get("verified_files", {}).pop(name, None)
    if not probe:  # a shard's own probe sample differs when shard 0 holds fewer records than the probe reads
        report["encoder"].pop("probe", None)
    return report


def rows(folder: Path) -> dict[str, list]:
    from datasets import load_from_disk

    return load_from_disk(str(folder)).to_dict()


def assert_same_folder(got: Path, expected: Path, *, probe: bool = True, verify_tokenizer: bool = True) -> None:
    got, expected = Path(got), Path(expected)
    assert rows(got) == rows(expected)  # every column, in order
    assert (got / "rejects.jsonl").read_bytes() == (expected / "rejects.jsonl").read_bytes()
    assert comparable_report(got, probe=probe, verify_tokenizer=verify_tokenizer) == comparable_report(
        expected, probe=probe, verify_tokenizer=verify_tokenizer)
    report = json.loads((got / "report.json").read_text())
    assert report["fingerprint"] == json.loads((expected / "report.json").read_text())["fingerprint"]
