"""Helpers for the chat-template tests: render exactly as ``apply_chat_template`` does, minus tokenization."""

from __future__ import annotations

import pytest


def _render_spans(
    tokenizer, template: str, messages, tools=None, **kwargs
) -> tuple[str, list[tuple[int, int]]]:
    """Render ``messages`` with ``template`` the way ``tokenizer.apply_chat_template`` would.

    Returns the text and the character spans of its ``{% generation %}`` blocks (the assistant
    mask before tokenization). It repeats apply_chat_template's preprocessing (None-valued keys
    dropped, special tokens passed as variables) and calls transformers' own renderer, so the
    Jinja environment (sandbox, ``tojson``, ``raise_exception``) is the real one; it only skips
    the tokenizer, which is most of the cost.
    """
    from transformers.utils.chat_template_utils import _normalize_chat_messages, render_jinja_template

    rendered, spans = render_jinja_template(
        conversations=[_normalize_chat_messages(messages)],
        tools=tools,
        chat_template=template,
        return_assistant_tokens_mask=True,
        **{**tokenizer.special_tokens_map, **kwargs},
    )
    return rendered[0], [tuple(span) for span in spans[0]]


@pytest.fixture(scope="session")
def render_spans():
    """``render_spans(tokenizer, template, messages, tools=None, **kwargs) -> (text, spans)``."""
    try:
        from transformers.utils.chat_template_utils import (  # noqa: F401
            _normalize_chat_messages,
            render_jinja_template,
        )
    except ImportError as exc:  # private helpers: fall back to the tokenized tests if they move
        pytest.skip(f"transformers' template renderer is not importable: {exc}")
    return _render_spans
