"""``beam-sft fixture`` and ``beam-sft check-tokenizer``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from beam_sft import compat
from beam_sft.errors import OutputRefused
from beam_sft.harmony.check import check_tokenizer, tokenizer_warnings
from beam_sft.harmony.fixture import ARCHES, build_fixture
from beam_sft.model_support import missing_support, model_type_at
from beam_sft.paths import Outputs, check_writable_target, writes, writes_nothing
from beam_sft.visible import visible


def register(subparsers) -> None:
    fixture = subparsers.add_parser(
        "fixture",
        help="build the offline test/demo checkpoint (tokenizer + tiny random model)",
        description="Write a local checkpoint with the Beam Harmony tokenizer, chat and response "
        "templates and a tiny random model (a dense Llama, or Beam's own architecture with --arch beam, "
        "or the other mixtures of experts --arch gpt_oss / deepseek_v3); nothing is downloaded, and two builds are byte-identical.",
    )
    fixture.add_argument("--out", required=True, type=Path, help="directory to write (created if missing)")
    fixture.add_argument(
        "--arch", choices=ARCHES, default="llama",
        help="llama (dense, default); beam (transformers' BeamForCausalLM: 6 layers, 5 sliding with "
        "RoPE : 1 full without, 1 dense then MoE layers of 8 experts top-2 in 2 groups, sigmoid router "
        "with correction bias, output gate, soft-capped logits); gpt_oss (4 experts top-2, attention sinks, 3 sliding : 1 full "
        "layers); deepseek_v3 (experts + a shared expert, multi-head latent attention)",
    )
    fixture.add_argument("--no-model", action="store_true", help="write only the tokenizer")
    fixture.set_defaults(func=run_fixture)
    writes(fixture, lambda a: Outputs(folders={"--out": a.out}))

    check = subparsers.add_parser(
        "check-tokenizer",
        help="list every way a tokenizer is unfit for Beam Harmony (exit 1 if any)",
        description="Load a tokenizer (local path or hub id) and check the Beam Harmony rules: "
        "markers as single tokens, special flags, eos, pad, chat template and assistant masks. "
        "Also prints the audit of the library internals the fast paths use (beam_sft.compat): a fast path "
        "an upgrade turned off is a warning. "
        "Exit 0 when fit (warnings are printed), 1 with the list of problems, 2 if it cannot be loaded.",
    )
    check.add_argument("path", help="tokenizer directory or hub id")
    check.set_defaults(func=run_check_tokenizer, quick_exit=True)
    writes_nothing(check, "prints the tokenizer's problems and warnings")


def run_fixture(args: argparse.Namespace) -> int:
    check_writable_target(args.out, kind="folder", label="--out")  # one line, not a traceback
    _check_not_the_users(args)
    before = _snapshot(args.out)
    out = build_fixture(args.out, with_model=not args.no_model, arch=args.arch)
    from beam_sft.dataset_folder import owner

    if not (out / owner.MARKER).exists():
        owner.write_marker(out)  # a later build may write here again
    after = _snapshot(out)
    written = sorted(name for name, stamp in after.items() if before.get(name) != stamp)
    print(f"wrote the fixture checkpoint to {visible(out, newlines=False)} (arch {args.arch}):")
    for name in written:
        print(f"  {name} ({(out / name).stat().st_size} bytes)")
    return 0


def _check_not_the_users(args: argparse.Namespace) -> None:
    """Refuse an --out folder holding anything a fixture build would not write byte for byte, unless a
    build of ours marked it (``dataset_folder.owner``): a user's model there must not be overwritten. A folder
    an older version built (no marker) is recognised by its bytes, since builds are byte-identical."""
    import filecmp
    import os
    import tempfile

    from beam_sft.dataset_folder import owner
    from beam_sft.harmony.fixture import build_fixture

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


def _print_library_audit() -> None:
    """The fast paths' audit of the library internals they use (``beam_sft.compat.problems``)."""
    off = [(what, problem) for what, found in compat.problems().items() for problem in found]
    for what, problem in off:
        print(f"warning: {what} off: {problem}")
    if not off:
        print("library internals: all as audited (every fast path on)")


def run_check_tokenizer(args: argparse.Namespace) -> int:
    from transformers import AutoTokenizer

    support = missing_support(model_type_at(args.path))  # which transformers the checkpoint needs
    try:
        tokenizer = AutoTokenizer.from_pretrained(args.path)
    except (OSError, ValueError, ImportError) as exc:  # a bad path or id; a model type it has no code for
        print(visible(f"beam-sft check-tokenizer: error: cannot load a tokenizer from {args.path}: "
                      f"{support or exc}", newlines=False), file=sys.stderr)
        return 2
    problems = check_tokenizer(tokenizer)
    if support:  # the tokenizer reads, the model beside it would not
        problems.append(f"config.json: {support}")
    warnings = tokenizer_warnings(tokenizer)
    for warning in warnings:
        print(f"warning: {warning}")
    _print_library_audit()
    if problems:
        print(f"{visible(args.path, newlines=False)}: {len(problems)} problem(s), unfit for Beam Harmony:")
        for problem in problems:
            print(f"  - {problem}")
        return 1
    print(f"{visible(args.path, newlines=False)}: fit for Beam Harmony")
    return 0
