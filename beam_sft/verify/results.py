"""Write what verify found: report.json's "verify" section, a short terminal table, a PNG histogram."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from beam_sft.dataset_folder.layout import HISTOGRAM_FILE, VIOLATIONS_FILE  # noqa: F401 (re-exported names)
from beam_sft.dataset_folder.report_json import update_report
from beam_sft.verify.png import write_lengths_png
from beam_sft.visible import json_visible, visible


def merge_verify_section(directory: Path, section: dict, *, key: str = "verify") -> Path:
    """Set report.json's "verify" section (or ``key``), keeping every other section as it is
    (atomically; refused when the report's seal does not hold)."""
    return update_report(directory, key, section)


class ViolationWriter:
    """Writes violations to DIR/verify_violations.jsonl as they come (an empty file when clean);
    with no directory it only discards them. The file appears complete or not at all."""

    def __init__(self, directory: Path | None):
        self.path = Path(directory) / VIOLATIONS_FILE if directory is not None else None
        self._tmp = self.path.with_name(f".{self.path.name}.tmp{os.getpid()}") if self.path else None
        self._file = None
        self.discard = False  # set before the end: the old file stays, this run's is dropped

    def __enter__(self) -> ViolationWriter:
        if self._tmp is not None:
            self._file = self._tmp.open("w", encoding="utf-8")
        return self

    def write(self, violation) -> None:
        if self._file is not None:
            # (read in a terminal: a row's bidi or C1 character, quoted in a message, is a JSON escape)
            self._file.write(json_visible(violation.to_json()) + "\n")

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._file is None:
            return
        self._file.close()
        if exc_type is None and not self.discard:
            os.replace(self._tmp, self.path)
        else:
            self._tmp.unlink(missing_ok=True)


def format_table(section: dict) -> str:
    """A short, plain-text summary of the verify section for the terminal. Names come from data
    (sources, channels, reject codes): shown ``visible``."""
    lengths = section["lengths"]
    lines = [
        f"rows {section['rows']} (checked {section['rows_checked']})   tokens {section['tokens']}   "
        f"trained {section['trained_tokens']} ({100 * section['trained_fraction']:.1f}%)",
        f"length  min {lengths['min']}  p50 {lengths['p50']}  p90 {lengths['p90']}  p99 {lengths['p99']}  "
        f"max {lengths['max']}" + (f"  (max_length {section['max_length']})" if section.get("max_length") else ""),
        "",
        f"{'trained by channel':<22}{'tokens':>10}{'share':>9}",
    ]
    for name, entry in section["trained_by_channel"].items():
        lines.append(f"  {visible(name, newlines=False):<20}{entry['tokens']:>10}{100 * entry['fraction_of_trained']:>8.1f}%")
    lines += ["", f"{'source':<30}{'rows':>7}{'tokens':>10}{'trained':>9}"]
    for name, entry in section["by_source"].items():
        name = visible(name, newlines=False)
        shown = name if len(name) <= 28 else "…" + name[-27:]
        lines.append(f"  {shown:<28}{entry['rows']:>7}{entry['tokens']:>10}{100 * entry['trained_fraction']:>8.1f}%")
    rejected = section["rejections"]
    if rejected["total"]:
        codes = visible(", ".join(f"{code} {n}" for code, n in rejected["by_code"].items()), newlines=False)
        lines += ["", f"rejected {rejected['total']}: {codes}"]
    if section.get("notes"):
        lines += ["", "notes (not violations): " + visible(", ".join(f"{k} {n}" for k, n in section["notes"].items()),
                                                            newlines=False)]
    coverage = section.get("coverage")
    if coverage:
        sampled = coverage["sampled"]
        lines += ["", f"every rule on {section['rows_checked']} rows; sampled parts ("
                  f"{', '.join(sampled['parts'])}) on {sampled['rows']} of them"]
    found = section["violations"]
    lines += ["", f"violations {found['total']}" + (
        ": " + ", ".join(f"{rule} {n}" for rule, n in found["by_rule"].items()) if found["total"] else " — OK")]
    return "\n".join(lines)


def write_histogram(directory: Path, lengths: Mapping[int, int], fractions: Sequence[int]) -> Path:
    """DIR/report_lengths.png: row lengths (``{length: rows}``) and the per-row trained fraction
    (rows per bin of equal width over [0, 1]), drawn by ``png`` (numpy and zlib, no matplotlib)."""
    return write_lengths_png(Path(directory) / HISTOGRAM_FILE, dict(lengths), list(fractions))
