"""Opening a prepared folder for verification: the one place verify reads the dataset, its
tokenizer and its report from (``open_prepared``). Names, the report reader and the tokenizer loader
are the prepared-folder contract's (``beam_sft.dataset_folder``); the dataset is opened without that
contract's refusals (digests, types, verified), because verify's job is to report what is wrong
with a folder, rule by rule, rather than refuse to look at it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from beam_sft.dataset_folder import report_json as prepared_report
from beam_sft.dataset_folder.arrow_dataset import SavedDataset, data_files, open_saved
from beam_sft.dataset_folder.layout import REJECTS_FILE
from beam_sft.dataset_folder.tokenizer import prepared_tokenizer
from beam_sft.errors import PreparedError, VerificationError
from beam_sft.visible import visible

REQUIRED_COLUMNS = ("input_ids", "assistant_masks", "row")  # what the rules read (the contract has more)


@dataclass
class PreparedFolder:
    """A prepared folder (published or still in staging): dataset, report, tokenizer, rejects."""

    directory: Path
    dataset: SavedDataset  # (read without ``datasets``: dataset_folder.arrow_dataset)
    report: dict

    @property
    def rejects(self) -> Path:
        return self.directory / REJECTS_FILE

    @cached_property
    def tokenizer(self):
        try:
            return prepared_tokenizer(self.directory)
        except PreparedError as exc:
            raise VerificationError(str(exc)) from exc


def read_report(directory: Path) -> dict:
    """report.json as a dict ({} when absent or unreadable: verify then checks what it can)."""
    return prepared_report.read_report(directory) or {}


def open_prepared(directory: str | Path) -> PreparedFolder:
    """The prepared folder at ``directory``, its dataset checked for the columns verify needs. A data
    file that cannot be read (empty, cut short, not Arrow) is named in the one line raised."""
    import pyarrow as pa

    path = Path(directory)
    try:
        dataset = open_saved(path)
    except IndexError as exc:  # datasets saves 0 rows as 0 shards
        raise VerificationError(f"{path}: the prepared dataset has no rows") from exc
    except FileNotFoundError as exc:
        raise VerificationError(f"{path}: not a prepared dataset ({exc})") from exc
    # An empty file ends the Arrow stream before its schema (StopIteration); one cut short says how
    # many bytes it missed (ArrowInvalid, or OSError), naming no file.
    except (OSError, ValueError, StopIteration, pa.ArrowException) as exc:
        raise VerificationError(f"{path}: not a prepared dataset ({unreadable_data_file(path) or exc})") from exc
    missing = [c for c in REQUIRED_COLUMNS if c not in dataset.column_names]
    if missing:
        raise VerificationError(f"{path}: prepared dataset lacks columns {missing}")
    if len(dataset) == 0:
        raise VerificationError(f"{path}: the prepared dataset has no rows")
    return PreparedFolder(path, dataset, read_report(path))


def unreadable_data_file(directory: Path) -> str | None:
    """``NAME: why`` for the first of the dataset's Arrow files that does not read to its end (each
    read whole: called only once opening the dataset failed), None when every one reads."""
    import pyarrow as pa

    try:
        files = data_files(directory)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # state.json itself: the error opening said so
    for file in files:
        try:
            with pa.OSFile(str(file), "rb") as source:
                for _ in pa.ipc.open_stream(source):
                    pass
        except (OSError, ValueError, StopIteration, pa.ArrowException) as exc:
            size = file.stat().st_size if file.is_file() else None
            why = "empty" if size == 0 else f"{size} bytes, not a whole Arrow stream: {exc}"
            return visible(f"{file.name}: {why}", newlines=False)  # (the name is state.json's)
    return None
