"""Helpers for the converter tests."""

from __future__ import annotations

import pytest

from beam_sft.convert import ConvertOptions


@pytest.fixture
def options() -> ConvertOptions:
    return ConvertOptions()


@pytest.fixture(scope="session")
def render_beam():
    """``render_beam(messages, tools=None, **kwargs) -> str``: beam-sft's chat template, no tokenizer.

    Uses transformers' own Jinja renderer (the environment apply_chat_template uses), so what the
    Harmony converter reads back is exactly what encoding writes.
    """
    try:
        from transformers.utils.chat_template_utils import _normalize_chat_messages, render_jinja_template
    except ImportError as exc:  # private helpers: skip rather than test something else
        pytest.skip(f"transformers' template renderer is not importable: {exc}")
    from beam_sft.harmony.template import load_chat_template

    template = load_chat_template()

    def render(messages, tools=None, **kwargs) -> str:
        rendered, _ = render_jinja_template(
            conversations=[_normalize_chat_messages(messages)], tools=tools, chat_template=template, **kwargs
        )
        return rendered[0]

    return render
