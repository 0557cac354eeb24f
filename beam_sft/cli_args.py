"""Argument types for numeric flags, shared by every subcommand: a bad value is one line naming the
flag and the rule, exit 2 (argparse's own error path, made one line by ``cli.OneLineParser``).

>>> count(1)("3"), count(0)("0")
(3, 0)
>>> count(1)("-3")
Traceback (most recent call last):
...
argparse.ArgumentTypeError: must be an integer of at least 1, got '-3'
>>> positive_float("nan")
Traceback (most recent call last):
...
argparse.ArgumentTypeError: must be a finite number above 0, got 'nan'
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def count(minimum: int) -> Callable[[str], int]:
    """An integer of at least ``minimum`` (``--num-proc``, ``--sample``, ``--row``, ``--max-length`` ...)."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer of at least {minimum}, got {text!r}")
        return value

    parse.__name__ = f"integer >= {minimum}"  # what argparse names the type in its messages
    return parse


def finite(minimum: float, *, above: bool = False) -> Callable[[str], float]:
    """A finite number of at least ``minimum`` (``above``: greater than it)."""
    rule = f"above {minimum:g}" if above else f"of at least {minimum:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < minimum or (above and value == minimum):
            raise argparse.ArgumentTypeError(f"must be a finite number {rule}, got {text!r}")
        return value

    parse.__name__ = f"number {rule}"
    return parse


positive_float = finite(0, above=True)  # a memory size, a rate
non_negative_float = finite(0)  # a weight, a reserve
