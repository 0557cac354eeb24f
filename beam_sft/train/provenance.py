"""Which data a run read, by digest: a prepared folder's path may hold other data later (a new
prepare replaces it), so ``beam_run.json`` and the TensorBoard run record name the data by its
report's digest, its fingerprint and its files' digests, taken when the run starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from beam_sft.prepared.layout import REPORT_FILE

_TAKEN: dict[str, dict[str, Any]] = {}  # folder -> its provenance when this run first looked


def folder_provenance(directory: str | Path) -> dict[str, Any]:
    """What names the data of a prepared folder, not only its path (which a later prepare may fill
    with other data): report.json's own SHA-256 and seal, the fingerprint, every data file's
    SHA-256 as recorded (and checked by ``data.check_trainable`` before training), and the
    verification. Taken once per folder and run (``recorded_provenance``), at the start."""
    import hashlib

    from beam_sft.prepared.load import recorded_digests

    path = Path(directory)
    try:
        raw = (path / REPORT_FILE).read_bytes()
        report = json.loads(raw)
    except (OSError, ValueError):
        return {"path": str(path.resolve()), "report_sha256": None}
    report = report if isinstance(report, dict) else {}
    seal = report.get("integrity") if isinstance(report.get("integrity"), dict) else {}
    verify = report.get("verify") if isinstance(report.get("verify"), dict) else {}
    return {"path": str(path.resolve()), "report_sha256": hashlib.sha256(raw).hexdigest(),
            "report_seal": seal.get("report"), "fingerprint": report.get("fingerprint"),
            "files": recorded_digests(report),
            "verified": {k: verify.get(k) for k in ("ok", "full", "rows", "sample", "max_length")}}


def recorded_provenance(directory: str | Path) -> dict[str, Any]:
    """``folder_provenance`` as this process first took it (the final save records what the run
    started on, even if the folder was replaced meanwhile)."""
    key = str(Path(directory).resolve())
    if key not in _TAKEN:
        _TAKEN[key] = folder_provenance(directory)
    return _TAKEN[key]
