"""``beam-sft convert INPUT... -o rows.jsonl --rejects rejects.jsonl``: sources -> BeamRows.

Choices come from the option types (``ConvertOptions``), not restated here. Exit status: 0 when
rows were kept and every limit held; 1 when nothing was kept (an empty source, or a ``--format``
that fits no row) or a source exceeded ``--max-reject-rate``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from beam_sft.cli_args import count
from beam_sft.convert.options import (
    FORMAT_CHOICES,
    MissingReasoning,
    TextAfterToolCall,
    ToolCallContent,
    choices,
)
from beam_sft.errors import BeamError, ConfigError
from beam_sft.paths import Outputs, check_outputs, writes
from beam_sft.visible import visible


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction between 0 and 1")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "convert",
        help="convert chat datasets (OpenAI, ShareGPT, Hermes, Harmony, Alpaca/flat columns, glaive, Gemini, "
        "Bedrock Converse, chat logs, Batch API pairs) into BeamRows",
        description="Convert local JSONL/JSON/Parquet files (gzip read transparently) and Harmony .txt "
        "transcripts into BeamRows (JSON Lines). Every input row ends in "
        "the output or in the rejects file; a summary table per source (each file of a directory its own) "
        "goes to stdout.",
    )
    parser.add_argument("inputs", nargs="*", metavar="INPUT", help="files or directories (each file its own source)")
    add_batch_flags(parser)
    parser.add_argument(
        "--format",
        choices=FORMAT_CHOICES,
        default="auto",
        help="source format; auto reads each row by the format its shape shows (default: auto)",
    )
    parser.add_argument("-o", "--output", required=True, help="where to write the BeamRows (JSON Lines)")
    parser.add_argument(
        "--rejects", help="where to write rejected rows (JSON Lines: source, row, code, message, raw; default: "
        "beside -o, rows.jsonl -> rows.rejects.jsonl)"
    )
    add_option_flags(parser)
    parser.add_argument(
        "--tokenizer",
        help="reject text holding any added or special token of this tokenizer (other than the Harmony "
        "markers): it would become a control token",
    )
    parser.add_argument(
        "--max-reject-rate",
        type=_rate,
        metavar="R",
        help="exit non-zero when any source rejects more than this fraction (0..1) of its rows",
    )
    parser.add_argument("--config", help="YAML file of convert options (missing_reasoning, columns, ...)")
    parser.add_argument("--summary-json", help="also write the per-source summary as JSON")
    parser.set_defaults(func=run, quick_exit=True)
    writes(parser, convert_outputs)


REJECTS_SUFFIX = ".rejects.jsonl"


def rejects_path(args: argparse.Namespace) -> str:
    """``--rejects``, else beside ``-o`` with ``.rejects.jsonl`` for its last suffix: a rejected row is
    always written somewhere (convert's and reason's promise), never dropped for want of a flag.

    >>> rejects_path(argparse.Namespace(rejects=None, output="out/rows.jsonl"))
    'out/rows.rejects.jsonl'
    >>> rejects_path(argparse.Namespace(rejects=None, output="rows")), rejects_path(argparse.Namespace(rejects="r", output="o"))
    ('rows.rejects.jsonl', 'r')
    """
    if args.rejects:
        return args.rejects
    out = Path(args.output)
    return str(out.with_name((out.stem if out.suffix else out.name) + REJECTS_SUFFIX))


def convert_outputs(args: argparse.Namespace, *, inputs: dict | None = None, folders: dict | None = None) -> Outputs:
    """convert's (and reason's, with its own ``inputs`` and ``folders``) paths for the output guard. The
    rejects file beside ``-o``, when ``--rejects`` is not given, replaces only an earlier run's rejects."""
    from beam_sft.dataset_folder.rejects import is_rejects_file

    return Outputs(inputs={"INPUT": args.inputs, "--batch-input": getattr(args, "batch_input", None),
                           "--batch-output": getattr(args, "batch_output", None), "--config": getattr(args, "config", None),
                           "--tokenizer": getattr(args, "tokenizer", None), **(inputs or {})},
                   files={"-o": args.output, "--rejects": rejects_path(args) if args.output else args.rejects,
                          "--summary-json": args.summary_json},
                   folders=folders or {},
                   defaulted={} if args.rejects else {"--rejects": is_rejects_file})


