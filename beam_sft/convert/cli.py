"""``beam-sft convert INPUT... -o rows.jsonl --rejects rejects.jsonl``: sources -> BeamRows."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

FORMAT_CHOICES = ("auto", "openai", "sharegpt", "hermes", "harmony")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "convert",
        help="convert chat datasets (OpenAI, ShareGPT, Hermes, Harmony) into BeamRows",
        description="Convert local JSONL/JSON/Parquet files into BeamRows (JSON Lines). Every input row ends in "
        "the output or in the rejects file; a summary table per source goes to stdout.",
    )
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="files or directories, one source each")
    parser.add_argument(
        "--format",
        choices=FORMAT_CHOICES,
        default="auto",
        help="source format; auto decides per file from its first rows (default: auto)",
    )
    parser.add_argument("-o", "--output", required=True, help="where to write the BeamRows (JSON Lines)")
    parser.add_argument(
        "--rejects", help="where to write rejected rows (JSON Lines: source, row, code, message, raw)"
    )
    parser.add_argument(
        "--missing-reasoning",
        choices=("drop", "truncate", "unmask"),
        help="trained turns without reasoning: drop the row (default), truncate the conversation "
        "after the last reasoned turn, or unmask them (weight 0)",
    )
    parser.add_argument(
        "--tool-call-content",
        choices=("reasoning", "reject"),
        help="text beside tool calls: append it to the reasoning (default) or reject the row",
    )
    parser.add_argument(
        "--allow-undeclared-tools", action="store_true", help="keep rows that call tools they do not declare"
    )
    parser.add_argument(
        "--max-reject-rate",
        type=float,
        metavar="R",
        help="exit non-zero when any source rejects more than this fraction of its rows",
    )
    parser.add_argument("--config", help="YAML file of convert options (missing_reasoning, columns, ...)")
    parser.add_argument("--summary-json", help="also write the per-source summary as JSON")
    parser.set_defaults(func=run)


def build_options(args: argparse.Namespace):
    from beam_sft.config_utils import from_dict, load_yaml
    from beam_sft.convert.options import ConvertOptions

    data: dict[str, Any] = load_yaml(args.config) if args.config else {}
    if args.missing_reasoning:
        data["missing_reasoning"] = args.missing_reasoning
    if args.tool_call_content:
        data["tool_call_content"] = args.tool_call_content
    if args.allow_undeclared_tools:
        data["require_declared_tools"] = False
    return from_dict(ConvertOptions, data, "convert")


def run(args: argparse.Namespace) -> int:
    from beam_sft.convert.pipeline import convert_files

    options = build_options(args)

    def announce(conversion) -> None:
        print(f"{conversion.source}: format {conversion.detection}", file=sys.stderr)

    report = convert_files(
        args.inputs,
        format=args.format,
        options=options,
        output=args.output,
        rejects=args.rejects,
        on_source=announce,
    )
    print(report.table())
    if args.summary_json:
        with open(args.summary_json, "w", encoding="utf-8") as fh:
            json.dump(report.to_json(), fh, indent=2)
    if args.max_reject_rate is not None:
        over = report.over_rate(args.max_reject_rate)
        for s in over:
            print(
                f"beam-sft convert: {s.source} rejected {s.reject_rate:.1%} of its rows "
                f"(limit {args.max_reject_rate:.1%})",
                file=sys.stderr,
            )
        if over:
            return 1
    return 0
