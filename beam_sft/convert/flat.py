"""Flat rows -> BeamRow: Alpaca (``instruction``, ``input``, ``output``, optional ``system`` and
``history``) and single-turn prompt/answer/reasoning columns, one reader for both.

The columns come from ``ColumnMap`` (``prompt``, ``input``, ``answer``, ``reasoning``,
``history``, ``system``), so a CoT distillation set reads with
``--columns prompt=Question reasoning=Complex_CoT answer=Response``. The row becomes an OpenAI
message list (system, the history's user/assistant pairs, the prompt with its input after a blank
line, the answer with ``reasoning_content``) and goes through the OpenAI reader, so inline
``<think>`` tags, tool columns, reasoning conflicts and every Beam rule apply exactly as there.
A turn without reasoning (history turns always, the last one when the set has no reasoning
column) goes through the ``missing_reasoning`` policy like any other row's.

>>> row = convert_alpaca({"instruction": "Add", "input": "2+2", "output": "4", "reasoning": "Sum."},
...                      options=ConvertOptions())
>>> row["messages"]
[{'role': 'user', 'content': 'Add\\n\\n2+2'}, {'role': 'assistant', 'reasoning_content': 'Sum.', 'content': '4'}]
"""

from __future__ import annotations

from typing import Any

from beam_sft.convert.assemble import convert_with
from beam_sft.convert.openai import read_openai_row
from beam_sft.convert.options import ColumnMap, ConvertOptions
from beam_sft.convert.rows import BeamRow, Rejection


def convert_alpaca(raw: Any, *, options: ConvertOptions) -> BeamRow | Rejection:
    """One flat row -> a BeamRow (without ``meta``) or a Rejection; never raises."""
    return convert_with(read_flat_row, raw, options=options)


def is_flat(raw: Any, columns: ColumnMap) -> bool:
    """The shape detect.py votes ``alpaca`` for: the prompt and answer columns both present."""
    return isinstance(raw, dict) and columns.prompt in raw and columns.answer in raw


def _text(raw: dict, key: str, *, optional: bool = False) -> str | None:
    value = raw.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        what = "missing" if value is None else f"a {type(value).__name__}, not text"
        code = "missing_content" if value is None else "malformed_row"
        raise Rejection(code, f"column {key!r} is {what}")
    return value


def flat_messages(raw: Any, columns: ColumnMap) -> tuple[list[dict], list[str]]:
    """The OpenAI message list of one flat row, and the column(s) each message was read from
    (``history[0][1]``, ``instruction+input``, ``output+reasoning``), for rejections to name.

    >>> flat_messages({"instruction": "Add", "input": "2+2", "output": "4"}, ColumnMap())[1]
    ['instruction+input', 'output']
    """
    if not isinstance(raw, dict):
        raise Rejection("malformed_row", f"a row is a {type(raw).__name__}, not an object")
    messages: list[dict] = []
    places: list[str] = []
    system = _text(raw, columns.system, optional=True)
    if system:
        messages.append({"role": "system", "content": system})
        places.append(columns.system)
    history = raw.get(columns.history)
    if history is not None:
        if not isinstance(history, list):
            raise Rejection("malformed_row", f"column {columns.history!r} is a {type(history).__name__}, not a list")
        for i, pair in enumerate(history):
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(t, str) for t in pair)):
                raise Rejection("malformed_row", f"{columns.history}[{i}] is not a [prompt, answer] pair of texts")
            messages += [{"role": "user", "content": pair[0]}, {"role": "assistant", "content": pair[1]}]
            places += [f"{columns.history}[{i}][0]", f"{columns.history}[{i}][1]"]
    prompt = _text(raw, columns.prompt)
    prompt_place = columns.prompt
    extra = _text(raw, columns.input, optional=True)
    if extra and extra.strip():
        prompt = f"{prompt}\n\n{extra}" if prompt.strip() else extra
        prompt_place = f"{columns.prompt}+{columns.input}"
    answer: dict[str, Any] = {"role": "assistant"}
    answer_place = columns.answer
    reasoning = _text(raw, columns.reasoning, optional=True)
    if reasoning is not None:
        answer["reasoning_content"] = reasoning
        answer_place = f"{columns.answer}+{columns.reasoning}"
    answer["content"] = _text(raw, columns.answer)
    return [*messages, {"role": "user", "content": prompt}, answer], [*places, prompt_place, answer_place]


def read_flat_row(raw: Any, columns: ColumnMap) -> tuple[list[dict], list[dict], dict | None]:
    """``(draft messages, tools, template kwargs)``, by the OpenAI reader over ``flat_messages``."""
    messages, places = flat_messages(raw, columns)
    flat = {columns.prompt, columns.input, columns.answer, columns.reasoning, columns.history, columns.system}
    row = {k: v for k, v in raw.items() if k not in flat}
    row[columns.messages] = messages
    return read_openai_row(row, columns, places)
