"""``beam-sft verify DIR``, ``beam-sft inspect DIR --row N [--html out.html]`` and
``beam-sft report DIR [-o report.html]``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from beam_sft.cli_args import count
from beam_sft.dataset_folder.layout import REPORT_FILE
from beam_sft.errors import BeamError, VerificationError
from beam_sft.paths import Outputs, rewrites_own_files, writes
from beam_sft.visible import visible

AUTO_PARALLEL_ROWS = 2000  # below this, starting worker processes costs more than it saves


def register(subparsers) -> None:
    verify = subparsers.add_parser(
        "verify", help="check every row's masks; exit 1 on any violation",
        description="Check the masks of a prepared dataset against every rule; write report.json's "
                    "\"verify\" section, verify_violations.jsonl and report_lengths.png beside it (and redraw "
                    "report.html where the folder has one).")
    verify.add_argument("directory", type=Path, metavar="DIR", help="prepared dataset directory")
    verify.add_argument("--num-proc", type=count(0), default=0,
                        help="worker processes (default: all cores for large datasets, else 1)")
    verify.add_argument("--sample", type=count(1), default=None, metavar="N",
                        help="check N random rows only: reported as a sample (report.json verify_sample); it never "
                             "records a pass, only a failure it finds (N of at least the rows checks every row: a "
                             "full run, recorded as one)")
    verify.add_argument("--seed", type=count(0), default=0, help="seed for --sample and the parity sample")
    verify.add_argument("--parity-sample", type=count(0), default=None, metavar="N",
                        help="rows that also get the sampled rules: re-tokenized, prompts re-rendered "
                             "(default 32; the report's coverage says which rules)")
    verify.add_argument("--max-length", type=count(1), default=None,
                        help="longest allowed row (default: report.json's length_policy.max_length)")
    verify.add_argument("--max-violations", type=count(0), default=20, metavar="N",
                        help="violations to print (all are in verify_violations.jsonl)")
    verify.add_argument("--no-histogram", action="store_true", help="do not write report_lengths.png")
    verify.set_defaults(func=run_verify, quick_exit=True)
    rewrites_own_files(verify, "the prepared folder's report.json verify sections, verify_violations.jsonl, "
                               "report_lengths.png and report.html, all written by prepare or verify")

    inspect = subparsers.add_parser(
        "inspect", help="show one row's tokens, trained ones highlighted",
        description="Show one prepared row token by token: trained tokens highlighted, context dimmed, "
                    "each message labelled with its role and channel.")
    inspect.add_argument("directory", type=Path, metavar="DIR", help="prepared dataset directory")
    inspect.add_argument("--row", type=count(0), required=True, metavar="N", help="row position in the dataset")
    inspect.add_argument("--html", type=Path, default=None, metavar="PATH", help="write a standalone HTML page")
    colors = inspect.add_mutually_exclusive_group()
    colors.add_argument("--color", dest="color", action="store_true", default=None,
                        help="ANSI colours even when stdout is not a terminal")
    colors.add_argument("--no-color", dest="color", action="store_false",
                        help="no ANSI colours (trained text in ⟪ ⟫)")
    inspect.set_defaults(func=run_inspect, quick_exit=True)
    writes(inspect, lambda a: Outputs(inputs=folder_inputs(a.directory, None), files={"--html": a.html}))

    report = subparsers.add_parser(
        "report", help="one self-contained HTML page about a prepared folder",
        description="Write one self-contained HTML page (no network) about a prepared folder: the sources, "
                    "rejected rows by reason code with examples, length and trained-fraction histograms, "
                    "trained share by channel, token statistics, verify's result and a few rows with their "
                    "masks. prepare writes one beside every folder (DIR/report.html).")
    report.add_argument("directory", type=Path, metavar="DIR", help="prepared dataset directory")
    report.add_argument("-o", "--output", type=Path, default=None, metavar="PATH",
                        help="where to write the page (default: DIR/report.html)")
    report.add_argument("--rows", type=count(0), default=4, metavar="N", help="rows drawn with their masks (default 4)")
    report.add_argument("--seed", type=int, default=0, help="seed for the rows drawn")
    report.set_defaults(func=run_report, quick_exit=True)
    writes(report, lambda a: Outputs(inputs=folder_inputs(a.directory, a.output), files={"-o": a.output}))


def folder_inputs(directory: Path, page: Path | None) -> dict:
    """What a page about a prepared folder reads, for the output guard: the folder (every file of it
    but its own report.html, which is the page's usual place) and the sources its report records (a
    source JSONL is the user's data, never a page's place)."""
    from beam_sft.dataset_folder.layout import REPORT_FILE, REPORT_PAGE
    from beam_sft.dataset_folder.report_json import read_report
    from beam_sft.paths import relation

    own_page = directory / REPORT_PAGE
    if page is not None and relation(page, own_page) == "is" and directory.is_dir():
        inputs: dict = {"DIR": [p for p in directory.iterdir() if relation(p, own_page) != "is"]}
    else:
        inputs = {"DIR": directory}
    recorded = (read_report(directory) or {}).get("sources")
    if isinstance(recorded, dict):
        inputs[f"a source in {directory / REPORT_FILE}"] = [
            e["path"] for e in recorded.values() if isinstance(e, dict) and isinstance(e.get("path"), str)]
    return inputs


def available_cores() -> int:
    """The cores this process may run on (its affinity, which a container or ``taskset`` narrows)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _num_proc(requested: int, directory: Path) -> int:
    """Worker processes for ``--num-proc``: never more than the cores (a worker more than them only
    waits its turn, and ``--num-proc 99999`` forked thousands); ``verify_prepared`` also never starts
    more than it has chunks of rows for (``api.pool_procs``)."""
    if requested > 0:
        return min(requested, available_cores())
    from beam_sft.verify.api import load_prepared_dataset

    try:
        rows = len(load_prepared_dataset(directory))
    except VerificationError:
        return 1  # verify_prepared says what is wrong, naming the file
    return 1 if rows < AUTO_PARALLEL_ROWS else min(available_cores(), 16)


