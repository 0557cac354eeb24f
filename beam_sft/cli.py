"""`beam-sft` command line: one subcommand per pipeline stage.

Each stage owns its arguments in its own module (``register(subparsers)`` adds the parser and
sets ``func``); this file only lists them. Modules keep heavy imports (torch, datasets) inside
their functions so that ``beam-sft --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from beam_sft import __version__
from beam_sft.errors import BeamError
from beam_sft.paths import guard_command
from beam_sft.redact import redact_text
from beam_sft.visible import visible

# Explicit registry: subcommand modules, in the order --help lists them.
COMMAND_MODULES = (
    "beam_sft.convert.cli",  # convert
    "beam_sft.reason.cli",  # reason
    "beam_sft.prepare.cli",  # prepare, merge-shards
    "beam_sft.verify.cli",  # verify, inspect, report
    "beam_sft.train.cli",  # train, merge
    "beam_sft.evaluate.cli",  # eval
    "beam_sft.harmony.cli",  # fixture, check-tokenizer
)


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser with its errors on one line (usage is one ``--help`` away), exit 2 as before;
    subcommand parsers are made of this class too."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {visible(redact_text(message), newlines=False)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="beam-sft", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"beam-sft {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


INTERRUPTED = 128 + 2  # SIGINT's exit status


def main(argv: list[str] | None = None) -> int:
    return dispatch(build_parser().parse_args(argv))


def dispatch(args: argparse.Namespace) -> int:
    try:
        guard_command(args)  # every output through the one guard, before the command opens anything
        return int(args.func(args) or 0)
    except BeamError as exc:  # redacted: an error may quote a URL's credentials (the last net under the rest)
        # and shown visible on one line: it may quote a row or a file's name, whose newline would start a
        # line that reads as ours (a pre-flight's list keeps its lines: each was made one line, of_lines)
        shown = visible(redact_text(str(exc)), newlines=exc.multiline)
        print(f"beam-sft {args.command}: error: {shown}", file=sys.stderr)
        return 2
    except OSError as exc:  # the file system said no (full, read-only, a folder where a file goes): one line
        from beam_sft.dataset_folder.oserrors import describe

        print(f"beam-sft {args.command}: error: {visible(redact_text(describe(exc)), newlines=False)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C in a command without its own handler: one line, as prepare says it
        print(f"beam-sft {args.command}: interrupted (SIGINT); nothing more was written", file=sys.stderr)
        return INTERRUPTED


def run() -> None:
    """The console entry (``beam-sft``, ``python -m beam_sft``): the command, then the exit.

    A command that sets ``quick_exit`` has closed what it wrote when it returns, and its exit skips
    the interpreter's last sweeps of every object it made (a 10-row prepare's exit: 0.47 s to 0.25 s,
    ``benchmarks/fixed_cost.py --exit``): :func:`quick_exit`.
    """
    try:  # building the parser imports every command: a second's window for Ctrl-C before dispatch
        args = build_parser().parse_args()
    except KeyboardInterrupt:
        print("beam-sft: interrupted (SIGINT) while starting; nothing was written", file=sys.stderr)
        sys.stderr.flush()
        os._exit(INTERRUPTED)
    code = dispatch(args)
    if code == INTERRUPTED or (code != 0 and _threads_left()):
        # Ctrl-C, or a failure, has been said and every output left as it was (published or not); a
        # worker thread still blocked in a request (reason's teacher, whose run ended with a refusal or
        # an interrupt turned into one) would hold the interpreter's exit for its whole timeout: closing
        # a socket does not end a recv() another thread is blocked in
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    if getattr(args, "quick_exit", False):
        quick_exit()
    raise SystemExit(code)


def _threads_left() -> bool:
    """Threads the interpreter's exit would wait for (not daemons), other than this one."""
    import threading

    return any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.current_thread())


def quick_exit() -> None:
    """Leave what is still alive to the OS, not to the cycle collector.

    ``gc.collect()`` first runs the finalizers of what is already garbage, as the last sweep would;
    ``gc.freeze()`` then keeps the teardown's collections from walking the rest. A frozen object in
    a reference cycle (a module's globals are one) is never finalized, so every open writer is
    flushed here: a file ``open()`` made that a library left open is complete on disk, as after a
    plain exit. (Not closed: a compressed stream left open would lack its trailer, so a quick
    command closes its own.)
    """
    import gc
    import io

    gc.collect()
    writers = {io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom}  # exact types: an ABC check is 0.1 s
    for stream in gc.get_objects():
        if type(stream) in writers and not stream.closed:
            try:
                stream.flush()  # a text layer flushes the buffer under it too
            except (OSError, ValueError):  # a pipe the reader closed, a detached layer: as a plain exit
                pass
    gc.freeze()


if __name__ == "__main__":
    run()
