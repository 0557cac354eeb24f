"""``beam-sft eval``: task metrics of a model on the trained turns of a prepared folder.

    beam-sft eval MODEL_DIR --data PREPARED_DIR [--rows N] [--json OUT] [--max-new-tokens N]
    beam-sft eval --base-url URL --model NAME --data PREPARED_DIR [...]

Locally the model generates greedily; with ``--base-url`` an OpenAI-compatible server does
(``evaluate/served.py``). Both are scored by ``evaluate/metrics.py`` and give the same keys; a table
(overall, tool turns, plain turns, each figure with its count) goes to stdout, ``--json`` writes
``{"metrics", "counts", "samples", "run"}``. Heavy imports stay inside ``run`` (``--help`` stays fast).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from beam_sft.cli_args import count, positive_float
from beam_sft.dataset_folder.oserrors import describe
from beam_sft.errors import BeamError
from beam_sft.evaluate.metrics import KINDS, METRICS, TaskMetrics
from beam_sft.paths import Outputs, writes
from beam_sft.redact import Redactor, redact_strings, redact_url
from beam_sft.visible import visible

DEFAULT_MAX_NEW_TOKENS = 512
DEFAULT_TIMEOUT = 300.0
DEFAULT_RETRIES = 4


def register(subparsers) -> None:
    parser = subparsers.add_parser("eval", help="task metrics of a model (local or served) on a prepared folder",
                                   description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", nargs="?", metavar="MODEL_DIR", help="a local model folder (not with --base-url)")
    parser.add_argument("--data", required=True, metavar="PREPARED_DIR", help="the prepared folder whose trained "
                        "turns are scored (a held-out one: scoring training rows measures memory)")
    parser.add_argument("--rows", type=count(1), default=None, metavar="N", help="only the first N rows of the folder")
    parser.add_argument("--json", dest="json_out", default=None, metavar="OUT", help="write the figures and every "
                        "turn's sample here")
    parser.add_argument("--max-new-tokens", type=count(1), default=DEFAULT_MAX_NEW_TOKENS, metavar="N",
                        help=f"generation limit per turn (default {DEFAULT_MAX_NEW_TOKENS}); a turn cut off is "
                        "counted as not ending")
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1)")
    parser.add_argument("--model", default=None, help="the model name the server serves (with --base-url)")
    parser.add_argument("--api-key-env", default=None, metavar="VAR", help="environment variable holding the "
                        "server's API key (default: OPENAI_API_KEY when set; none: no key sent)")
    parser.add_argument("--allow-insecure-http", action="store_true", help="send the API key over plain http "
                        "to a host that is not this machine (refused otherwise: anyone on the path reads it)")
    parser.add_argument("--timeout", type=positive_float, default=None, help="seconds one served turn's "
                        f"request may take in all, connect to the reply's last byte (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--retries", type=count(0), default=None, help="retries of a served turn on "
                        f"429/5xx/timeouts/connection errors, backoff with jitter (default {DEFAULT_RETRIES})")
    parser.set_defaults(func=run)
    writes(parser, lambda a: Outputs(inputs={"MODEL_DIR": a.model_dir, "--data": a.data}, files={"--json": a.json_out}))


def _check_args(args: argparse.Namespace) -> None:
    if args.base_url is None:
        # given at all, default values included: a flag that does nothing is refused, never ignored
        given = [flag for flag, value, unset in (("--timeout", args.timeout, None),
                                                 ("--retries", args.retries, None),
                                                 ("--api-key-env", args.api_key_env, None),
                                                 ("--allow-insecure-http", args.allow_insecure_http, False))
                 if value != unset]
        if given:
            raise BeamError(f"{' and '.join(given)} only concern a served model's requests: use with --base-url")
        if args.model_dir is None:
            raise BeamError("give MODEL_DIR, or --base-url URL --model NAME for a served model")
        if args.model is not None:
            raise BeamError("--model names a served model: use it with --base-url")
        if not Path(args.model_dir).is_dir():
            # a missing path would be taken for a hub id and fetched: eval reads local folders only
            raise BeamError(f"MODEL_DIR {args.model_dir} is not a folder (a local model; for a served one use "
                            "--base-url)")
    else:
        if args.model_dir is not None:
            raise BeamError("give MODEL_DIR or --base-url, not both")
        if not args.model:
            raise BeamError("--base-url needs --model NAME (the name the server serves)")
        args.timeout = DEFAULT_TIMEOUT if args.timeout is None else args.timeout
        args.retries = DEFAULT_RETRIES if args.retries is None else args.retries


def run(args: argparse.Namespace) -> int:
    from beam_sft.evaluate.metrics import aggregate, score_turn
    from beam_sft.evaluate.turns import read_rows, select_turns

    _check_args(args)
    if args.json_out is not None:
        prepare_json_target(Path(args.json_out))
    selection = select_turns(read_rows(args.data, args.rows))
    if not selection.turns:
        raise BeamError(f"{args.data}: no trained assistant turn in the first {selection.rows} rows"
                        + (f" ({selection.unprompted} open their row: no prompt before them)"
                           if selection.unprompted else ""))
    turns = selection.turns

    redact = None  # a served run's: the key and the URL's credentials out of everything written
    stopped = None  # a served run that stopped at a turn: its turns before it are still scored

    def progress(done: int) -> None:
        if sys.stderr.isatty():
            print(f"\r  {done}/{len(turns)} turns", end="" if done < len(turns) else "\n", file=sys.stderr)

    if args.base_url is None:
        from beam_sft.evaluate.generate import generate, load_model

        model, tokenizer = load_model(args.model_dir)
        generated = generate(model, tokenizer, turns, max_new_tokens=args.max_new_tokens, progress=progress)
        run_info = {"mode": "local", "model": str(args.model_dir)}
    else:
        from beam_sft.evaluate.served import ServedRunStopped, api_key, generate_served
        from beam_sft.reason.config import check_base_url, check_transport

        check_base_url(args.base_url, "--base-url")
        key = api_key(args.api_key_env)
        check_transport(args.base_url, key, allowed=args.allow_insecure_http)
        redact = Redactor.for_endpoint(args.base_url, key)
        try:
            generated = generate_served(args.base_url, args.model, turns, max_new_tokens=args.max_new_tokens,
                                        api_key_value=key, timeout=args.timeout, retries=args.retries,
                                        progress=progress)
        except ServedRunStopped as exc:
            if not exc.done:
                raise  # nothing answered: nothing to score
            # the turns answered before the failure are scored and written, marked incomplete: an eval of
            # hours does not lose them to one turn the server would not answer
            stopped = exc
            generated = exc.done
            turns = turns[:len(generated)]
        after = sum(any(m.get("role") == "assistant" and (m.get("reasoning_content") or m.get("thinking")
                            or m.get("reasoning")) for m in t.messages) for t in turns)
        run_info = {"mode": "served", "base_url": redact_url(args.base_url), "model": args.model,
                    "turns_after_reasoning": after, "timeout": args.timeout, "retries": args.retries}
        if stopped is not None:
            run_info.update(complete=False, turns_asked=len(selection.turns), stopped=redact(str(stopped)))
        if after:
            # transformers serve drops reasoning_content from the history: those prompts differ from training's
            print(f"note: {after} of {len(turns)} turns follow an earlier assistant turn with reasoning; a server "
                  "that drops reasoning_content from the history (transformers serve does) renders another prompt "
                  "for them than training did", file=sys.stderr)
    scores = [score_turn(g, t.reference, t.tools) for g, t in zip(generated, turns, strict=True)]
    result = aggregate(scores)
    run_info.update({"data": str(args.data), "rows": selection.rows, "turns": len(turns),
                     "duplicate_turns_skipped": selection.duplicates,
                     "unprompted_turns_skipped": selection.unprompted, "max_new_tokens": args.max_new_tokens})
    print(table(result, run_info))
    if args.json_out is not None:
        samples = [sample(t, g, s) for t, g, s in zip(turns, generated, scores, strict=True)]
        data = {"metrics": result.values(), "counts": result.counts(), "samples": samples, "run": run_info}
        if redact is not None:  # a reply that quotes the key (a server echoing the request) is kept, masked
            data = redact_strings(data, redact)
        write_json(Path(args.json_out), data)
    if stopped is not None:
        print(visible(f"beam-sft eval: error: stopped after {len(turns)} of {len(selection.turns)} turns: {stopped}"
                      + (f"; the {len(turns)} scored are in {args.json_out} (run.complete: false)"
                         if args.json_out else ""), newlines=False), file=sys.stderr)
        return 2
    return 0


def sample(turn, generated, score) -> dict:
    """One turn's record in ``--json``: where it is from, what was generated, how it scored."""
    from beam_sft.evaluate.metrics import ServedTurn

    text = generated.raw if isinstance(generated, ServedTurn) else generated
    return {"source": turn.source, "kind": turn.kind, "generated": text[:4000], "message": score.message,
            "reference": turn.reference, "format_valid": score.format_valid, "problem": score.format_problem,
            "tool_name": score.tool_name, "arguments": score.arguments, "answer_exact": score.answer_exact,
            "answer_f1": score.answer_f1, "stop": score.stop}


