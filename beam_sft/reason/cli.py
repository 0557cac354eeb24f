"""``beam-sft reason SOURCE... -o OUT --base-url URL --model NAME``: a teacher writes missing reasoning.

Reads what `convert` reads (the same `--format`, `--columns` and conversion flags), asks an
OpenAI-compatible endpoint for the reasoning of every trained assistant turn that has none, and
writes BeamRows (-o) and rejects (--rejects): every input row is in one of the two. The
API key comes from an environment variable (--api-key-env; default BEAM_TEACHER_API_KEY, then
OPENAI_API_KEY), never from a flag. Exit status: 0 when rows were kept, 1 when none was.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from beam_sft.cli_args import count, non_negative_float, positive_float
from beam_sft.convert.options import FORMAT_CHOICES
from beam_sft.errors import BeamError, ConfigError
from beam_sft.visible import visible


def register(subparsers: Any) -> None:
    from beam_sft.convert.cli import add_option_flags

    parser = subparsers.add_parser(
        "reason", help="a teacher model writes the reasoning that trained turns lack (OpenAI-compatible server)",
        description=" ".join(__doc__.split("\n\n")[1].split()) + " A turn whose reply is refused (a reason code of "
        "stage reason) falls back to --missing-reasoning.",
        allow_abbrev=False)  # no `--api-key` as a prefix of --api-key-env: a key never goes on a command line
    from beam_sft.convert.cli import add_batch_flags

    parser.add_argument("inputs", nargs="*", metavar="SOURCE", help="files or directories, as convert reads them")
    add_batch_flags(parser)
    parser.add_argument("-o", "--output", required=True, help="where to write the BeamRows (JSON Lines)")
    parser.add_argument("--rejects", help="where to write rejected rows (JSON Lines: source, row, code, message, raw; "
                        "default: beside -o, rows.jsonl -> rows.rejects.jsonl)")
    parser.add_argument("--format", choices=FORMAT_CHOICES, default="auto", help="source format (default: auto)")
    add_option_flags(parser)
    parser.add_argument("--config", help="YAML file of convert options (missing_reasoning, columns, ...)")
    parser.add_argument("--tokenizer", help="also refuse teacher text (and rows) holding this tokenizer's "
                        "added or special tokens")
    teacher = parser.add_argument_group("teacher")
    teacher.add_argument("--base-url", required=True, help="the endpoint, e.g. http://127.0.0.1:8000/v1")
    teacher.add_argument("--model", required=True, help="the model name the server knows")
    teacher.add_argument("--api-key-env", metavar="VAR",
                         help="environment variable holding the API key (default: BEAM_TEACHER_API_KEY, then "
                         "OPENAI_API_KEY; none: no key sent)")
    teacher.add_argument("--concurrency", type=count(1), default=8, help="requests in flight (default 8)")
    teacher.add_argument("--max-requests", type=count(0), help="hard bound on requests sent, retries included; "
                         "then remaining turns fall back to the policy (teacher_budget_exhausted)")
    teacher.add_argument("--max-tokens-total", type=count(0), help="hard bound on the tokens the replies report using")
    teacher.add_argument("--max-tokens", type=count(1), default=2048,
                         help="max_tokens of each request (default 2048); a reply that reaches it is cut off")
    teacher.add_argument("--temperature", type=non_negative_float, default=0.6, help="sampling temperature (default 0.6)")
    teacher.add_argument("--timeout", type=positive_float, default=120.0,
                         help="seconds a request may take in all, connect to the reply's last byte, however "
                         "slowly the server sends it (default 120)")
    teacher.add_argument("--retries", type=count(0), default=4,
                         help="retries on 429/5xx/timeouts/connection errors, backoff with jitter (default 4)")
    teacher.add_argument("--prompt", metavar="FILE", help="prompt file (default: beam_sft/reason/prompts/v1.txt)")
    teacher.add_argument("--cache-dir", metavar="DIR", help="answers cache (default: ~/.cache/beam-sft/teacher)")
    teacher.add_argument("--max-reasoning-chars", type=count(1), default=None,
                         help="longer teacher text is refused (teacher_too_long; default 20000)")
    teacher.add_argument("--max-response-bytes", type=count(1), default=None,
                         help="a reply is read up to this many bytes, a larger one refused (teacher_reply_too_large; "
                         "default 24 x --max-reasoning-chars + 65536)")
    teacher.add_argument("--allow-insecure-http", action="store_true", default=None,
                         help="send the API key over plain http to a host that is not this machine (refused "
                         "otherwise: anyone on the network path can read it)")
    judge = parser.add_argument_group("judge (one more request per filled turn: does the reasoning lead to this turn?)")
    judge.add_argument("--judge", action="store_true", help="ask a judge model of each filled turn; a 'no' is "
                       "teacher_inconsistent, a reply that is not a verdict judge_failed (the --judge-* flags imply it)")
    judge.add_argument("--judge-base-url", help="the judge's endpoint (default: --base-url)")
    judge.add_argument("--judge-model", help="the judge's model (default: --model)")
    judge.add_argument("--judge-api-key-env", metavar="VAR", help="variable holding the judge's key (default: "
                       "the teacher's key)")
    judge.add_argument("--judge-prompt", metavar="FILE", help="judge prompt file (default: "
                       "beam_sft/reason/prompts/judge_v1.txt)")
    parser.add_argument("--summary-json", help="also write the per-source summary and the teacher's counts as JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    parser.set_defaults(func=run)
    from beam_sft.convert.cli import convert_outputs
    from beam_sft.paths import writes

    # convert's outputs, its prompt file read and its cache folder written, all through the one guard
    writes(parser, lambda a: convert_outputs(a, inputs={"--prompt": a.prompt}, folders={"--cache-dir": a.cache_dir}))


def teacher_config(args: argparse.Namespace):
    from beam_sft.config_utils import from_dict

    data = {k: getattr(args, k) for k in ("base_url", "model", "api_key_env", "concurrency", "max_requests",
                                          "max_tokens_total", "timeout", "retries", "prompt", "cache_dir",
                                          "max_tokens", "temperature", "max_reasoning_chars",
                                          "max_response_bytes", "allow_insecure_http")
            if getattr(args, k) is not None}
    judge = {k: getattr(args, f"judge_{k}") for k in ("base_url", "model", "api_key_env", "prompt")
             if getattr(args, f"judge_{k}", None) is not None}
    if judge or getattr(args, "judge", False):
        data["judge"] = judge
    from beam_sft.reason.config import TeacherConfig

    try:
        return from_dict(TeacherConfig, data)
    except ConfigError as exc:
        raise BeamError(f"--{exc.path.replace('.', '-').replace('_', '-')}: {str(exc)[len(exc.path) + 2:]}") from None


def run(args: argparse.Namespace) -> int:
    from beam_sft.convert.cli import build_options, check_output_paths, rejects_path
    from beam_sft.dataset_folder.staged_files import staged_files

    # Before anything is opened for writing: -o, --rejects, --summary-json and the cache are not the
    # inputs (nor the prompt file), nor one another (beam_sft.paths).
    check_output_paths(args, inputs={"--prompt": args.prompt}, folders={"--cache-dir": args.cache_dir})
    config = teacher_config(args)
    options = build_options(args)

    def announce(conversion) -> None:
        if not args.quiet:
            print(visible(f"{conversion.source}: format {conversion.detection}", newlines=False), file=sys.stderr)

    # One writer per output, each staged and renamed into place at the end: a second run on the
    # same -o is refused, a killed run leaves the earlier outputs as they were (beam_sft.dataset_folder.staged_files).
    with staged_files({"-o": args.output, "--rejects": rejects_path(args), "--summary-json": args.summary_json}) as staged:
        status = _run(args, config, options, announce, staged)
    return status


def _run(args, config, options, announce, staged) -> int:
    from beam_sft.convert.cli import sources_of
    from beam_sft.reason.run import reason_files

    result = reason_files(sources_of(args), config, options=options, format=args.format, output=staged["-o"],
                          rejects=staged.get("--rejects"), quiet=args.quiet, on_source=announce)
    print(result.report.table())
    stats, budget = result.stats, result.budget
    rejected = ", ".join(f"{code} {n}" for code, n in sorted(stats.rejected.items())) or "none"
    print(f"teacher: {stats.asked} turn(s) without reasoning, {stats.filled} filled, refused: {rejected}; "
          f"{budget.requests} request(s), {budget.tokens} token(s), {stats.cached} from cache, {budget.errors} error(s)"
          + (f", {budget.estimated} reply(ies) without a usable usage counted at max_tokens" if budget.estimated else ""))
    if config.judge is not None:
        print("judge: " + ", ".join(f"{name} {stats.verdicts.get(name, 0)}" for name in ("yes", "no", "unparseable",
                                                                                       "failed")))
    if result.damaged:
        one = result.damaged == 1
        print(f"beam-sft reason: {result.damaged} cache entr{'y' if one else 'ies'} of the wrong shape (edited or "
              f"damaged) {'was' if one else 'were'} asked again and rewritten", file=sys.stderr)
    if stats.rejected.get("teacher_budget_exhausted"):
        print("beam-sft reason: the budget was spent; the remaining turns fell back to the policy "
              "(run again with a larger budget: answers already given come from the cache)", file=sys.stderr)
    if args.summary_json:
        with open(staged["--summary-json"], "w", encoding="utf-8") as fh:
            json.dump({**result.report.to_json(), "teacher": {**stats.to_json(), "requests": budget.requests,
                                                              "tokens": budget.tokens, "errors": budget.errors,
                                                              "usage_estimated": budget.estimated}},
                      fh, indent=2)
    if result.report.kept == 0:
        print(f"beam-sft reason: no row was kept ({result.report.read} read)", file=sys.stderr)
        return 1
    return 0
