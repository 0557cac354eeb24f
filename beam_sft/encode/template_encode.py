"""The reference encoder: one ``apply_chat_template`` call per row.

This is the definition of correct output. The fast encoder (``fast/``) must reproduce it token for
token, and falls back to it when its start-up probe finds any difference.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from beam_sft.encode.encoded import ID_DTYPE, MASK_DTYPE, Encoded
from beam_sft.encode.length import too_many_chars
from beam_sft.encode.weights import apply_weights, assistant_weights
from beam_sft.errors import Rejection
from beam_sft.harmony.spans import mask_runs
from beam_sft.harmony.template import RESERVED_TEMPLATE_KWARGS


def template_args(row: dict) -> tuple[list[dict], list[dict] | None, dict[str, Any]]:
    """Split a BeamRow into the ``messages``, ``tools`` and template kwargs of the template call.

    >>> template_args({"messages": [{"role": "user", "content": "hi"}],
    ...                "chat_template_kwargs": {"reasoning_effort": "low"}})
    ([{'role': 'user', 'content': 'hi'}], None, {'reasoning_effort': 'low'})
    """
    messages = row.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Rejection("no_messages", "row has no messages")
    tools = row.get("tools") or None
    kwargs = row.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise Rejection("bad_template_kwargs", f"chat_template_kwargs must be a mapping, got {type(kwargs).__name__}")
    clash = sorted(RESERVED_TEMPLATE_KWARGS.intersection(kwargs))
    if clash:
        raise Rejection("bad_template_kwargs", f"chat_template_kwargs uses reserved names: {clash}")
    return messages, tools, dict(kwargs)


def template_error(exc: Exception) -> Rejection:
    """Turn an exception from rendering into a Rejection with a stable code."""
    import jinja2

    if isinstance(exc, Rejection):
        return exc
    if isinstance(exc, jinja2.exceptions.TemplateError):
        return Rejection("template_error", str(exc) or type(exc).__name__)
    return Rejection("template_error", f"{type(exc).__name__}: {exc}")


def template_encode_raw(row: dict, tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """``input_ids`` and ``assistant_masks`` straight from ``apply_chat_template`` (weights not applied)."""
    messages, tools, kwargs = template_args(row)
    try:
        out = tokenizer.apply_chat_template(
            messages, tools=tools, return_dict=True, return_assistant_tokens_mask=True, **kwargs
        )
    except Exception as exc:  # a template error is a property of the row: route it to rejects
        raise template_error(exc) from exc
    return np.asarray(out["input_ids"], dtype=np.int64), np.asarray(out["assistant_masks"], dtype=np.int8)


def template_render(row: dict, tokenizer) -> str:
    """The rendered text alone (``apply_chat_template(tokenize=False)``)."""
    messages, tools, kwargs = template_args(row)
    try:
        return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, **kwargs)
    except Exception as exc:
        raise template_error(exc) from exc


def text_chars(value) -> int:
    """Characters in every string value of a JSON-like value (a cheap first look at a row's size).

    >>> text_chars({"messages": [{"role": "user", "content": "hello"}], "n": 3})
    9
    """
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(text_chars(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(text_chars(v) for v in value)
    return 0


def encode_row(row: dict, tokenizer) -> dict[str, list[int]]:
    """Encode one BeamRow exactly as ``apply_chat_template`` does, then zero weight-0 turns.

    Returns ``{"input_ids": [...], "assistant_masks": [...]}``; raises Rejection for a row the
    template rejects.
    """
    ids, mask = template_encode_raw(row, tokenizer)
    mask = apply_weights(mask, mask_runs(mask), assistant_weights(row["messages"]))
    return {"input_ids": ids.tolist(), "assistant_masks": mask.astype(np.int64).tolist()}


class TemplateEncoder:
    """The reference encoder behind the same interface as ``FastEncoder`` (one template call a row)."""

    name = "template"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.stats = {"rows": 0, "fallback_rows": 0}

    def encode_batch(self, rows, *, plain: bool = False, max_chars: int | None = None):
        """Like ``FastEncoder.encode_batch``; a row whose text fields alone exceed ``max_chars`` is
        rendered first (no tokenizing) and is ``too_long`` when its rendered text exceeds it."""
        out = []
        for row in rows:
            try:
                if max_chars is not None and text_chars(row) > max_chars:
                    chars = len(template_render(row, self.tokenizer))
                    if chars > max_chars:
                        raise too_many_chars(chars, max_chars)
                ids, mask = template_encode_raw(row, self.tokenizer)
                mask = apply_weights(mask, mask_runs(mask), assistant_weights(row["messages"]))
            except Rejection as exc:
                out.append(exc)
                continue
            self.stats["rows"] += 1
            out.append(Encoded(ids.astype(ID_DTYPE), mask.astype(MASK_DTYPE)))
        return out

    def encode(self, row: dict):
        result = self.encode_batch([row])[0]
        if isinstance(result, Rejection):
            raise result
        return result
