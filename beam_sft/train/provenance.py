"""Which data a run read, by digest: a prepared folder's path may hold other data later (a new
prepare replaces it), so ``beam_run.json`` and the TensorBoard run record name the data by its
report's digest, its fingerprint and its files' digests, taken when the run starts.

The caller takes it once and keeps it: the trainer on ``TrainingRun.prepared_data`` (the run record
and the final save read that), the eval set in its summary (``eval_set.resolve_eval``). Nothing here
remembers a folder, so a second look is a fresh one (and shows a replaced folder as replaced)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from beam_sft.dataset_folder.layout import REPORT_FILE


def folder_provenance(directory: str | Path) -> dict[str, Any]:
    """What names the data of a prepared folder, not only its path (which a later prepare may fill
    with other data): report.json's own SHA-256 and seal, the fingerprint, every data file's
    SHA-256 as recorded (and checked by ``data.check_trainable`` before training), and the
    verification, as they are now: the caller takes it once, at the start, and keeps the value."""
    import hashlib

    from beam_sft.dataset_folder.load import recorded_digests

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
            "verified": {k: verify.get(k) for k in ("ok", "full", "rows", "sample", "max_length")},
            "summary": data_summary(report)}


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def data_summary(report: dict) -> dict[str, Any]:
    """The counts a model card states about the data, as the report holds them when the run starts
    (the folder may hold other data by the time a merge or export writes the card): per source read,
    kept, rejected by code and rows out, rejects by code, rows, tokens, trained tokens, the verified
    flag, trained tool-call tokens, and the configured sources (for the card's hub dataset ids).

    >>> data_summary({"tokens": {"rows": 2, "total": 9, "trained": 4}})["tokens"]
    9
    """
    sources = []
    for name, entry in _dict(report.get("sources")).items():
        if isinstance(entry, dict):
            sources.append({"name": name, "format": entry.get("format"), "read": entry.get("read", 0),
                            "kept": entry.get("kept", 0), "rejected": dict(_dict(entry.get("rejected"))),
                            "rows_out": entry.get("rows_out", 0)})
    tokens, verify = _dict(report.get("tokens")), _dict(report.get("verify"))
    keys = ("path", "name", "split", "revision", "data_files")
    configured = [{k: s.get(k) for k in keys} for s in _dict(report.get("config")).get("sources") or []
                  if isinstance(s, dict)]
    return {"sources": sources, "rejected_by_code": dict(_dict(_dict(report.get("rejects")).get("by_code"))),
            "rows": tokens.get("rows"), "tokens": tokens.get("total"), "trained_tokens": tokens.get("trained"),
            "verified": bool(verify.get("ok")),
            "trained_tool_call_tokens": _dict(_dict(verify.get("trained_by_channel")).get("tool_call")).get("tokens", 0),
            "configured_sources": configured}
