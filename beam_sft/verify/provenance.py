"""Folder provenance, verify's first look: report.json is there and its seal holds, and every file of
the folder is what the report recorded (``dataset_folder.integrity``: sizes and SHA-256 of the data files,
state.json, dataset_info.json, tokenizer/*, rejects.jsonl). Each finding is a folder violation that
names the file: ``report_seal`` for report.json itself, ``file_digest`` for the others."""

from __future__ import annotations

from pathlib import Path

from beam_sft.dataset_folder import report_json as prepared_report
from beam_sft.dataset_folder.integrity import integrity_problems
from beam_sft.dataset_folder.layout import REPORT_FILE
from beam_sft.verify.context import Violation

PROVENANCE_RULES = ("report_seal", "file_digest")


def check_provenance(directory: str | Path) -> tuple[list[Violation], bool]:
    """(violations, whether report.json may be written): never when it is missing or its seal is
    broken, since writing a verify section would seal the edit (or invent a report)."""
    directory = Path(directory)
    report = prepared_report.read_report(directory)
    if report is None:
        return [Violation("report_seal", None, "", None, f"{REPORT_FILE} is missing or not a JSON object: nothing "
                          "records what this folder holds (prepare it again)")], False
    out: list[Violation] = []
    writable = True
    for path, why in integrity_problems(directory, report):
        if path == directory / REPORT_FILE:
            out.append(Violation("report_seal", None, "", None, why))
            writable = False
        else:
            rel = path.relative_to(directory).as_posix() if path != directory else REPORT_FILE
            out.append(Violation("file_digest", None, "", None, f"{rel}: {why}"))
    return out, writable
