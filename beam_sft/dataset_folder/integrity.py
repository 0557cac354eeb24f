"""The digests of a prepared folder's files, recorded in report.json (``files``) and checked before
the folder is reused (a cache hit) or trained on.

Every file but the report and verify's outputs (``layout.UNDIGESTED``) is recorded with its size
and a full SHA-256: the dataset's Arrow files, ``dataset_info.json``, ``state.json``, every file of
``tokenizer/`` and ``rejects.jsonl``. A full digest is cheap next to what the folder cost to make
(SHA-256 runs at about 2 GB/s on these machines: a 1.5 GB dataset is checked in under a second),
and a sampled one would miss a single flipped bit. Sizes are compared first, so a truncated file is
named without reading it.
"""

from __future__ import annotations

from pathlib import Path

from beam_sft.dataset_folder.layout import UNDIGESTED
from beam_sft.digests import file_digest
from beam_sft.errors import PreparedError

ALGORITHM = "sha256"


def _digest(path: Path) -> str:
    return file_digest(path)  # SHA-256 (ALGORITHM), the same digest the fingerprints use


def _files(directory: Path) -> list[str]:
    out = []
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory).as_posix()
        if (path.is_dir() or rel in UNDIGESTED or any(part.startswith(".") for part in Path(rel).parts)
                or Path(rel).match("cache-*.arrow")):  # datasets' map caches, if a reader made any
            continue
        out.append(rel)
    return out


def file_digests(directory: str | Path) -> dict:
    """``{"algorithm": "sha256", "files": {relative path: {"size": n, "sha256": hex}}}`` for DIR."""
    directory = Path(directory)
    files = {}
    for rel in _files(directory):
        path = directory / rel
        files[rel] = {"size": path.stat().st_size, ALGORITHM: _digest(path)}
    return {"algorithm": ALGORITHM, "files": files}


def integrity_problems(directory: str | Path, report: dict, *, digests: bool = True) -> list[tuple[Path, str]]:
    """Every way DIR differs from what its report recorded, as (path at fault, why): the report's
    own seal, then each file missing, added, resized or changed (``digests=False``: sizes only)."""
    from beam_sft.dataset_folder.layout import REPORT_FILE
    from beam_sft.dataset_folder.report_json import seal_problem

    directory = Path(directory)
    out: list[tuple[Path, str]] = []
    problem = seal_problem(report)
    if problem is not None:
        out.append((directory / REPORT_FILE, problem))
    recorded = report.get("files")
    if not isinstance(recorded, dict) or not isinstance(recorded.get("files"), dict) \
            or recorded.get("algorithm") != ALGORITHM:
        return out + [(directory, "report.json records no file digests (written by an older beam-sft?): "
                                  "prepare it again")]
    expected = recorded["files"]
    present = set(_files(directory))
    unchanged = []
    for rel, entry in expected.items():
        path = directory / rel
        if not isinstance(entry, dict) or not isinstance(entry.get("size"), int) \
                or not isinstance(entry.get(ALGORITHM), str):
            out.append((path, f"report.json's files entry for it is not {{size, {ALGORITHM}}}: the report was changed"))
        elif rel not in present:
            out.append((path, "missing (it was written with the dataset): the folder was changed; prepare again"))
        elif (size := path.stat().st_size) != entry["size"]:
            out.append((path, f"size {size} bytes, recorded {entry['size']}: the file was changed or cut short; "
                              "prepare again"))
        else:
            unchanged.append((rel, entry))
    for rel in sorted(present - set(expected)):
        out.append((directory / rel, "not part of the prepared folder as written: the folder was changed; prepare again"))
    if digests:
        for rel, entry in unchanged:
            if _digest(directory / rel) != entry[ALGORITHM]:
                out.append((directory / rel, f"{ALGORITHM} differs from the one recorded: the file was changed; "
                                             "prepare again"))
    return out


def check_integrity(directory: str | Path, report: dict | None = None, *, digests: bool = True) -> None:
    """Raise PreparedError naming the first file at fault: report.json when its seal does not hold
    (``report.seal_problem``), else a file that is missing, added, resized or changed since the
    report recorded it (``digests=False``: sizes only)."""
    from beam_sft.dataset_folder.report_json import require_report

    report = report if report is not None else require_report(directory)
    problems = integrity_problems(directory, report, digests=digests)
    if problems:
        path, why = problems[0]
        raise PreparedError(path, why)
