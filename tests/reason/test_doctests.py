"""The docstring examples of the reason step's modules (and the views and counters it added) run, and pass."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "beam_sft.reason.cache",
    "beam_sft.reason.checks",
    "beam_sft.reason.client",
    "beam_sft.reason.config",
    "beam_sft.reason.consistency",
    "beam_sft.reason.judge",
    "beam_sft.reason.progress",
    "beam_sft.reason.prompt",
    "beam_sft.reason.run",
    "beam_sft.redact",
    "beam_sft.prepare.cache",
    "beam_sft.verify.view_terminal",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
