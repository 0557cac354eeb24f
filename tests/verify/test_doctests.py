"""The docstring examples in beam_sft/verify run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["api", "compare", "context", "invariants", "report", "spans", "stats", "tokens", "view_html",
           "view_terminal", "cli"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(f"beam_sft.verify.{name}")
    result = doctest.testmod(module)
    assert result.failed == 0
