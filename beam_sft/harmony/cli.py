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
    _check_not_the_users(args)
    before = _snapshot(args.out)
    out = build_fixture(args.out, with_model=not args.no_model, arch=args.arch)
    from beam_sft.prepared import owner

    if not (out / owner.MARKER).exists():
        owner.write_marker(out)  # a later build may write here again
    after = _snapshot(out)
    written = sorted(name for name, stamp in after.items() if before.get(name) != stamp)
    print(f"wrote the fixture checkpoint to {out} (arch {args.arch}):")
    for name in written:
        print(f"  {name} ({(out / name).stat().st_size} bytes)")
    return 0


def _check_not_the_users(args: argparse.Namespace) -> None:
    """Refuse an --out folder holding anything a fixture build would not write byte for byte, unless a
    build of ours marked it (``prepared.owner``): a user's model there must not be overwritten. A folder
    an older version built (no marker) is recognised by its bytes, since builds are byte-identical."""
    import filecmp
    import os
    import tempfile

    from beam_sft.errors import OutputRefused
    from beam_sft.harmony.fixture import build_fixture
    from beam_sft.prepared import owner

    out = Path(args.out)
    if out.is_symlink():
        raise OutputRefused(out, "--out is a symbolic link; give a new or empty folder", hint=False)
    if not out.is_dir() or not any(out.iterdir()) or owner.is_ours(out):
        return
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.check-", dir=out.parent) as tmp:
        build_fixture(tmp, with_model=not args.no_model, arch=args.arch)
        for root, _, files in os.walk(out):
            for name in files:
                rel = (Path(root) / name).relative_to(out)
                ours = Path(tmp) / rel
                if not ours.is_file() or not filecmp.cmp(out / rel, ours, shallow=False):
                    raise OutputRefused(out, f"--out holds {out / rel}, which this fixture build did not write; give "
                                             "a new or empty folder", hint=False)


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
