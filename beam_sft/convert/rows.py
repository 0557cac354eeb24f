"""The converters' two outcomes: a canonical ``BeamRow`` dict, or a ``Rejection`` with a reason code.

Every input row ends as exactly one of the two. ``Rejection`` (defined in beam_sft.errors, the one
rejection type of every stage) carries the raw row, its source and row index, a stable reason code
and a human message; ``rejects.jsonl`` stores exactly that. The reason codes live in one table,
``beam_sft.reasons`` (``python -m beam_sft.reasons --markdown`` prints it).

Readers raise ``Rejection`` to abandon a row; ``convert_with`` / ``convert_row`` catch it and
return it, so no converter lets it (or anything else) escape.
"""

from __future__ import annotations

from typing import Any

from beam_sft.errors import Rejection
from beam_sft.reasons import REASON_CODES, REASONS

# A canonical row: {"messages": [...], "tools"?: [...], "chat_template_kwargs"?: {...}, "meta": {...}}.
# Plain dicts keep rows JSON-able and cheap to pass between processes.
BeamRow = dict[str, Any]

# The message fields the template renders reasoning from, in the order it tries them
# (``message.thinking or message.reasoning_content or message.reasoning``).
TEMPLATE_REASONING_ORDER: tuple[str, ...] = ("thinking", "reasoning_content", "reasoning")


def reasoning_of(message: dict) -> str:
    """The reasoning the template renders for a message (``""`` when none): the one lookup for
    converters, the missing-reasoning policy and verification.

    >>> reasoning_of({"role": "assistant", "reasoning_content": "why"}), reasoning_of({"role": "user"})
    ('why', '')
    >>> reasoning_of({"reasoning_content": "", "reasoning": "why"})
    'why'
    """
    for key in TEMPLATE_REASONING_ORDER:
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def has_reasoning(message: dict) -> bool:
    """Whether the message carries reasoning that is not only whitespace."""
    return bool(reasoning_of(message).strip())


__all__ = ["TEMPLATE_REASONING_ORDER", "REASONS", "REASON_CODES", "BeamRow", "Rejection", "has_reasoning", "reasoning_of"]
