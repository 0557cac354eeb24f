"""The docstring examples in beam_sft/encode and in the data modules it owns run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [f"beam_sft.encode.{name}" for name in (
    "config", "template_encode", "weights", "fast", "render", "words", "probe", "length", "batch", "read",
    "report", "pipeline", "shards", "cli", "gptoss_tokenizer", "bench")] + [
    "beam_sft.data.mix", "beam_sft.data.fingerprint", "beam_sft.data.cache", "beam_sft.data.synthetic"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0
