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

from beam_sft.errors import OutputRefused

REPORT_FILE = "report.json"
DEFAULT_ROOT = Path("out") / "prepared"
# What a prepared folder of ours may hold; anything else in a target means the folder is the user's.
OWN_ENTRIES = ("tokenizer", REPORT_FILE, "rejects.jsonl", "verify_violations.jsonl", "report_lengths.png",
               "dataset_info.json", "state.json")
OWN_PATTERNS = ("data-*.arrow", "cache-*.arrow")




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


def check_output_target(final: Path) -> None:
    """Raise OutputRefused unless ``final`` is absent, an empty folder, or a prepared folder of ours.

    Ours means: a parseable report.json with a fingerprint, and no entry beyond what prepare writes,
    so that replacing it can only ever remove what an earlier run of ours wrote.
    """
    final = Path(final)
    if final.is_symlink():
        raise OutputRefused(final, "it is a symbolic link")
    if not final.exists():
        return
    if not final.is_dir():
        raise OutputRefused(final, "it is a file, not a folder")
    entries = sorted(p.name for p in final.iterdir())
    if not entries:
        return
    report = read_report(final)
    if report is None or "fingerprint" not in report:
        shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
        raise OutputRefused(final, f"it holds files that no prepare wrote ({shown})")
    foreign = [n for n in entries if n not in OWN_ENTRIES and not any(Path(n).match(g) for g in OWN_PATTERNS)]
    if foreign:
        raise OutputRefused(final, f"it is a prepared folder but also holds {', '.join(foreign[:5])}")


def staging_dir(final: Path) -> Path:
    """A fresh directory beside ``final`` to write into (same filesystem, so the rename is atomic)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = final.parent / f".{final.name}.staging-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    return staging


def publish(staging: Path, final: Path) -> Path:
    """Move ``staging`` to ``final``, replacing an older result there (checked again: it may have changed)."""
    check_output_target(final)
    if final.exists():
        old = final.parent / f".{final.name}.old-{os.getpid()}"
        os.replace(final, old)
        os.replace(staging, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, final)
    return final