def prepare_json_target(path: Path) -> None:
    """Before any turn is generated: the folder of ``--json`` made (as ``convert -o`` makes its own) and
    found writable, so that a run of hours never ends failing to write its result."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # A file made there and removed, as write_json makes its temporary file: os.access asks the mode
        # bits, which root passes on any folder, and knows nothing of a read-only or full file system.
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=path.parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise BeamError(f"--json {path}: its folder {path.parent} is not writable ({describe(exc)})") from None


def write_json(path: Path, data: dict) -> None:
    """Written whole or not at all (a temporary file beside it, then renamed over it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _cell(metrics: dict, name: str) -> str:
    f = metrics[name]
    if not f.denominator:
        return "-"
    num = f"{f.numerator:.1f}" if name == "answer_token_f1" else f"{f.numerator:g}"
    return f"{f.value:.3f} ({num}/{f.denominator})"


def table(result: TaskMetrics, run_info: dict) -> str:
    """The figures as a table: one line per metric, overall then per kind, each with its count."""
    head = (f"eval of {run_info['model']} ({run_info['mode']}) on {run_info.get('data')}: {run_info.get('turns')} "
            f"turns from {run_info.get('rows')} rows"
            + (f", {run_info['duplicate_turns_skipped']} repeated turns skipped"
               if run_info.get("duplicate_turns_skipped") else "")
            + (f", {run_info['unprompted_turns_skipped']} trained turns skipped that open their row (no prompt)"
               if run_info.get("unprompted_turns_skipped") else "")
            + (f"; INCOMPLETE: stopped after {run_info.get('turns')} of {run_info['turns_asked']} turns"
               if run_info.get("complete") is False else ""))
    columns = [("overall", result.overall)] + [(f"{k} turns", result.by_kind[k]) for k in KINDS]
    width = 22
    lines = [head, f"{'metric':<22}" + "".join(f"{c:>{width}}" for c, _ in columns)]
    for name in METRICS:
        lines.append(f"{name:<22}" + "".join(f"{_cell(m, name):>{width}}" for _, m in columns))
    return "\n".join(lines)
