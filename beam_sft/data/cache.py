"""The prepared-dataset cache: a directory is reused when its report carries the same fingerprint.

A run writes into a staging directory beside the target and renames it into place only when
everything (dataset, tokenizer, report, rejects) is written, so a directory that exists is complete,
and a reader (another training process, a rerun) never sees half a result.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

REPORT_FILE = "report.json"
DEFAULT_ROOT = Path("out") / "prepared"


def default_output(fingerprint: str, root: Path = DEFAULT_ROOT) -> Path:
    """Where a run without an explicit output goes: one directory per fingerprint."""
    return root / fingerprint[:16]


def read_report(directory: str | Path) -> dict | None:
    path = Path(directory) / REPORT_FILE
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def is_cached(directory: str | Path, fingerprint: str) -> bool:
    """True when ``directory`` holds a complete prepared dataset with this fingerprint."""
    directory = Path(directory)
    report = read_report(directory)
    return (
        report is not None
        and report.get("fingerprint") == fingerprint
        and (directory / "dataset_info.json").is_file()
        and (directory / "tokenizer").is_dir()
    )


def staging_dir(final: Path) -> Path:
    """A fresh directory beside ``final`` to write into (same filesystem, so the rename is atomic)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = final.parent / f".{final.name}.staging-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    return staging


def publish(staging: Path, final: Path) -> Path:
    """Move ``staging`` to ``final``, replacing an older result there."""
    if final.exists():
        old = final.parent / f".{final.name}.old-{os.getpid()}"
        os.replace(final, old)
        os.replace(staging, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, final)
    return final
