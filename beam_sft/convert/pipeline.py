"""Sources -> converted rows: format detection, conversion, the reasoning policy, validation, accounting.

Public streaming API (used by ``beam-sft convert`` and by the prepare stage):

- ``convert_row(raw, *, format, options, source, row) -> BeamRow | Rejection``
- ``SourceConversion(path, *, format="auto", options)``: iterate it for ``BeamRow | Rejection``;
  ``.format``/``.detection`` tell what was decided, ``.summary`` counts as rows go by.
- ``iter_source(path, *, format="auto", options)``: the same iterator, without the object.
- ``convert_files(paths, *, format, options, output, rejects) -> ConvertReport``: writes
  ``rows.jsonl`` and ``rejects.jsonl``, one line per row, memory flat in the number of rows.

Every record read ends as one kept row or one rejection: ``summary.read == kept + rejected``.

>>> result = convert_row({"messages": [{"role": "user", "content": "Hi"},
...     {"role": "assistant", "reasoning_content": "Greet.", "content": "Hello"}]},
...     format="openai", options=ConvertOptions(), source="chat.jsonl", row=4)
>>> result["meta"]
{'source': 'chat.jsonl', 'row': 4}
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from beam_sft.convert.detect import detect_format
from beam_sft.convert.harmony_text import convert_harmony
from beam_sft.convert.hermes import convert_hermes
from beam_sft.convert.openai import convert_openai
from beam_sft.convert.options import FORMATS, ConvertOptions
from beam_sft.convert.policy import apply_missing_reasoning
from beam_sft.convert.rows import BeamRow, Rejection
from beam_sft.convert.sharegpt import convert_sharegpt
from beam_sft.convert.validate import validate
from beam_sft.data.rejects import RejectsWriter, SourceSummary, format_summary_table
from beam_sft.data.sources import BadRecord, iter_records
from beam_sft.errors import BeamError

Converter = Callable[..., "BeamRow | Rejection"]

# Explicit registry, keyed by the function's name; FORMAT_CONVERTERS maps --format to it.
CONVERTERS: dict[str, Converter] = {
    f.__name__: f for f in (convert_openai, convert_sharegpt, convert_hermes, convert_harmony)
}
FORMAT_CONVERTERS: dict[str, str] = {
    "openai": "convert_openai",
    "sharegpt": "convert_sharegpt",
    "hermes": "convert_hermes",
    "harmony": "convert_harmony",
}


def convert_row(
    raw: Any, *, format: str, options: ConvertOptions, source: str | None = None, row: int | None = None
) -> BeamRow | Rejection:
    """Convert, apply the missing-reasoning policy, validate; attach ``meta`` or the rejection context."""
    if format not in FORMAT_CONVERTERS:
        raise BeamError(f"unknown format {format!r} (known: {', '.join(FORMAT_CONVERTERS)})")
    if isinstance(raw, BadRecord):
        return Rejection("invalid_json", raw.error).at(source=source, row=row, raw=raw.text)
    converter = CONVERTERS[FORMAT_CONVERTERS[format]]
    try:
        result = converter(raw, options=options)
        if not isinstance(result, Rejection):
            result = apply_missing_reasoning(result, options.missing_reasoning)
            result = validate(result, options=options) or result
    except Exception as exc:  # a converter bug must not abort a long run; the row goes to rejects
        result = Rejection("converter_error", f"{type(exc).__name__}: {exc}")
    if isinstance(result, Rejection):
        return result.at(source=source, row=row, raw=raw)
    return {**result, "meta": {"source": source, "row": row}}


class SourceConversion:
    """One source, converted lazily. ``format='auto'`` reads the first ``options.detect_rows``
    records up front to decide the format, then streams the rest."""

    def __init__(
        self,
        path: str | Path,
        *,
        format: str = "auto",
        options: ConvertOptions | None = None,
        source: str | None = None,
    ):
        if format != "auto" and format not in FORMATS:
            raise BeamError(f"unknown format {format!r} (known: auto, {', '.join(FORMATS)})")
        self.options = options or ConvertOptions()
        self.source = str(path) if source is None else source
        self._records = iter_records(path)
        self._head: list[tuple[int, Any]] = []
        if format == "auto":
            self._head = list(itertools.islice(self._records, self.options.detect_rows))
            sampled = [raw for _, raw in self._head if not isinstance(raw, BadRecord)]
            self.format, self.detection = detect_format(sampled, self.options.columns)
        else:
            self.format, self.detection = format, f"{format}: given"
        self.summary = SourceSummary(self.source, self.format, self.detection)

    def __iter__(self) -> Iterator[BeamRow | Rejection]:
        for index, raw in itertools.chain(self._head, self._records):
            result = convert_row(raw, format=self.format, options=self.options, source=self.source, row=index)
            if isinstance(result, Rejection):
                self.summary.count_rejected(result.code)
            else:
                self.summary.count_kept()
            yield result


def iter_source(
    path: str | Path, *, format: str = "auto", options: ConvertOptions | None = None
) -> Iterator[BeamRow | Rejection]:
    """Stream one source's rows as ``BeamRow | Rejection``."""
    return iter(SourceConversion(path, format=format, options=options))


@dataclass
class ConvertReport:
    sources: list[SourceSummary] = field(default_factory=list)

    @property
    def read(self) -> int:
        return sum(s.read for s in self.sources)

    @property
    def kept(self) -> int:
        return sum(s.kept for s in self.sources)

    def table(self) -> str:
        return format_summary_table(self.sources)

    def over_rate(self, max_reject_rate: float) -> list[SourceSummary]:
        """Sources whose reject rate exceeds the limit (every source within it keeps the total within it)."""
        return [s for s in self.sources if s.reject_rate > max_reject_rate]

    def to_json(self) -> dict[str, Any]:
        return {"read": self.read, "kept": self.kept, "sources": [s.to_json() for s in self.sources]}


def convert_files(
    paths: Iterable[str | Path],
    *,
    format: str = "auto",
    options: ConvertOptions | None = None,
    output: str | Path | None = None,
    rejects: str | Path | None = None,
    on_source: Callable[[SourceConversion], None] | None = None,
) -> ConvertReport:
    """Convert every source into ``output`` (JSON Lines of BeamRows) and ``rejects`` (JSON Lines)."""
    report = ConvertReport()
    out_fh = None
    if output is not None:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        out_fh = open(output, "w", encoding="utf-8")
    try:
        with RejectsWriter(rejects) as rejects_out:
            for path in paths:
                conversion = SourceConversion(path, format=format, options=options)
                if on_source is not None:
                    on_source(conversion)
                for result in conversion:
                    if isinstance(result, Rejection):
                        rejects_out.write(result)
                    elif out_fh is not None:
                        out_fh.write(json.dumps(result, ensure_ascii=False) + "\n")
                report.sources.append(conversion.summary)
    finally:
        if out_fh is not None:
            out_fh.close()
    return report
