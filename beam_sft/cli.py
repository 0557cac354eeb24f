"""`beam-sft` command line: one subcommand per pipeline stage.

Each stage owns its arguments in its own module (``register(subparsers)`` adds the parser and
sets ``func``); this file only lists them. Modules keep heavy imports (torch, datasets) inside
their functions so that ``beam-sft --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from beam_sft import __version__
from beam_sft.errors import BeamError
from beam_sft.paths import guard_command
from beam_sft.redact import redact_text

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
        self.exit(2, f"{self.prog}: error: {redact_text(message)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="beam-sft", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"beam-sft {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        guard_command(args)  # every output through the one guard, before the command opens anything
        return int(args.func(args) or 0)
    except BeamError as exc:  # redacted: an error may quote a URL's credentials (the last net under the rest)
        print(f"beam-sft {args.command}: error: {redact_text(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:  # the file system said no (full, read-only, a folder where a file goes): one line
        from beam_sft.dataset_folder.oserrors import describe

        print(f"beam-sft {args.command}: error: {redact_text(describe(exc))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