def add_batch_flags(parser: argparse.ArgumentParser) -> None:
    """``--batch-input IN --batch-output OUT``: an OpenAI Batch API or Anthropic Message Batches pair, joined
    by custom_id (data/batch_api.py)."""
    parser.add_argument("--batch-input", metavar="IN.jsonl",
                        help="a batch input file: OpenAI Batch API (custom_id, body.messages) or Anthropic "
                        "Message Batches requests (custom_id, params.messages); with --batch-output")
    parser.add_argument("--batch-output", metavar="OUT.jsonl",
                        help="its output file (custom_id, response.body.choices; Anthropic's results: custom_id, "
                        "result.message): each request joined with its answer, one source; unmatched, failed and "
                        "duplicate lines are rejections with codes")


def sources_of(args: argparse.Namespace) -> list:
    """The command's sources: its INPUTs, then the batch pair when given (both flags, or neither)."""
    from beam_sft.data.batch_api import BatchPair

    pair = (getattr(args, "batch_input", None), getattr(args, "batch_output", None))
    if (pair[0] is None) != (pair[1] is None):
        raise BeamError("--batch-input and --batch-output go together")
    sources: list = list(args.inputs)
    if pair[0] is not None:
        sources.append(BatchPair(pair[0], pair[1]))
    if not sources:
        raise BeamError("no INPUT (give files or directories, or --batch-input with --batch-output)")
    return sources


def _column(text: str) -> tuple[str, str]:
    key, sep, name = text.partition("=")
    if not sep or not key or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=COLUMN (e.g. messages=dialog); an INPUT goes "
                                         "before --columns, or after --")
    return key, name


def add_option_flags(parser: argparse.ArgumentParser, *, missing_reasoning: bool = True) -> None:
    """The flags of every conversion option (``ConvertOptions``), with choices from the option types:
    ``convert`` and ``prepare`` both call this, so they accept the same options alike."""
    if missing_reasoning:  # prepare has its own (a PrepareConfig field, every source's default)
        parser.add_argument(
            "--missing-reasoning", choices=choices(MissingReasoning),
            help="trained turns without reasoning: drop the row (default), truncate the conversation "
            "after the last reasoned turn, or unmask them (weight 0)")
    parser.add_argument(
        "--tool-call-content", choices=choices(ToolCallContent),
        help="text said before tool calls: append it to the reasoning (default) or reject the row")
    parser.add_argument(
        "--text-after-tool-call", choices=choices(TextAfterToolCall),
        help="text after a turn's tool call: reject the row (default) or drop the text (counted)")
    parser.add_argument(
        "--allow-undeclared-tools", action="store_true", help="keep rows that call tools they do not declare")
    parser.add_argument(
        "--columns", action="append", nargs="+", type=_column, metavar="KEY=COLUMN",
        help="column mapping, the convert option `columns`: several pairs after one flag, or the flag "
        "repeated: e.g. messages=dialog, conversations=turns, role_key=speaker; flat rows: "
        "prompt=Question reasoning=Complex_CoT answer=Response (Alpaca's instruction/input/output/history "
        "by default)")
    parser.add_argument(
        "--pythonic-tool-calls", action="store_true",
        help="read an assistant text ending in [name(arg=value, ...)] as those tool calls (parsed as "
        "Python literals, never run; anything else stays text)")
    parser.add_argument(
        "--infer-tools", action="store_true",
        help="declare the tools a row calls but does not declare from the calls seen in the same source "
        "(names, argument names and types; marked in meta.inferred_tools, counted in the summary)")
    parser.add_argument(
        "--max-row-chars", type=count(1), metavar="N",
        help="reject a record longer than N characters as JSON (row_too_large) before any work on it "
        "(default 4194304, about a million tokens: more than any context trains)")


