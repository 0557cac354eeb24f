"""``load_prepared(DIR)``: a prepared folder opened for reading, after checking its contract."""

from __future__ import annotations

from pathlib import Path

from beam_sft.errors import PreparedError
from beam_sft.prepared.layout import COLUMNS, DATASET_INFO_FILE, REQUIRED_COLUMNS


def load_prepared(directory: str | Path, *, integrity: bool = True, require_verified: bool = False,
                  require_report: bool = True, columns: tuple[str, ...] = REQUIRED_COLUMNS):
    """The dataset of a prepared folder, checked: its report is there (``require_report``), its files
    are what the report recorded (``integrity``), it verified cleanly (``require_verified``), it has
    the contract's columns with their types, and at least one row. Any failure is a PreparedError
    naming the path. (``require_report=False`` reads a view of the dataset files alone.)"""
    from beam_sft.prepared.integrity import check_integrity
    from beam_sft.prepared.report import require_report as require_report_of

    path = Path(directory)
    if not path.is_dir():
        raise PreparedError(path, "not a directory (run `beam-sft prepare` first)")
    if not (path / DATASET_INFO_FILE).is_file():
        raise PreparedError(path, "not a saved dataset (no dataset_info.json)")
    if require_report or integrity or require_verified:
        report = require_report_of(path)
        if integrity:
            check_integrity(path, report)
        if require_verified:
            check_verified(path, report)
    from datasets import load_from_disk

    try:
        dataset = load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as exc:
        raise PreparedError(path, f"not a saved dataset ({exc})") from exc
    except IndexError as exc:  # datasets saves 0 rows as 0 shards, then cannot load them
        raise PreparedError(path, "the prepared dataset has no rows") from exc
    missing = [c for c in columns if c not in dataset.column_names]
    if missing:
        raise PreparedError(path, f"prepared dataset lacks column(s) {missing}")
    wrong = [f"{c} is {dataset.features[c]}" for c in columns if _kind(dataset.features[c]) != COLUMNS[c]]
    if wrong:
        raise PreparedError(path, f"prepared dataset has the wrong column types: {'; '.join(wrong)}")
    if len(dataset) == 0:
        raise PreparedError(path, "the prepared dataset has no rows")
    return dataset


def check_verified(directory: str | Path, report: dict) -> None:
    """PreparedError unless the report says verification ran on every row and passed."""
    section = report.get("verify")
    if not isinstance(section, dict):
        raise PreparedError(directory, "was never verified: run `beam-sft verify` on it (or prepare with "
                                       "verification on)")
    if section.get("ok") is not True:
        raise PreparedError(directory, "failed verification (report.json verify.ok is false); see "
                                       "verify_violations.jsonl")


def _kind(feature) -> str:
    inner = getattr(feature, "feature", None)
    if inner is not None:
        return f"list:{getattr(inner, 'dtype', '?')}"
    return getattr(feature, "dtype", "?")
