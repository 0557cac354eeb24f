"""Writing a prepared folder safely: never into the user's files, never half a result.

A run writes into a staging directory beside the target and renames it into place only when
everything (dataset, tokenizer, report, rejects) is written, so a directory that exists is complete,
and a reader (another training process, a rerun) never sees half a result. A target is replaced
only when it is absent, empty, or a prepared folder of ours: it holds our marker
(``dataset_folder.owner``) and every file in it, at any depth, is one its report recorded or one that
prepare and verify write beside them. A staging or old folder beside the target is removed as a dead
run's only when it holds our marker and the run the marker names is gone; names prove nothing.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import os
import re
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from beam_sft.dataset_folder import owner
from beam_sft.dataset_folder.layout import OWN_ENTRIES, OWN_PATTERNS, TOKENIZER_DIR, UNDIGESTED
from beam_sft.dataset_folder.oserrors import unwritable
from beam_sft.dataset_folder.report_json import read_report
from beam_sft.errors import OutputRefused

logger = logging.getLogger("beam_sft.prepare")

EARLIER_VERSION = ("it was prepared by an earlier beam-sft, which did not mark its folders (no {marker}), so it "
                   "cannot be told from a folder of yours: remove it yourself (rm -r {target}) or give another "
                   "--output")


def check_output_target(final: Path) -> None:
    """Raise OutputRefused unless ``final`` is absent, an empty folder, or a prepared folder of ours.

    Ours means: our marker, and no file (at any depth, hidden ones too) beyond what the report
    recorded and what is written after it, so that replacing it can only remove what a run of ours wrote.
    """
    from beam_sft.paths import check_writable_target

    final = Path(final)
    if final.is_symlink():
        raise OutputRefused(final, "it is a symbolic link")
    check_writable_target(final, kind="folder", label="the output")  # a file, or a path under a file
    if not final.exists():
        return
    try:
        entries = sorted(p.name for p in final.iterdir())
    except OSError as exc:
        raise unwritable(final, exc) from exc
    if not entries:
        return
    if not owner.is_ours(final):
        report = read_report(final)
        if isinstance(report, dict) and "fingerprint" in report:
            raise OutputRefused(final, EARLIER_VERSION.format(marker=owner.MARKER, target=final), hint=False)
        shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
        raise OutputRefused(final, f"it holds files that no prepare wrote ({shown})")
    foreign = foreign_files(final)
    if foreign:
        shown = ", ".join(str(final / rel) for rel in foreign[:5])
        raise OutputRefused(final, f"it is a prepared folder but also holds {shown}, which no prepare wrote")


def foreign_files(folder: Path) -> list[str]:
    """Every file or folder in ``folder`` (at any depth) that its report does not account for."""
    report = read_report(folder)
    recorded = report.get("files", {}).get("files") if isinstance(report, dict) else None
    if not isinstance(recorded, dict):
        return ["no report.json recording its files"]
    allowed = set(recorded) | set(UNDIGESTED) | {owner.MARKER}
    parents = {p.as_posix() for rel in recorded for p in Path(rel).parents if p.as_posix() != "."}
    out = []
    for root, dirs, files in os.walk(folder):
        base = Path(root).relative_to(folder)
        for name in sorted(dirs):
            rel = (base / name).as_posix()
            if rel not in parents or (Path(root) / name).is_symlink():
                out.append(rel + "/")
        dirs[:] = [d for d in dirs if (base / d).as_posix() in parents and not (Path(root) / d).is_symlink()]
        for name in sorted(files):
            rel = (base / name).as_posix()
            if rel not in allowed:
                out.append(rel)
    return sorted(out)


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
        if staging.exists() or staging.is_symlink():
            if not owner.is_ours(staging):  # our pid's name, but not a folder we made
                raise OutputRefused(staging, "it is in the way of this run's staging folder and is not one "
                                             f"of ours (no {owner.MARKER}); move it away", hint=False)
            if not remove_ours(staging, "an earlier run with this pid's staging folder"):
                raise OutputRefused(staging, "it is in the way of this run's staging folder and holds files no run "
                                             "of ours wrote; move it away", hint=False)
        _make_marked(staging)
    except OSError as exc:
        raise unwritable(final.parent, exc) from exc
    return staging


def _make_marked(folder: Path) -> None:
    """Make ``folder`` and mark it ours as one step: SIGINT/SIGTERM wait while it is made (an interrupt
    between the two would leave a folder no clean-up may remove), and a marker that cannot be written
    takes the folder with it."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        folder.mkdir()
        try:
            owner.write_marker(folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def remove_own(folder: Path) -> None:
    """Remove ``folder`` when this process made it (its marker names this run); else leave it."""
    marker = owner.read_marker(folder) if owner.is_ours(folder) else None
    if marker is not None and marker.get("pid") == os.getpid() and marker.get("started") == owner.process_start(os.getpid()):
        remove_ours(folder, "this run's staging folder")


# A staging folder's own entries, before its report records the files: what prepare, merge-shards and
# verify write there (the scratch folder, shards being written, the atomic writers' temporary names).
WORK_DIR = ".work"
_STAGING_TOP = re.compile(r"\.shard-\d+\.arrow|\.(report\.json|report\.html|report_lengths\.png|"
                          r"verify_violations\.jsonl)\.tmp(-?\d+)?")
_WORK_FILES = re.compile(r"records\.arrow|teacher_refusals\.json|part-\d+\.arrow")


def unexplained(folder: Path) -> list[str]:
    """Every entry of ``folder`` (at any depth, hidden ones and links too) that no run of ours writes
    there: not one its report records, nor a name prepare, merge-shards or verify writes into a staging
    folder. Empty means removing it can only remove what our runs wrote."""
    from beam_sft.digests import TOKENIZER_FILES

    report = read_report(folder)
    recorded = report.get("files", {}).get("files") if isinstance(report, dict) else None
    recorded = set(recorded) if isinstance(recorded, dict) else set()

    def ours(rel: Path, is_dir: bool) -> bool:
        parts, name = rel.parts, rel.name
        if rel.as_posix() in recorded and not is_dir:
            return True
        if len(parts) == 1:
            if is_dir:
                return name in (TOKENIZER_DIR, WORK_DIR)
            return (name in OWN_ENTRIES or name == owner.MARKER or bool(_STAGING_TOP.fullmatch(name))
                    or any(fnmatch.fnmatchcase(name, p) for p in OWN_PATTERNS))
        if len(parts) == 2 and not is_dir and parts[0] == TOKENIZER_DIR:
            return name in TOKENIZER_FILES or name.startswith("chat_template")
        if len(parts) == 2 and not is_dir and parts[0] == WORK_DIR:
            return bool(_WORK_FILES.fullmatch(name))
        return False

    out = []
    for root, dirs, files in os.walk(folder):
        base = Path(root).relative_to(folder)
        for name in sorted(dirs):
            if (Path(root) / name).is_symlink() or not ours(base / name, True):
                out.append((base / name).as_posix() + "/")
        dirs[:] = [d for d in dirs if not (Path(root) / d).is_symlink() and ours(base / d, True)]
        for name in sorted(files):
            if (Path(root) / name).is_symlink() or not ours(base / name, False):
                out.append((base / name).as_posix())
    return sorted(out)


def remove_ours(folder: Path, what: str) -> bool:
    """The one way prepare removes a folder (a dead run's staging or old folder, its own staging on
    failure, a replaced or kept-aside result): only a real folder holding our marker and nothing a run
    of ours does not write (``unexplained``). Anything else stays, said in a warning naming what it
    holds; returns whether it was removed. ``what`` says which folder it is, for that warning."""
    folder = Path(folder)
    if not owner.is_ours(folder):
        logger.warning("left %s (%s): it holds no %s marker, so it is not ours to remove", folder, what, owner.MARKER)
        return False
    extra = unexplained(folder)
    if extra:
        shown = ", ".join(extra[:5]) + (f" and {len(extra) - 5} more" if len(extra) > 5 else "")
        logger.warning("left %s (%s): it also holds %s, which no run of ours wrote; remove it yourself once "
                       "that is saved", folder, what, shown)
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return True


def clean_stale(final: Path) -> list[Path]:
    """Remove ``.NAME.staging-PID`` and ``.NAME.old-PID`` folders beside ``final`` that a dead run of
    ours left: the folder holds our marker and the process is gone (a folder without the marker is a
    user's, whatever its name, and stays); returns what was removed."""
    pattern = re.compile(rf"\.{re.escape(final.name)}\.(staging|old)-(\d+)")
    removed = []
    if not final.parent.is_dir():
        return removed
    for entry in final.parent.iterdir():
        match = pattern.fullmatch(entry.name)
        if match and not owner.is_ours(entry) and not entry.is_symlink() and entry.is_dir() \
                and not owner.pid_alive(int(match.group(2))):
            # a kill -9 between making a staging folder and marking it leaves it empty, or holding only
            # a marker cut off mid-write: rmdir removes only an empty folder, and the one file taken
            # first is a small unreadable marker, so nothing anyone wrote can go this way
            with contextlib.suppress(OSError):
                _drop_partial_marker(entry)
                entry.rmdir()
                removed.append(entry)
            continue
        if not match or not owner.is_ours(entry):
            continue
        marker = owner.read_marker(entry)
        # staging: the marker names its writer; old: the folder was renamed by the process in its name
        if not owner.run_alive(marker, int(match.group(2))) and remove_ours(
                entry, f"left by process {match.group(2)}, which is gone"):
            logger.info("removed %s, left by process %s which is gone", entry, match.group(2))
            removed.append(entry)
    return removed


def _drop_partial_marker(folder: Path) -> None:
    """Remove ``folder``'s marker when it is the folder's only entry and what a write of ours cut off by
    a kill -9 leaves (``owner.cut_marker``); anything else (a user's file of that name, ``{}`` say) is
    left, and ``rmdir`` then refuses the folder."""
    entries = list(folder.iterdir())
    marker = folder / owner.MARKER
    if entries == [marker] and marker.is_file() and not marker.is_symlink() and marker.stat().st_size < 4096:
        try:
            text = marker.read_text(encoding="utf-8")
        except (OSError, ValueError):
            return
        if owner.cut_marker(text):
            marker.unlink()


def publish(staging: Path, final: Path) -> Path:
    """Move ``staging`` to ``final``, replacing an older result there (checked again: it may have changed)."""
    check_output_target(final)
    if final.exists():
        old = final.parent / f".{final.name}.old-{os.getpid()}"
        if old.exists() or old.is_symlink():
            raise OutputRefused(old, f"it is in the way of replacing {final} and is not ours to remove; move it "
                                     "away", hint=False)
        os.replace(final, old)
        os.replace(staging, final)
        remove_ours(old, f"the result {final} replaced")
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
        remove_own(staging)
        raise unwritable(final.parent, exc) from exc
    except BaseException:
        remove_own(staging)  # (a failed verification moved it aside first); never a folder not ours
        raise