def option_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The ConvertOptions keys the flags of ``add_option_flags`` set (only those given)."""
    data: dict[str, Any] = {}
    for flag in ("missing_reasoning", "tool_call_content", "text_after_tool_call"):
        if getattr(args, flag, None):
            data[flag] = getattr(args, flag)
    if getattr(args, "allow_undeclared_tools", False):
        data["require_declared_tools"] = False
    if getattr(args, "columns", None):  # [[pair, ...], ...]: one list per --columns flag
        columns: dict[str, str] = {}
        for key, name in (pair for group in args.columns for pair in group):
            if columns.get(key, name) != name:  # one side would win unsaid
                raise BeamError(f"--columns names {key} twice ({columns[key]} and {name}): give it once")
            columns[key] = name
        data["columns"] = columns
    for flag in ("pythonic_tool_calls", "infer_tools"):
        if getattr(args, flag, False):
            data[flag] = True
    if getattr(args, "max_row_chars", None):
        data["max_row_chars"] = args.max_row_chars
    return data


def build_options(args: argparse.Namespace):
    from beam_sft.config_utils import load_yaml
    from beam_sft.convert.options import options_from_dict

    data: dict[str, Any] = load_yaml(args.config) if args.config else {}
    flags = option_overrides(args)
    if "columns" in flags:
        data["columns"] = {**(data.get("columns") or {}), **flags.pop("columns")}
    data.update(flags)
    if getattr(args, "tokenizer", None):
        from transformers import AutoTokenizer

        from beam_sft.convert.validate import forbidden_tokens

        data["forbidden_tokens"] = sorted(forbidden_tokens(AutoTokenizer.from_pretrained(args.tokenizer)))
    try:
        return options_from_dict(data, "convert")
    except ConfigError as exc:  # which file, then which key
        raise exc.in_file(getattr(args, "config", None)) from None


def check_output_paths(args: argparse.Namespace, *, inputs: dict | None = None, folders: dict | None = None) -> None:
    """No output is an input (or inside an input folder), no two outputs are one file, and each output
    can be a file: checked before anything is opened for writing (``beam_sft.paths``). ``inputs`` and
    ``folders`` (output folders, e.g. ``reason``'s cache) add a command's own paths."""
    check_outputs(convert_outputs(args, inputs=inputs, folders=folders))


def run(args: argparse.Namespace) -> int:
    from beam_sft.convert.pipeline import convert_files

    check_output_paths(args)
    sources = sources_of(args)
    options = build_options(args)

    def announce(conversion) -> None:
        print(visible(f"{conversion.source}: format {conversion.detection}", newlines=False), file=sys.stderr)

    from beam_sft.dataset_folder.staged_files import staged_files

    try:
        # staged beside each output and renamed into place at the end: a failed or killed run leaves the
        # earlier outputs as they were, and a link given as an output is replaced, not written through
        with staged_files({"-o": args.output, "--rejects": rejects_path(args),
                           "--summary-json": args.summary_json}) as staged:
            report = convert_files(
                sources,
                format=args.format,
                options=options,
                output=staged["-o"],
                rejects=staged["--rejects"],
                on_source=announce,
            )
            if args.summary_json:
                staged["--summary-json"].write_text(json.dumps(report.to_json(), indent=2), encoding="utf-8")
        print(report.table())
        if report.read > report.kept and not args.rejects:
            print(visible(f"beam-sft convert: {report.read - report.kept} rejected row(s) written to "
                          f"{rejects_path(args)}", newlines=False), file=sys.stderr)
    except OSError as exc:  # a full disk, a read-only folder: one line naming where (beam_sft.cli says the rest)
        from pathlib import Path

        from beam_sft.dataset_folder.oserrors import unwritable

        error = unwritable(Path(exc.filename).parent if exc.filename else Path(args.output).parent, exc)
        if error is exc:
            raise
        raise error from exc
    status = 0
    if report.kept == 0:
        empty = [visible(s.source, newlines=False) for s in report.sources if s.empty]
        why = f"; empty: {', '.join(empty)}" if empty else ""
        print(f"beam-sft convert: no row was kept ({report.read} read){why}", file=sys.stderr)
        status = 1
    if args.max_reject_rate is not None:
        over = report.over_rate(args.max_reject_rate)
        for s in over:
            print(
                f"beam-sft convert: {visible(s.source, newlines=False)} rejected {s.reject_rate:.1%} of its rows "
                f"(limit {args.max_reject_rate:.1%})",
                file=sys.stderr,
            )
        if over:
            status = 1
    return status
