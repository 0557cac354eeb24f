"""The turns ``beam-sft eval`` scores: every trained assistant turn of a prepared folder's rows, with
the conversation before it as the prompt.

Selection is deterministic: the folder's rows in their stored order (``--rows N``: the first N rows),
and in each row every assistant message whose weight is not 0, in order; the prompt is every message
before it (earlier assistant turns included, as the model saw them in training), with the row's tools
and chat-template arguments. A turn exactly equal to one already taken (same prompt, tools, arguments
and reference: the mix step can repeat a row) is taken once, or repeated prompts would read as a
collapse in ``distinct_ratio``; how many were skipped is reported. A trained turn that opens its row
has no prompt to generate from (a chat completion needs a message): it is skipped and counted too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from beam_sft.errors import PreparedError
from beam_sft.evaluate.metrics import kind_of


@dataclass(frozen=True)
class EvalTurn:
    """One trained assistant turn: its prompt (``messages``), the reference message, tools, kwargs."""

    messages: list[dict]
    reference: dict
    tools: list[dict] | None
    chat_template_kwargs: dict = field(default_factory=dict)
    source: str = ""

    @property
    def kind(self) -> str:
        return kind_of(self.reference)


@dataclass(frozen=True)
class Selection:
    turns: list[EvalTurn]
    rows: int  # rows read
    duplicates: int  # turns skipped as exact repeats
    unprompted: int = 0  # trained turns skipped as the first message of their row (nothing to prompt with)


def turns_of_row(row: dict) -> list[EvalTurn]:
    """Every trained assistant turn of one canonical BeamRow (weight 0 and a first-message assistant skipped).

    >>> [t.reference["content"] for t in turns_of_row({"messages": [
    ...     {"role": "user", "content": "a"}, {"role": "assistant", "content": "A", "weight": 0},
    ...     {"role": "user", "content": "b"}, {"role": "assistant", "content": "B"}]})]
    ['B']
    """
    messages = row.get("messages") or []
    meta = row.get("meta") or {}
    out = []
    for i, message in enumerate(messages):
        if message.get("role") != "assistant" or message.get("weight", 1) == 0 or i == 0:
            continue
        out.append(EvalTurn([dict(m) for m in messages[:i]], dict(message), row.get("tools") or None,
                            dict(row.get("chat_template_kwargs") or {}),
                            f"{meta.get('source')}:{meta.get('row')}#{i}"))
    return out


def _identity(turn: EvalTurn) -> str:
    return json.dumps([turn.messages, turn.reference, turn.tools, turn.chat_template_kwargs], sort_keys=True,
                      default=str)


def select_turns(rows: Iterable[dict]) -> Selection:
    """All trained turns of ``rows`` in order, exact repeats skipped."""
    seen: set[str] = set()
    turns: list[EvalTurn] = []
    count = duplicates = unprompted = 0
    for row in rows:
        count += 1
        first = (row.get("messages") or [{}])[0]
        unprompted += first.get("role") == "assistant" and first.get("weight", 1) != 0
        for turn in turns_of_row(row):
            key = _identity(turn)
            if key in seen:
                duplicates += 1
                continue
            seen.add(key)
            turns.append(turn)
    return Selection(turns, count, duplicates, unprompted)


def read_rows(prepared_dir: str | Path, limit: int | None = None) -> list[dict]:
    """The canonical BeamRows of a prepared folder (its ``row`` column), the first ``limit`` of them;
    the folder is checked by ``load_prepared`` first (report, digests, columns)."""
    from beam_sft.dataset_folder import load_prepared

    dataset = load_prepared(prepared_dir)
    if "row" not in dataset.column_names:
        raise PreparedError(Path(prepared_dir), "the prepared dataset has no `row` column (the rows eval scores)")
    count = len(dataset) if limit is None else min(limit, len(dataset))
    texts = dataset.select(range(count)).select_columns(["row"])["row"]
    return [json.loads(text) for text in texts if text]


def render_prompt(tokenizer, turn: EvalTurn) -> str:
    """The prompt text: the conversation before the turn through the chat template, with the
    generation header (``<|start|>assistant``) the model continues from."""
    return tokenizer.apply_chat_template(turn.messages, tools=turn.tools, tokenize=False, add_generation_prompt=True,
                                         **turn.chat_template_kwargs)
