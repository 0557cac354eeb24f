"""``beam-sft prepare`` and ``beam-sft merge-shards``.

    beam-sft prepare --config recipes/<name>.yaml [--output DIR] [--num-proc N] ...
    beam-sft prepare --data PATH [--data PATH ...] [--weight W ...] --format auto --tokenizer DIR \\
                     --output DIR [--max-length N] [--length-policy drop|trim_turns]
    beam-sft prepare ... --num-shards N --shard-index I      (one shard; then:)
    beam-sft merge-shards SHARD_DIR... --output DIR
    beam-sft prepare ... --engine ray [--ray-address ADDR] [--shards N]   (the shards as Ray tasks)

Flags override the recipe's ``data.prepare`` section; the tokenizer falls back to the recipe's
``model.path``, then to ``$BEAM_MODEL_ID``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import typing
from pathlib import Path
from typing import Any

from beam_sft.cli_args import count, non_negative_float
from beam_sft.config_utils import from_dict, load_yaml, set_by_overrides
from beam_sft.convert.cli import add_option_flags, option_overrides
from beam_sft.data.rejects import sources_table  # convert's table: one renderer
from beam_sft.dataset_folder.report_json import require_report
from beam_sft.errors import ConfigError, Interrupted
from beam_sft.paths import Outputs, writes
from beam_sft.prepare import pipeline
from beam_sft.prepare.children import children_die_with_me
from beam_sft.prepare.config import FORMAT_CHOICES, PrepareConfig, prepare_section
from beam_sft.prepare.progress import cli_progress
from beam_sft.prepare.shards import merge_shards
from beam_sft.visible import VisibleFormatter, visible


def _choices(field: str) -> tuple[str, ...]:
    """The values PrepareConfig's Literal-typed ``field`` accepts (one source of truth for the CLI)."""
    hint = typing.get_type_hints(PrepareConfig)[field]
    return typing.get_args(hint)


def register(subparsers: Any) -> None:
    prepare = subparsers.add_parser(
        "prepare",
        help="convert, encode and verify data sources into a prepared (tokenized, masked) dataset",
        description="Sources -> input_ids + assistant_masks identical to the tokenizer's chat template, "
        "saved with report.json and rejects.jsonl. A rerun with nothing changed reuses the result.",
    )
    prepare.add_argument("--config", type=Path, help="a recipe (its data.prepare section) or a PrepareConfig YAML")
    prepare.add_argument("--data", action="append", metavar="PATH|ORG/NAME[:CONFIG][@SPLIT]",
                         help="a source (repeatable): a local file or folder, or a datasets dataset read by "
                         "load_dataset(streaming=True). A path that exists locally always wins (a folder whose "
                         "README.md declares `configs:` is read as a dataset repository; one whose files are "
                         "named by split, test.jsonl or test/, only as FOLDER@SPLIT); otherwise ORG/NAME "
                         "(one slash, no file suffix) is a hub id; split defaults to train")
    prepare.add_argument("--weight", action="append", type=non_negative_float, metavar="W",
                         help="weight of the --data at the same position (default 1)")
    prepare.add_argument("--format", choices=FORMAT_CHOICES, help="source format of every --data (default auto)")
    prepare.add_argument("--tokenizer", help="tokenizer folder or hub id (default: recipe model.path, $BEAM_MODEL_ID)")
    prepare.add_argument("--output", "-o", help="output folder (default: out/prepared/<fingerprint>)")
    prepare.add_argument("--max-length", type=count(1), metavar="N")
    prepare.add_argument("--length-policy", choices=_choices("length_policy"))
    prepare.add_argument("--missing-reasoning", choices=_choices("missing_reasoning"))

    add_option_flags(prepare, missing_reasoning=False)  # every conversion option convert accepts, for every source
    prepare.add_argument("--num-proc", type=count(1), metavar="N", help="worker processes (default: every core)")
    prepare.add_argument("--seed", type=count(0))
    prepare.add_argument("--num-shards", type=count(1), metavar="N")
    prepare.add_argument("--shard-index", type=count(0), metavar="I")
    prepare.add_argument("--engine", choices=ENGINES, default="local",
                         help="local (default): this machine; ray: one Ray task per shard, merged here "
                         "(needs pip install 'beam-sft[ray]')")
    prepare.add_argument("--ray-address", metavar="ADDR",
                         help="--engine ray: the cluster (default $RAY_ADDRESS, else a local one)")
    prepare.add_argument("--shards", type=count(1), metavar="N",
                         help="--engine ray: shards (default: one per CPU of the cluster)")
    prepare.add_argument("--encoder", choices=_choices("encoder"))
    prepare.add_argument("--no-cache", action="store_true", help="encode again even if the output is up to date")
    prepare.add_argument("--no-verify", action="store_true", help="skip verification at the end")
    prepare.add_argument("--quiet", "-q", action="store_true", help="no progress bars or lines; warnings and errors only")
    prepare.set_defaults(func=run_prepare, quick_exit=True)
    # The flags' paths; a config's own sources and output are checked by the pipeline (the API path too).
    writes(prepare, lambda a: Outputs(inputs={"--data": a.data, "--tokenizer": a.tokenizer, "--config": a.config},
                                      folders={"--output": a.output}))

    merge = subparsers.add_parser(
        "merge-shards",
        help="join the directories of a sharded prepare into one prepared dataset",
        description="Check that the shards come from one run and are all there, then concatenate their "
        "datasets, rejects and report counts.",
    )
    merge.add_argument("shards", nargs="+", type=Path, metavar="SHARD_DIR")
    merge.add_argument("--output", "-o", required=True, type=Path)
    merge.add_argument("--num-proc", type=count(1), default=1, metavar="N", help="processes for verification")
    merge.add_argument("--no-verify", action="store_true")
    merge.add_argument("--quiet", "-q", action="store_true", help="no progress bars or lines; warnings and errors only")
    merge.set_defaults(func=run_merge, quick_exit=True)
    writes(merge, lambda a: Outputs(inputs={"SHARD_DIR": a.shards}, folders={"--output": a.output}))


