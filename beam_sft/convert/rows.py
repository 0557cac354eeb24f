"""The converters' two outcomes: a canonical ``BeamRow`` dict, or a ``Rejection`` with a reason code.

Every input row ends as exactly one of the two. ``Rejection`` (defined in beam_sft.errors, the one
rejection type of every stage) carries the raw row, its source and row index, a stable reason code
and a human message; ``rejects.jsonl`` stores exactly that. The reason codes live in one table,
``beam_sft.reject_codes`` (``python -m beam_sft.reject_codes --markdown`` prints it).

Readers raise ``Rejection`` to abandon a row; ``convert_with`` / ``convert_row`` catch it and
return it, so no converter lets it (or anything else) escape.
"""

from __future__ import annotations

from typing import Any

from beam_sft.errors import Rejection
from beam_sft.reject_codes import REASON_CODES, REASONS

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


# The provenance sources a fill records in ``meta.reasoning`` (beam_sft.reason.fill), and the one
# counted for trained turns whose row records none (a row converted without a fill).
REASONING_SOURCES: tuple[str, ...] = ("data", "inline_tags", "text_before_calls", "teacher")
UNRECORDED = "unrecorded"


def reasoning_counts(row: BeamRow) -> tuple[dict[str, int], dict[str, int]]:
    """``(trained turns by reasoning source, turns a teacher was refused for by code)`` of a row as
    it will be trained (after policy and length cuts: only turns still present count, weight-0 turns
    count only as refused).

    >>> row = {"messages": [{"role": "user", "content": "q"},
    ...     {"role": "assistant", "reasoning_content": "r", "content": "a"},
    ...     {"role": "user", "content": "q"}, {"role": "assistant", "content": "b", "weight": 0}],
    ...     "meta": {"reasoning": [{"turn": 1, "source": "teacher"},
    ...                            {"turn": 3, "source": "none", "rejected": "teacher_empty"}]}}
    >>> reasoning_counts(row)
    ({'teacher': 1}, {'teacher_empty': 1})
    >>> reasoning_counts({"messages": row["messages"]})
    ({'unrecorded': 1}, {})
    """
    messages = row.get("messages") or []
    entries = (row.get("meta") or {}).get("reasoning")
    sources: dict[str, int] = {}
    refused: dict[str, int] = {}
    if not isinstance(entries, list):
        n = sum(1 for m in messages if m.get("role") == "assistant" and m.get("weight", 1) != 0 and has_reasoning(m))
        return ({UNRECORDED: n} if n else {}), refused
    for entry in entries:
        turn = entry.get("turn")
        if not isinstance(turn, int) or not 0 <= turn < len(messages):
            continue
        if entry.get("rejected"):
            refused[entry["rejected"]] = refused.get(entry["rejected"], 0) + 1
        elif messages[turn].get("weight", 1) != 0:
            sources[entry["source"]] = sources.get(entry["source"], 0) + 1
    return sources, refused


def judge_counts(row: BeamRow) -> dict[str, int]:
    """The judge's verdicts (``beam-sft reason --judge``) on the turns a row still has: ``yes``,
    ``no``, ``unparseable`` (``judge_failed``) or ``failed`` (the judge's request failed).

    >>> judge_counts({"messages": [{}, {}, {}], "meta": {"reasoning": [{"turn": 1, "judge": {"verdict": "yes"}},
    ...     {"turn": 2, "rejected": "judge_failed", "judge": {}}, {"turn": 9, "judge": {"verdict": "no"}}]}})
    {'yes': 1, 'unparseable': 1}
    """
    entries = (row.get("meta") or {}).get("reasoning")
    counts: dict[str, int] = {}
    for entry in entries if isinstance(entries, list) else []:
        judge = entry.get("judge") if isinstance(entry, dict) else None
        turn = entry.get("turn") if isinstance(entry, dict) else None
        if not isinstance(judge, dict) or not isinstance(turn, int) or not 0 <= turn < len(row.get("messages") or []):
            continue
        verdict = judge.get("verdict") if judge.get("verdict") in ("yes", "no") else \
            "unparseable" if entry.get("rejected") == "judge_failed" else "failed"
        counts[verdict] = counts.get(verdict, 0) + 1
    return counts


__all__ = ["REASONING_SOURCES", "TEMPLATE_REASONING_ORDER", "REASONS", "REASON_CODES", "UNRECORDED", "BeamRow",
           "Rejection", "has_reasoning", "judge_counts", "reasoning_counts", "reasoning_of"]
