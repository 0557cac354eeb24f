"""Which folders are ours: the ``.beam-sft-owner`` marker, written into every folder a run makes.

A folder is replaced or removed only when it holds this marker (and, for a published folder, nothing
the marker's run did not write). Names (``.NAME.staging-PID``, ``.NAME.old-PID``) and keys (a
``report.json`` with a ``fingerprint``) prove nothing: a user may have a folder called anything,
holding anything. The marker records the run that made the folder: its pid, the process's start time
(so a reused pid is not taken for the run) and the host (a pid says nothing about another machine's
processes, so a folder made on another host is never taken for a dead run's).

The marker is a dot file, so it is not one of the digested files (``dataset_folder.integrity``), and it
travels with the folder when staging is renamed into place.
"""

from __future__ import annotations

import functools
import json
import os
import socket
from pathlib import Path

MARKER = ".beam-sft-owner"
TOOL = "beam-sft"


def process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, from /proc), or None where unknown.

    With the pid it names one process for good: a later process given the same pid starts later.
    """
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: count from the last ")"
    fields = text[text.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


@functools.lru_cache(maxsize=1)
def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return None


def this_run() -> dict:
    """The marker's content for this process."""
    return {"tool": TOOL, "pid": os.getpid(), "started": process_start(os.getpid()), "host": socket.gethostname(),
            "boot": _boot_id()}


def cut_marker(text: str) -> bool:
    """Whether ``text`` is what a kill -9 can leave of ``write_marker``'s write: nothing, or the start of
    our marker's line without its end (its keys come first, in this order). Anything else in a file of
    that name (``{}``, a user's notes) is not ours, cut or not.

    >>> cut_marker(""), cut_marker('{"tool": "beam-sft", "pi'), cut_marker('{"to'), cut_marker("{}")
    (True, True, True, False)
    """
    head = json.dumps({"tool": TOOL, "pid": 0})[:-2]  # '{"tool": "beam-sft", "pid": '
    return text == "" or ((text.startswith(head) or head.startswith(text)) and not text.endswith("\n"))


def write_marker(folder: Path) -> None:
    """Mark ``folder`` (just made by this run) as ours."""
    path = Path(folder) / MARKER
    with open(path, "x", encoding="utf-8") as fh:  # never over a file that is there
        fh.write(json.dumps(this_run()) + "\n")


def read_marker(folder: Path) -> dict | None:
    """The marker of ``folder`` when it holds a valid one of ours; else None (no marker, a link, a
    file that is not our JSON)."""
    path = Path(folder) / MARKER
    try:
        if path.is_symlink() or not path.is_file():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("tool") != TOOL or not isinstance(data.get("pid"), int) \
            or isinstance(data.get("pid"), bool):
        return None
    return data


def is_ours(folder: Path) -> bool:
    """``folder`` is a real folder (not a link) holding our marker."""
    folder = Path(folder)
    return not folder.is_symlink() and folder.is_dir() and read_marker(folder) is not None


def same_host(marker: dict) -> bool:
    return marker.get("host") == socket.gethostname() and marker.get("boot") == _boot_id()


def pid_alive(pid: int) -> bool:
    from beam_sft.dataset_folder.lock import pid_alive as alive

    return alive(pid)


def run_alive(marker: dict, pid: int | None = None) -> bool:
    """Whether the run that wrote ``marker`` (or, with ``pid``, the process ``pid``) may still be
    running. True when it cannot be told (another host, another boot unknown): never taken for dead."""
    from beam_sft.dataset_folder.lock import pid_alive

    if not same_host(marker):
        return marker.get("host") != socket.gethostname()  # same host, another boot: dead; another host: unknown
    pid = marker["pid"] if pid is None else pid
    if not pid_alive(pid):
        return False
    if pid == marker["pid"] and marker.get("started") is not None:
        return process_start(pid) == marker["started"]  # the pid was given to another process since
    return True