ENGINES = ("local", "ray")


def _check_engine(args: argparse.Namespace) -> None:
    """The engine's flags go with their engine (checked before any work)."""
    if args.engine != "ray" and (args.ray_address is not None or args.shards is not None):
        raise ConfigError("engine", "--ray-address and --shards go with --engine ray")
    if args.engine == "ray" and (args.num_shards is not None or args.shard_index is not None):
        raise ConfigError("engine", "--engine ray plans the shards itself: give --shards N, not "
                                    "--num-shards/--shard-index")
    if (args.num_shards or 1) > 1 and args.shard_index is None:  # shard 0 alone, unsaid, looked like the whole run
        raise ConfigError("shard_index", f"--num-shards {args.num_shards} needs --shard-index I: which of the "
                                         f"{args.num_shards} shards this run prepares (0 to {args.num_shards - 1})")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if args.data:
        weights = args.weight or []
        if weights and len(weights) != len(args.data):
            raise ConfigError("weight", f"{len(weights)} --weight for {len(args.data)} --data")
        out["sources"] = [
            {"path": path, "format": args.format or "auto", **({"weight": weights[i]} if weights else {})}
            for i, path in enumerate(args.data)
        ]
    elif args.weight or args.format:
        raise ConfigError("data", "--weight and --format go with --data")
    for flag, key in (("tokenizer", "tokenizer"), ("output", "output"), ("max_length", "max_length"),
                      ("length_policy", "length_policy"), ("missing_reasoning", "missing_reasoning"),
                      ("num_proc", "num_proc"), ("seed", "seed"), ("num_shards", "num_shards"),
                      ("shard_index", "shard_index"), ("encoder", "encoder")):
        value = getattr(args, flag)
        if value is not None:
            out[key] = value
    if args.no_cache:
        out["cache"] = False
    if args.no_verify:
        out["verify"] = False
    return out


def _with_convert_flags(sources: Any, args: argparse.Namespace) -> Any:
    """Every source's ``convert`` mapping with the conversion flags on top (columns merged)."""
    flags = option_overrides(args)
    if not flags or not isinstance(sources, list):
        return sources
    out = []
    for source in sources:
        if not isinstance(source, dict):
            out.append(source)  # from_dict names what is wrong with it
            continue
        convert = dict(source.get("convert") or {})
        for key, value in flags.items():
            convert[key] = {**(convert.get(key) or {}), **value} if key == "columns" else value
        out.append({**source, "convert": convert})
    return out


def build_config(args: argparse.Namespace):
    """The PrepareConfig: the file's section, the flags on top, then the tokenizer fallbacks."""
    raw: dict[str, Any] = {}
    key_path = ""
    model_path = None
    if args.config is not None:
        data = load_yaml(args.config)
        raw, key_path = prepare_section(data)
        model = data.get("model")
        model_path = model.get("path") if isinstance(model, dict) else None
    elif not args.data:
        raise ConfigError("", "give --config or at least one --data")
    overrides = _overrides(args)
    merged = {**raw, **overrides}
    if "sources" in merged:
        merged["sources"] = _with_convert_flags(merged["sources"], args)
    if not merged.get("tokenizer"):
        merged["tokenizer"] = model_path or os.environ.get("BEAM_MODEL_ID") or None
    try:
        return from_dict(PrepareConfig, merged, key_path)
    except ConfigError as exc:  # which file, then which key; a key a flag gave is the flag's, not the file's
        key = exc.path[len(key_path) + 1:] if key_path and exc.path.startswith(f"{key_path}.") else exc.path
        if set_by_overrides(key, overrides):
            raise exc from None
        raise exc.in_file(args.config) from None