def run_verify(args: argparse.Namespace) -> int:
    from beam_sft.verify.api import PARITY_SAMPLE, verify_prepared
    from beam_sft.verify.results import VIOLATIONS_FILE, format_table

    parity = PARITY_SAMPLE if args.parity_sample is None else args.parity_sample
    result = verify_prepared(args.directory, num_proc=_num_proc(args.num_proc, args.directory),
                             sample=args.sample, seed=args.seed, max_length=args.max_length,
                             histogram=not args.no_histogram, parity_sample=parity)
    print(format_table(result.stats))
    _refresh_page(args.directory, result.env)
    if result.ok and not result.stats["full"]:
        return _partial(result, args.directory)
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


def _partial(result, directory: Path) -> int:
    """A partial run that found nothing: what it was, and the folder's result, which it leaves as it was."""
    stats = result.stats
    checked = f"{stats['rows_checked']} of {stats['rows']} rows" if stats["sample"] is not None else "every row"
    print(f"\npartial run ({checked}, max_length {stats['max_length']}, parity rows "
          f"{stats['coverage']['sampled']['rows']}): recorded as report.json's verify_sample, never as a pass")
    if result.recorded_ok is True:
        print("the folder's full verification recorded before still stands (passed)")
        return 0
    if result.recorded_ok is None:
        print("the folder has no full verification: train refuses it until `beam-sft verify DIR` checks every row")
        return 0
    from beam_sft.dataset_folder.report_json import read_report

    recorded = (read_report(directory) or {}).get("verify")
    full = isinstance(recorded, dict) and recorded.get("full") is True
    what = "full verification" if full else "verification (a partial run's: only a full `beam-sft verify DIR` clears it)"
    print(visible(f"beam-sft verify: error: {directory}: its recorded {what} FAILED; a partial run cannot clear "
                  "it (see report.json verify and verify_violations.jsonl)", newlines=False), file=sys.stderr)
    return 1


