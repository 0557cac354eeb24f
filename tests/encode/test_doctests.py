"""The docstring examples in beam_sft/encode, prepare, dataset_folder and the data modules they own run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [f"beam_sft.encode.{name}" for name in (
    "encoded", "template_encode", "weights", "length", "select", "fast.encoder", "fast.render", "fast.words",
    "fast.probe")] + ["beam_sft.compat.chat_template", "beam_sft.compat.jinja_sandbox"] + [
    f"beam_sft.prepare.{name}" for name in ("config", "batch", "records", "pipeline", "cache", "shards", "cli", "progress", "children")] + [
    f"beam_sft.dataset_folder.{name}" for name in ("layout", "tokenizer", "report_json", "integrity", "output", "rejects", "lock", "oserrors",
                                             "load")] + [
    "beam_sft.harmony.gptoss_tokenizer", "beam_sft.data.mix", "beam_sft.data.fingerprint", "beam_sft.data.synthetic",
    "beam_sft.config_utils"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0
