"""Test helper: BeamRow -> OpenAI or ShareGPT rows (the inverse of the converters; tests only).

``convert_openai(export_openai(row))`` and ``convert_sharegpt(export_sharegpt(row))`` give the
row back (without ``meta``) for every valid BeamRow. With ``reasoning="think"`` the ShareGPT
export writes reasoning inline as ``<think>\\n...\\n</think>\\n\\n`` before the answer (the common
LLaMA-Factory convention); that round trip needs the reasoning.py normal form: answers without
surrounding whitespace and no reasoning tags in the text. ``reasoning="field"`` puts it in a
``reasoning_content`` key on the turn, which always round-trips.

>>> row = {"messages": [{"role": "user", "content": "Hi"},
...                     {"role": "assistant", "reasoning_content": "Greet.", "content": "Hello"}]}
>>> export_sharegpt(row)["conversations"][1]
{'from': 'gpt', 'value': '<think>\\nGreet.\\n</think>\\n\\nHello'}
"""

from __future__ import annotations

import json
from typing import Any, Literal

from beam_sft.convert.rows import BeamRow

_SPEAKER = {"system": "system", "developer": "developer", "user": "human"}


def export_openai(row: BeamRow) -> dict[str, Any]:
    """OpenAI chat fine-tuning shape: arguments as JSON strings, reasoning in ``reasoning_content``."""
    messages = []
    for msg in row["messages"]:
        msg = dict(msg)
        if msg.get("tool_calls"):
            msg["tool_calls"] = [
                {
                    **call,
                    "function": {
                        **call["function"],
                        "arguments": json.dumps(call["function"]["arguments"], ensure_ascii=False),
                    },
                }
                for call in msg["tool_calls"]
            ]
        messages.append(msg)
    return {"messages": messages, **_row_extras(row, tools_as_text=False)}


def export_sharegpt(row: BeamRow, *, reasoning: Literal["think", "field"] = "think") -> dict[str, Any]:
    """ShareGPT shape: human/gpt/function_call/observation turns, ``tools`` as a JSON string.

    Calls are ``function_call`` turns ``{"id", "name", "arguments"}``; results are
    ``observation`` turns holding a ``{"tool_call_id", "name", "content"}`` envelope, so ids and
    names survive. Loss weights are written as ``weight`` on the turn.
    """
    turns: list[dict[str, Any]] = []
    for msg in row["messages"]:
        role = msg["role"]
        if role in _SPEAKER:
            turns.append({"from": _SPEAKER[role], "value": msg["content"]})
        elif role == "tool":
            envelope = {k: msg[k] for k in ("tool_call_id", "name") if k in msg}
            turns.append(
                {
                    "from": "observation",
                    "value": json.dumps({**envelope, "content": msg["content"]}, ensure_ascii=False),
                }
            )
        else:
            turns.extend(_assistant_turns(msg, reasoning))
    return {"conversations": turns, **_row_extras(row, tools_as_text=True)}


def _assistant_turns(msg: dict, reasoning: str) -> list[dict[str, Any]]:
    thought = msg.get("reasoning_content")
    calls = msg.get("tool_calls") or []
    turns: list[dict[str, Any]] = []
    if not calls or thought:
        text = msg.get("content") or ""
        turn: dict[str, Any] = {"from": "gpt"}
        if thought and reasoning == "think":
            turn["value"] = f"<think>\n{thought}\n</think>\n\n{text}"
        else:
            turn["value"] = text
            if thought:
                turn["reasoning_content"] = thought
        turns.append(turn)
    for call in calls:
        value = {
            "id": call["id"],
            "name": call["function"]["name"],
            "arguments": call["function"]["arguments"],
        }
        turns.append({"from": "function_call", "value": json.dumps(value, ensure_ascii=False)})
    if "weight" in msg:
        turns[0]["weight"] = msg["weight"]
    return turns


def _row_extras(row: BeamRow, *, tools_as_text: bool) -> dict[str, Any]:
    extras: dict[str, Any] = {}
    if "tools" in row:
        extras["tools"] = json.dumps(row["tools"], ensure_ascii=False) if tools_as_text else row["tools"]
    if "chat_template_kwargs" in row:
        extras["chat_template_kwargs"] = row["chat_template_kwargs"]
    return extras
