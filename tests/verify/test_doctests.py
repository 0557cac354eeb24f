"""The docstring examples in beam_sft/verify (and the shared harmony.spans helpers) run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [f"beam_sft.verify.{name}" for name in (
    "api", "arrays", "caller_tokenizer", "cli", "compare", "context", "counts", "decode", "folder", "invariants", "page_head", "png", "provenance", "report_html", "results", "spans",
    "stats", "template", "tokens", "view_html", "view_terminal")] + ["beam_sft.harmony.spans", "beam_sft.visible"]


def test_every_module_is_listed():
    from pathlib import Path

    import beam_sft.verify

    present = {f"beam_sft.verify.{p.stem}" for p in Path(beam_sft.verify.__file__).parent.glob("*.py")
               if p.stem != "__init__"}
    assert present <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module)
    assert result.failed == 0
