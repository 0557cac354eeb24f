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

from dataclasses import replace
from typing import Any

from beam_sft.convert.assemble import convert_with
from beam_sft.convert.openai import read_openai_row
from beam_sft.convert.options import ColumnMap, ConvertOptions
from beam_sft.convert.rows import BeamRow, Rejection

# Flat shapes common enough to read unmapped, as (prompt, input, answer) columns: a row without
# both of Alpaca's own columns (and with the column map left at Alpaca's) holding exactly one of these pairs
# is read by it, and the summary's notes say which (``columns:question+answer``).
KNOWN_COLUMNS = (
    ("prompt", None, "completion"),  # TRL's standard prompt-completion; OpenAI's legacy fine-tuning files
    ("prompt", None, "response"),
    ("question", None, "answer"),  # GSM8K and most QA sets
    ("query", None, "response"),  # MetaMathQA
    ("problem", None, "solution"),  # MATH, NuminaMath
    ("instruction", "context", "response"),  # databricks-dolly-15k
    ("input", None, "output"),  # NVIDIA's OpenCodeReasoning (not beside an instruction: _INPUT_ONLY)
)
# Alpaca's ``input`` is the instruction's second half: beside a column named like an instruction
# (``instructions``, ``Instruction``), reading input/output as the pair would drop that text unsaid.
_INPUT_ONLY = ("input", None, "output")
# A known pair's reasoning column, by the names reasoning sets use for it.
REASONING_COLUMNS = ("reasoning", "reasoning_content", "thinking")
# What NVIDIA's post-training sets write in their ``reasoning`` column: whether the answer was made
# with reasoning on, not the reasoning (that is inline in the answer's <think> block).
REASONING_SWITCHES = ("on", "off")
_NO_COLUMN = ""  # (a column name no row has: an unmapped pair has no input column)


def convert_alpaca(raw: Any, *, options: ConvertOptions) -> BeamRow | Rejection:
    """One flat row -> a BeamRow (without ``meta``) or a Rejection; never raises."""
    row = convert_with(read_flat_row, raw, options=options)
    note = None if isinstance(row, Rejection) else flat_columns(raw, options.columns)[1]
    if note is not None:  # said in the summary's notes: which columns the row was read from
        meta = row.setdefault("meta", {})
        meta["notes"] = {**meta.get("notes", {}), note: 1}
    return row


def is_flat(raw: Any, columns: ColumnMap) -> bool:
    """The shape detect.py votes ``alpaca`` for: the prompt and answer columns both present (the
    mapped ones, or one well-known pair, ``flat_columns``)."""
    if not isinstance(raw, dict):
        return False
    try:
        columns = flat_columns(raw, columns)[0]
    except Rejection:  # a known pair with two reasoning columns: flat, and its reader says why not
        return True
    return columns.prompt in raw and columns.answer in raw


def flat_columns(raw: Any, columns: ColumnMap) -> tuple[ColumnMap, str | None]:
    """The column map a flat row is read with, and the note naming a well-known pair read unmapped.

    >>> mapped, note = flat_columns({"question": "2+2?", "answer": "4", "thinking": "Add."}, ColumnMap())
    >>> mapped.prompt, mapped.answer, mapped.reasoning, note
    ('question', 'answer', 'thinking', 'columns:question+answer')
    """
    default = ColumnMap()
    if (not isinstance(raw, dict) or (columns.prompt, columns.answer) != (default.prompt, default.answer)
            or (columns.prompt in raw and columns.answer in raw)):
        return columns, None
    found = [c for c in KNOWN_COLUMNS if isinstance(raw.get(c[0]), str) and isinstance(raw.get(c[2]), str)]
    if len(found) != 1:  # none, or two pairs (which is the conversation cannot be told): as mapped
        return columns, None
    if found[0] == _INPUT_ONLY and any("instruct" in str(key).lower() for key in raw):
        return columns, None
    prompt, extra, answer = found[0]
    reasoning = [name for name in REASONING_COLUMNS if raw.get(name) is not None and not _switch(raw[name])]
    if len(reasoning) > 1:
        raise Rejection("conflicting_reasoning", f"the row holds reasoning in {reasoning[0]!r} and {reasoning[1]!r}: "
                                                 f"map one with columns: {{reasoning: COLUMN}}")
    mapped = replace(columns, prompt=prompt, input=extra or _NO_COLUMN, answer=answer,
                     reasoning=reasoning[0] if reasoning else _unswitched(raw, columns.reasoning, default.reasoning))
    return mapped, f"columns:{prompt}+{answer}"


def _switch(value: object) -> bool:
    return isinstance(value, str) and value.strip().lower() in REASONING_SWITCHES


def _unswitched(raw: dict, column: str, default: str) -> str:
    """The reasoning column of a known pair with none of ``REASONING_COLUMNS`` holding text: the
    mapped one, except the unmapped default where it holds an on/off switch (read nowhere)."""
    return _NO_COLUMN if column == default and _switch(raw.get(column)) else column


def _text(raw: dict, key: str, *, optional: bool = False) -> str | None:
    value = raw.get(key)
    if value is None and optional:
        return None
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        # one text in a list: simplescaling/s1K's thinking_trajectories ([the trajectory]); several
        # texts are refused below (which one, or how to join them, is not the reader's to choose)
        return value[0]
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
    columns = flat_columns(raw, columns)[0]
    messages, places = flat_messages(raw, columns)
    flat = {columns.prompt, columns.input, columns.answer, columns.reasoning, columns.history, columns.system}
    row = {k: v for k, v in raw.items() if k not in flat}
    row[columns.messages] = messages
    return read_openai_row(row, columns, places)
