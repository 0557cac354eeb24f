"""``beam-sft fixture`` and ``beam-sft check-tokenizer``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers) -> None:
    fixture = subparsers.add_parser(
        "fixture",
        help="build the offline test/demo checkpoint (tokenizer + tiny random model)",
        description="Write a local checkpoint with the Beam Harmony tokenizer, chat and response "
        "templates and a tiny random model (a dense Llama, or a mixture of experts shaped like Beam "
        "with --arch gpt_oss / deepseek_v3); nothing is downloaded, and two builds are byte-identical.",
    )
    from beam_sft.harmony.fixture import ARCHES

    fixture.add_argument("--out", required=True, type=Path, help="directory to write (created if missing)")
    fixture.add_argument(
        "--arch", choices=ARCHES, default="llama",
        help="llama (dense, default); gpt_oss (4 experts top-2, attention sinks, 3 sliding : 1 full "
        "layers); deepseek_v3 (experts + a shared expert, multi-head latent attention)",
    )
    fixture.add_argument("--no-model", action="store_true", help="write only the tokenizer")
    fixture.set_defaults(func=run_fixture)

    check = subparsers.add_parser(
        "check-tokenizer",
        help="list every way a tokenizer is unfit for Beam Harmony (exit 1 if any)",
        description="Load a tokenizer (local path or hub id) and check the Beam Harmony rules: "
        "markers as single tokens, special flags, eos, pad, chat template and assistant masks. "
        "Exit 0 when fit (warnings are printed), 1 with the list of problems, 2 if it cannot be loaded.",
    )
    check.add_argument("path", help="tokenizer directory or hub id")
    check.set_defaults(func=run_check_tokenizer)


def run_fixture(args: argparse.Namespace) -> int:
    from beam_sft.harmony.fixture import build_fixture
    from beam_sft.paths import check_writable_target

    check_writable_target(args.out, kind="folder", label="--out")  # one line, not a traceback
    before = _snapshot(args.out)
    out = build_fixture(args.out, with_model=not args.no_model, arch=args.arch)
    after = _snapshot(out)
    written = sorted(name for name, stamp in after.items() if before.get(name) != stamp)
    print(f"wrote the fixture checkpoint to {out} (arch {args.arch}):")
    for name in written:
        print(f"  {name} ({(out / name).stat().st_size} bytes)")
    return 0


def _snapshot(directory: Path) -> dict[str, int]:
    """File name -> modification time (ns), to report only the files a build wrote."""
    if not directory.is_dir():
        return {}
    return {p.name: p.stat().st_mtime_ns for p in directory.iterdir() if p.is_file()}


def run_check_tokenizer(args: argparse.Namespace) -> int:
    from transformers import AutoTokenizer

    from beam_sft.harmony.check import check_tokenizer, tokenizer_warnings

    try:
        tokenizer = AutoTokenizer.from_pretrained(args.path)
    except (OSError, ValueError) as exc:  # what from_pretrained raises for a bad path or id
        print(
            f"beam-sft check-tokenizer: error: cannot load a tokenizer from {args.path}: {exc}",
            file=sys.stderr,
        )
        return 2
    problems = check_tokenizer(tokenizer)
    warnings = tokenizer_warnings(tokenizer)
    for warning in warnings:
        print(f"warning: {warning}")
    if problems:
        print(f"{args.path}: {len(problems)} problem(s), unfit for Beam Harmony:")
        for problem in problems:
            print(f"  - {problem}")
        return 1
    print(f"{args.path}: fit for Beam Harmony")
    return 0
