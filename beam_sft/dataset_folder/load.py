"""``load_prepared(DIR)``: a prepared folder opened for reading, after checking its contract."""

from __future__ import annotations

from pathlib import Path

from beam_sft.dataset_folder.layout import COLUMNS, DATASET_INFO_FILE, REQUIRED_COLUMNS
from beam_sft.errors import PreparedError


def load_prepared(directory: str | Path, *, integrity: bool = True, require_verified: bool = False,
                  require_report: bool = True, columns: tuple[str, ...] = REQUIRED_COLUMNS):
    """The dataset of a prepared folder, checked: its report is there (``require_report``), its files
    are what the report recorded (``integrity``), it verified cleanly (``require_verified``), it has
    the contract's columns with their types, and at least one row. Any failure is a PreparedError
    naming the path. (``require_report=False`` reads a view of the dataset files alone.)"""
    from beam_sft.dataset_folder.integrity import check_integrity
    from beam_sft.dataset_folder.report_json import require_report as require_report_of

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


KEPT_ASIDE_KEY = "kept_aside"  # set by prepare on a folder that failed verification and was moved aside


def recorded_digests(report: dict) -> dict[str, str] | None:
    """``{relative path: sha256}`` of every file report.json's ``files`` records (None when it
    records none): what a verification records as the bytes it checked."""
    files = report.get("files")
    entries = files.get("files") if isinstance(files, dict) else None
    if not isinstance(entries, dict):
        return None
    return {rel: entry.get("sha256") if isinstance(entry, dict) else None for rel, entry in sorted(entries.items())}


def check_counts(directory: str | Path, report: dict) -> None:
    """PreparedError naming the first count of report.json that disagrees with another
    (``report.count_problems``); the rows themselves are verify's to count."""
    from beam_sft.dataset_folder.layout import REPORT_FILE
    from beam_sft.dataset_folder.report_json import count_problems

    problems = count_problems(report)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise PreparedError(Path(directory) / REPORT_FILE, f"{problems[0]}{more}: the report was changed; "
                                                           "prepare again")


def check_verified(directory: str | Path, report: dict) -> None:
    """PreparedError unless report.json's verify section records a full verification (every row,
    the recorded max_length) of exactly the files the report records, that passed, and the folder
    is not one prepare kept aside after a failed verification. (That the files are still those is
    ``check_integrity``'s part.)"""
    aside = report.get(KEPT_ASIDE_KEY)
    if aside:
        raise PreparedError(directory, f"was kept aside by prepare after failing verification ({aside}): it is "
                                       "never trained; fix the data and prepare again")
    section = report.get("verify")
    if not isinstance(section, dict):
        raise PreparedError(directory, "was never verified: run `beam-sft verify` on it (or prepare with "
                                       "verification on)")
    if section.get("ok") is not True:
        raise PreparedError(directory, "failed verification (report.json verify.ok is false); see "
                                       "verify_violations.jsonl")
    if section.get("full") is not True or section.get("sample") is not None:
        raise PreparedError(directory, "was verified on a sample of its rows only: run `beam-sft verify` on "
                                       "every row")
    digests = recorded_digests(report)
    if digests is None or section.get("verified_files") != digests:
        raise PreparedError(directory, "report.json's verification was of other files than the ones it records "
                                       "(verify.verified_files): run `beam-sft verify` again")
    from beam_sft.dataset_folder.report_json import content_digest

    if section.get("verified_report") != content_digest(report):
        raise PreparedError(directory, "report.json changed since it was verified (verify.verified_report): run "
                                       "`beam-sft verify` again")
    policy = report.get("length_policy")
    prepared_max = policy.get("max_length") if isinstance(policy, dict) else None
    if section.get("max_length") != prepared_max:
        raise PreparedError(directory, f"was verified with max_length {section.get('max_length')}, prepared with "
                                       f"{prepared_max}: run `beam-sft verify` without --max-length")


def _kind(feature) -> str:
    inner = getattr(feature, "feature", None)
    if inner is not None:
        return f"list:{getattr(inner, 'dtype', '?')}"
    return getattr(feature, "dtype", "?")