def run_inspect(args: argparse.Namespace) -> int:
    from beam_sft.verify.api import inspect_row

    color = args.color if args.color is not None else sys.stdout.isatty() and "NO_COLOR" not in os.environ
    text, page = inspect_row(args.directory, args.row, color=color, html=args.html is not None)
    if args.html is not None:
        args.html.parent.mkdir(parents=True, exist_ok=True)
        # written beside it and renamed over it: a link named as --html is replaced, never written through
        tmp = args.html.with_name(f".{args.html.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(page, encoding="utf-8")
            os.replace(tmp, args.html)
        finally:
            tmp.unlink(missing_ok=True)
        print(f"wrote {visible(args.html, newlines=False)}")
    else:
        sys.stdout.write(text)
        try:
            line = _dataset_reasoning(args.directory)
        except ValueError as exc:  # the row is shown; the report's figures cannot be
            print(visible(f"beam-sft inspect: error: {args.directory / REPORT_FILE}: {exc}", newlines=False),
                  file=sys.stderr)
            return 1
        if line:
            print(line)
    return 0


def _dataset_reasoning(directory) -> str | None:
    """The folder's trained turns by reasoning source and its teacher refusals (report.json), when
    any turn's source was recorded (``beam-sft reason`` or a ``reasoning:`` block). ValueError, in
    one line, when the section holds something else than counts by name (``counts.reasoning_problems``,
    verify's ``report_count``): a sealed report can still have been written by other code."""
    from beam_sft.dataset_folder.report_json import read_report
    from beam_sft.verify.counts import reasoning_problems

    report = read_report(directory) or {}
    problems = reasoning_problems(report)
    if problems:
        raise ValueError(visible(f"{problems[0]}; the dataset's reasoning is not shown (beam-sft verify "
                                 "lists every such value)", newlines=False))
    section = report.get("reasoning") or {}
    turns, refused = section.get("turns") or {}, section.get("teacher_refused") or {}
    if not (set(turns) - {"unrecorded"} or refused):
        return None
    verdicts = ", ".join(f"{k} {v}" for k, v in (section.get("judge_verdicts") or {}).items())
    return visible(f"dataset reasoning of trained turns: {', '.join(f'{k} {v}' for k, v in turns.items())}; "
                   f"teacher refused: {', '.join(f'{k} {v}' for k, v in refused.items()) or 'none'}"
                   + (f"; judge: {verdicts}" if verdicts else ""), newlines=False)


def _refresh_page(directory: Path, env=None) -> None:
    """A folder's report page shows verify's result: redraw it after verify rewrote the report. Not
    from a report whose seal is broken (or missing): verify wrote nothing into it, and the page would
    show edited figures as the folder's. A page that cannot be written is said in one line; the
    verification's own result stands. ``env``: verify's own (``VerifyResult.env``), so the page
    draws its rows without loading DIR/tokenizer a second time (1.8 s for gpt-oss's)."""
    from beam_sft.dataset_folder.layout import REPORT_PAGE
    from beam_sft.dataset_folder.report_json import read_report, seal_problem
    from beam_sft.verify.report_html import write_report_page

    if not (directory / REPORT_PAGE).is_file():
        return
    report = read_report(directory)
    if not isinstance(report, dict) or seal_problem(report) is not None:
        return
    try:
        write_report_page(directory, env=env)
    except (OSError, BeamError) as exc:
        print(visible(f"beam-sft verify: warning: the report page was not redrawn: {exc}", newlines=False),
              file=sys.stderr)


def run_report(args: argparse.Namespace) -> int:
    from beam_sft.verify.report_html import write_report_page

    path = write_report_page(args.directory, args.output, sample_rows=args.rows, seed=args.seed)
    print(f"wrote {visible(path, newlines=False)}")
    return 0
