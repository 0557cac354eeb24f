"""``beam-sft verify DIR`` and ``beam-sft inspect DIR --row N [--html out.html]``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

AUTO_PARALLEL_ROWS = 2000  # below this, starting worker processes costs more than it saves


def register(subparsers) -> None:
    verify = subparsers.add_parser(
        "verify", help="check every row's masks; exit 1 on any violation",
        description="Check the masks of a prepared dataset against every rule; write report.json's "
                    "\"verify\" section, verify_violations.jsonl and report_lengths.png beside it.")
    verify.add_argument("directory", type=Path, metavar="DIR", help="prepared dataset directory")
    verify.add_argument("--num-proc", type=int, default=0,
                        help="worker processes (default: all cores for large datasets, else 1)")
    verify.add_argument("--sample", type=int, default=None, metavar="N", help="check N random rows only")
    verify.add_argument("--seed", type=int, default=0, help="seed for --sample and the parity sample")
    verify.add_argument("--parity-sample", type=int, default=None, metavar="N",
                        help="rows that also get the sampled rules: re-tokenized, prompts re-rendered "
                             "(default 32; the report's coverage says which rules)")
    verify.add_argument("--max-length", type=int, default=None,
                        help="longest allowed row (default: report.json's length_policy.max_length)")
    verify.add_argument("--max-violations", type=int, default=20, metavar="N",
                        help="violations to print (all are in verify_violations.jsonl)")
    verify.add_argument("--no-histogram", action="store_true", help="do not write report_lengths.png")
    verify.set_defaults(func=run_verify)

    inspect = subparsers.add_parser(
        "inspect", help="show one row's tokens, trained ones highlighted",
        description="Show one prepared row token by token: trained tokens highlighted, context dimmed, "
                    "each message labelled with its role and channel.")
    inspect.add_argument("directory", type=Path, metavar="DIR", help="prepared dataset directory")
    inspect.add_argument("--row", type=int, required=True, metavar="N", help="row position in the dataset")
    inspect.add_argument("--html", type=Path, default=None, metavar="PATH", help="write a standalone HTML page")
    colors = inspect.add_mutually_exclusive_group()
    colors.add_argument("--color", dest="color", action="store_true", default=None,
                        help="ANSI colours even when stdout is not a terminal")
    colors.add_argument("--no-color", dest="color", action="store_false",
                        help="no ANSI colours (trained text in ⟪ ⟫)")
    inspect.set_defaults(func=run_inspect)


def _num_proc(requested: int, directory: Path) -> int:
    if requested > 0:
        return requested
    from beam_sft.verify.api import load_prepared_dataset

    rows = len(load_prepared_dataset(directory))
    return 1 if rows < AUTO_PARALLEL_ROWS else max(1, min(os.cpu_count() or 1, 16))


def run_verify(args: argparse.Namespace) -> int:
    from beam_sft.verify.api import PARITY_SAMPLE, verify_prepared
    from beam_sft.verify.report import VIOLATIONS_FILE, format_table

    parity = PARITY_SAMPLE if args.parity_sample is None else args.parity_sample
    result = verify_prepared(args.directory, num_proc=_num_proc(args.num_proc, args.directory),
                             sample=args.sample, seed=args.seed, max_length=args.max_length,
                             histogram=not args.no_histogram, parity_sample=parity)
    print(format_table(result.stats))
    if result.ok:
        return 0
    shown = result.violations[: max(0, args.max_violations)]
    print(f"\n{len(result.violations)} violations in {result.stats['violations']['rows']} rows", file=sys.stderr)
    for violation in shown:
        print(violation.format(), file=sys.stderr)
    if len(result.violations) > len(shown):
        print(f"... {len(result.violations) - len(shown)} more", file=sys.stderr)
    print(f"all violations: {args.directory / VIOLATIONS_FILE}", file=sys.stderr)
    return 1


def run_inspect(args: argparse.Namespace) -> int:
    from beam_sft.verify.api import inspect_row

    if args.html is not None:  # beam_sft.paths: never over (or into) the folder read, never onto a folder
        from beam_sft.paths import check_paths, check_writable_target

        check_paths({"DIR": args.directory}, {"--html": args.html})
        check_writable_target(args.html, kind="file", label="--html")
    color = args.color if args.color is not None else sys.stdout.isatty() and "NO_COLOR" not in os.environ
    text, page = inspect_row(args.directory, args.row, color=color, html=args.html is not None)
    if args.html is not None:
        args.html.parent.mkdir(parents=True, exist_ok=True)
        args.html.write_text(page, encoding="utf-8")
        print(f"wrote {args.html}")
    else:
        sys.stdout.write(text)
    return 0
