"""Helpers of the reader tests (glaive, gemini, bedrock, chat_log, batch join, inferred tools):
run a whole source through ``SourceConversion`` and check that every record is accounted for."""

from __future__ import annotations

import json
from pathlib import Path

from beam_sft.convert.options import ConvertOptions
from beam_sft.convert.pipeline import SourceConversion
from beam_sft.convert.rows import Rejection


def give_reasoning(row: dict) -> dict:
    """A fill that writes reasoning into every assistant turn without it (a teacher's stand-in), so
    that rows of sources without reasoning (glaive, Bedrock, Vertex) can be kept."""
    messages = [{**m, "reasoning_content": "I work out what the user needs."}
                if m.get("role") == "assistant" and not m.get("reasoning_content") else m
                for m in row["messages"]]
    return {**row, "messages": messages}


def write_jsonl(path: Path, rows: list, *, newline: str = "\n", blank_between: bool = False) -> Path:
    sep = newline * 2 if blank_between else newline
    path.write_bytes((sep.join(json.dumps(r, ensure_ascii=False) for r in rows) + newline).encode("utf-8"))
    return path


def run_source(path, *, fmt: str = "auto", fill=give_reasoning, **options) -> tuple[list, SourceConversion]:
    """``(results, conversion)``: each result a BeamRow or a Rejection; read = kept + rejected checked."""
    conversion = SourceConversion(path, format=fmt, options=ConvertOptions(**options), fill=fill)
    results = list(conversion)
    summary = conversion.summary
    kept = [r for r in results if not isinstance(r, Rejection)]
    assert summary.read == len(results) == summary.kept + summary.n_rejected, "a record is neither kept nor rejected"
    assert summary.kept == len(kept)
    return results, conversion


def codes(results: list) -> list[str]:
    return [r.code if isinstance(r, Rejection) else "kept" for r in results]
