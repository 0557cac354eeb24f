"""The docstring examples of the converter and source modules run, and pass."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "beam_sft.convert.anthropic",
    "beam_sft.convert.assemble",
    "beam_sft.convert.bedrock",
    "beam_sft.convert.blocks",
    "beam_sft.convert.chat_log",
    "beam_sft.convert.detect",
    "beam_sft.convert.flat",
    "beam_sft.convert.formats",
    "beam_sft.convert.gemini",
    "beam_sft.convert.harmony_text",
    "beam_sft.convert.harmony_tools",
    "beam_sft.convert.hermes",
    "beam_sft.convert.langchain",
    "beam_sft.convert.openai",
    "beam_sft.convert.options",
    "beam_sft.convert.parts",
    "beam_sft.convert.pipeline",
    "beam_sft.convert.policy",
    "beam_sft.convert.reasoning",
    "beam_sft.convert.responses",
    "beam_sft.convert.rows",
    "beam_sft.convert.sharegpt",
    "beam_sft.convert.tools",
    "beam_sft.convert.validate",
    "beam_sft.data.file_kinds",
    "beam_sft.data.jsontext",
    "beam_sft.data.rejects",
    "beam_sft.data.sources",
    "beam_sft.errors",
    "beam_sft.reject_codes",
    "beam_sft.timing",
    "beam_sft.train.launch",
    "tests.convert.export_rows",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0 or name.endswith(("cli",)), f"{name} has no examples"
