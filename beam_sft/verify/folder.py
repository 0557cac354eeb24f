"""Opening a prepared folder for verification: the one place verify reads the dataset, its
tokenizer and its report from (``open_prepared``), so it can be pointed at the shared contract of a
prepared folder in one line."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from beam_sft.errors import VerificationError

REQUIRED_COLUMNS = ("input_ids", "assistant_masks", "row")
REPORT_FILE = "report.json"
REJECTS_FILE = "rejects.jsonl"
TOKENIZER_DIR = "tokenizer"


@dataclass
class PreparedFolder:
    """A prepared folder (published or still in staging): dataset, report, tokenizer, rejects."""

    directory: Path
    dataset: object
    report: dict

    @property
    def rejects(self) -> Path:
        return self.directory / REJECTS_FILE

    @cached_property
    def tokenizer(self):
        path = self.directory / TOKENIZER_DIR
        if not path.is_dir():
            raise VerificationError(f"{path}: no tokenizer saved with the prepared dataset")
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path)


def read_report(directory: Path) -> dict:
    """report.json as a dict ({} when absent or unreadable: verify then checks what it can)."""
    path = Path(directory) / REPORT_FILE
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return report if isinstance(report, dict) else {}


def open_prepared(directory: str | Path) -> PreparedFolder:
    """The prepared folder at ``directory``, its dataset checked for the columns verify needs."""
    from datasets import load_from_disk

    path = Path(directory)
    try:
        dataset = load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as exc:
        raise VerificationError(f"{path}: not a prepared dataset ({exc})") from exc
    except IndexError as exc:  # datasets saves 0 rows as 0 shards, then cannot load them
        raise VerificationError(f"{path}: the prepared dataset has no rows") from exc
    if not hasattr(dataset, "column_names") or isinstance(dataset.column_names, dict):
        raise VerificationError(f"{path}: not a prepared dataset (a dataset dictionary, not one dataset)")
    missing = [c for c in REQUIRED_COLUMNS if c not in dataset.column_names]
    if missing:
        raise VerificationError(f"{path}: prepared dataset lacks columns {missing}")
    if len(dataset) == 0:
        raise VerificationError(f"{path}: the prepared dataset has no rows")
    return PreparedFolder(path, dataset, read_report(path))
