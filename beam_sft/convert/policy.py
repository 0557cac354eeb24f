"""The missing-reasoning policy: what happens to trained assistant turns that have no reasoning.

Beam reasons on every turn, so a trained turn without reasoning would teach it to skip the
analysis message. The policy runs after conversion and before validation:

- ``drop`` (default): nothing changes here; validation rejects the row (``missing_reasoning``).
- ``truncate``: keep the conversation up to the last assistant turn with reasoning that comes
  before the first trained turn without it; what follows is cut. No such turn leaves nothing to
  train (``no_trained_turn``).
- ``unmask``: every trained turn without reasoning gets ``weight: 0`` (context, out of the loss).
  A row left with no trained turn is rejected (``no_trained_turn``).

>>> row = {"messages": [{"role": "user", "content": "a"},
...                     {"role": "assistant", "reasoning_content": "r", "content": "b"},
...                     {"role": "user", "content": "c"},
...                     {"role": "assistant", "content": "d"}]}
>>> len(apply_missing_reasoning(row, "truncate")["messages"])
2
>>> apply_missing_reasoning(row, "unmask")["messages"][3]
{'role': 'assistant', 'content': 'd', 'weight': 0}
"""

from __future__ import annotations

from beam_sft.convert.options import MissingReasoning
from beam_sft.convert.rows import BeamRow, has_reasoning
from beam_sft.harmony.spans import is_trained


def apply_missing_reasoning(row: BeamRow, policy: MissingReasoning) -> BeamRow:
    """The row after ``policy`` (a new dict; the input is not modified)."""
    messages = row.get("messages")
    if (
        policy == "drop"
        or not isinstance(messages, list)
        or not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages)
    ):
        return row
    if policy == "unmask":
        kept = [{**m, "weight": 0} if is_trained(m) and not has_reasoning(m) else m for m in messages]
        return {**row, "messages": kept}
    first = next((i for i, m in enumerate(messages) if is_trained(m) and not has_reasoning(m)), None)
    if first is None:
        return row
    last = max(
        (i for i in range(first) if messages[i]["role"] == "assistant" and has_reasoning(messages[i])),
        default=None,
    )
    return {**row, "messages": messages[: (first if last is None else last + 1)]}
