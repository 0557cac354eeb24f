"""Writing a prepared folder safely: never into the user's files, never half a result.

A run writes into a staging directory beside the target and renames it into place only when
everything (dataset, tokenizer, report, rejects) is written, so a directory that exists is complete,
and a reader (another training process, a rerun) never sees half a result. A target is replaced
only when it is absent, empty, or a prepared folder of ours (identified by its report).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from beam_sft.errors import OutputRefused
from beam_sft.prepared.layout import OWN_ENTRIES, OWN_PATTERNS
from beam_sft.prepared.lock import pid_alive
from beam_sft.prepared.oserrors import unwritable
from beam_sft.prepared.report import read_report

logger = logging.getLogger("beam_sft.prepare")


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


def staging_path(final: Path) -> Path:
    """This process's staging directory for ``final`` (named before it is made, so that a caller's
    clean-up covers an interrupt that lands while ``staging_dir`` makes it)."""
    return final.parent / f".{final.name}.staging-{os.getpid()}"


def staging_dir(final: Path) -> Path:
    """A fresh directory beside ``final`` to write into (same filesystem, so the rename is atomic).

    Staging left behind by dead processes (a kill -9) is removed first.
    """
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        clean_stale(final)
        staging = staging_path(final)
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir()
    except OSError as exc:
        raise unwritable(final.parent, exc) from exc
    return staging


def clean_stale(final: Path) -> list[Path]:
    """Remove ``.NAME.staging-PID`` and ``.NAME.old-PID`` folders beside ``final`` whose process is
    dead; returns what was removed."""
    pattern = re.compile(rf"\.{re.escape(final.name)}\.(staging|old)-(\d+)")
    removed = []
    if not final.parent.is_dir():
        return removed
    for entry in final.parent.iterdir():
        match = pattern.fullmatch(entry.name)
        if match and entry.is_dir() and not entry.is_symlink() and not pid_alive(int(match.group(2))):
            logger.info("removing %s, left by process %s which is gone", entry, match.group(2))
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


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


@contextmanager
def staged(final: Path) -> Iterator[Path]:
    """Make the staging folder for ``final`` and yield it; if the block fails in any way (an error, an
    interrupt), remove it, and turn an OSError into OutputUnwritable naming the folder. The path is
    named before the folder is made, so the clean-up also covers an interrupt during its making."""
    staging = staging_path(final)
    try:
        staging_dir(final)
        yield staging
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise unwritable(final.parent, exc) from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # (a failed verification moved it aside first)
        raise