def _summary(directory: Path) -> str:
    report = require_report(directory)
    lines = [sources_table(report["sources"])]
    # (names of sources and files are anyone's: shown visible, one line each)
    lines.extend(visible(f"{name}: {entry['rows_out']} rows out after the mix (weight {entry['weight']})", newlines=False)
                 for name, entry in report["sources"].items() if entry.get("rows_out", entry["kept"]) != entry["kept"])
    lines.extend(visible(f"{name}: skipped {f['path']}, {f['reason']}", newlines=False)
                 for name, entry in report["sources"].items() for f in entry.get("skipped", ()))
    tokens = report["tokens"]
    lines.append(f"rows {tokens['rows']}  tokens {tokens['total']}  trained {tokens['trained']} "
                 f"({100 * tokens['trained_fraction']:.1f}%)  length p50 {tokens['length']['p50']} "
                 f"max {tokens['length']['max']}  encoder {report['encoder']['name']}")
    reasoning = report.get("reasoning") or {}
    if set(reasoning.get("turns") or {}) - {"unrecorded"} or reasoning.get("teacher_refused"):
        turns = ", ".join(f"{k} {v}" for k, v in reasoning["turns"].items())
        refused = ", ".join(f"{k} {v}" for k, v in reasoning.get("teacher_refused", {}).items()) or "none"
        verdicts = ", ".join(f"{k} {v}" for k, v in (reasoning.get("judge_verdicts") or {}).items())
        lines.append(f"reasoning of trained turns: {turns}; teacher refused: {refused}"
                     + (f"; judge: {verdicts}" if verdicts else ""))
    policy = report["length_policy"]
    if policy["max_length"]:
        lines.append(f"max_length {policy['max_length']} ({policy['policy']}): dropped {policy['dropped_too_long']}, "
                     f"trimmed {policy['trimmed_rows']} rows ({policy['trimmed_messages']} messages)")
    return "\n".join(lines)


@contextlib.contextmanager
def _signals_as_exceptions(received: list[int]):
    """SIGINT and SIGTERM raise Interrupted in this (the main) process, so that the staging folder is
    removed on the way out; ``received`` records the signal. The old handlers come back after.

    A signal can land where Python swallows the exception (an at-fork hook, a finalizer: "Exception
    ignored in ..."); then it is raised again a moment later (SIGALRM), and the swallowed one is not
    printed.
    """
    def handler(signum, frame):
        if not received:  # a second signal during clean-up must not cut the clean-up short
            received.append(signum)
            raise Interrupted(signum)

    def again(signum, frame):
        raise Interrupted(received[0])

    def unraisable(info):
        if isinstance(info.exc_value, Interrupted):
            signal.setitimer(signal.ITIMER_REAL, 0.05)  # swallowed: raise it again where it counts
            return
        previous_hook(info)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, again)
    previous_hook, sys.unraisablehook = sys.unraisablehook, unraisable
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.unraisablehook = previous_hook
        for s, h in previous.items():
            signal.signal(s, h)


def _interruptible(command: str, work) -> int:
    """Run ``work()``; an interrupt ends it with one line and exit code 128 + the signal number.

    Whatever exception the interrupt turns into on its way out (a library's clean-up may replace
    ours with its own), the signal decides the outcome.
    """
    received: list[int] = []
    try:
        with _signals_as_exceptions(received), children_die_with_me():  # every child: dies with us, quietly
            code = work()
    except BaseException:
        if not received:
            raise
        name = signal.Signals(received[0]).name
        print(f"beam-sft {command}: interrupted by {name}; nothing was published, staging removed", file=sys.stderr)
        return 128 + received[0]
    if received:  # it arrived as the run finished: the result was published whole (one rename)
        print(f"beam-sft {command}: {signal.Signals(received[0]).name} arrived as the run finished; "
              "its result is complete", file=sys.stderr)
        return 128 + received[0]
    return code


def run_prepare(args: argparse.Namespace) -> int:
    # Our INFO lines only: other libraries' loggers stay at WARNING (a torch import cut short by a signal
    # would otherwise print its INFO statistics at exit, after our one-line message).
    # Our lines name sources and files, anyone's names: each message shown visible, on its own line.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(VisibleFormatter("%(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    logging.getLogger("beam_sft").setLevel(logging.WARNING if args.quiet else logging.INFO)
    _check_engine(args)
    config = build_config(args)

    def work() -> int:
        with cli_progress(args.quiet) as progress:
            if args.engine == "ray":
                from beam_sft.prepare.ray_engine import prepare_on_ray  # (Ray only when asked for)

                out = prepare_on_ray(config, address=args.ray_address, shards=args.shards)
            else:
                out = pipeline.prepare(config, progress_interval=progress.interval, bars=progress.bars)
        print(_summary(out))
        print(f"prepared dataset: {visible(out, newlines=False)}")
        return 0

    return _interruptible("prepare", work)


def run_merge(args: argparse.Namespace) -> int:
    def work() -> int:
        with cli_progress(args.quiet):
            out = merge_shards(args.shards, args.output, verify=not args.no_verify, num_proc=args.num_proc)
        print(_summary(out))
        print(f"merged dataset: {visible(out, newlines=False)}")
        return 0

    return _interruptible("merge-shards", work)
