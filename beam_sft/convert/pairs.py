"""Conversations stored as a list of turn pairs -> BeamRow: ``{"conversation": [{"input": Q, "output": A}, ...]}``.

The pair spellings read (``PAIR_KEYS``), each one a published dataset's:

- ``input``/``output``: LDJnr/Capybara, LDJnr/Pure-Dove, LDJnr/Verified-Camel (under ``conversation``,
  beside ``source``; translated copies of Capybara keep them under ``conversations``);
- ``human``/``assistant``: the Firefly training format (YeungNLP/moss-003-sft-data, YeungNLP/ultrachat:
  under ``conversation``, beside ``conversation_id``, ``category`` and an optional ``system``).

Other spellings (``prompt``/``response``, ``instruction``/``response``) are not read: no dataset was
found that keeps them as a list of pairs (as flat columns, flat.py reads them).

The list is looked for under ``conversation`` and ``conversations`` (``columns.conversations`` as
mapped) only: a list of input/output objects under another key is as often a code set's test cases
or a prompt's few-shot examples as a conversation, so no other key is guessed. A list there is a
pair list when some item holds both keys of one spelling (the first such item's spelling is the
list's; an item that also has a message's ``role``/``content`` or ShareGPT's ``from``/``value`` is a
message, and a list of messages stays theirs): a later item without the pair's keys is then named in
its rejection, not read as something else.

Each pair becomes a user message (its input) then an assistant message (its output), in order, and
the row is read by the OpenAI reader (one set of rules: inline ``<think>`` reasoning in an output,
the ``system`` column, ``tools``, the missing-reasoning policy). A pair's other keys are its answer's,
read as on an OpenAI assistant message (``reasoning_content``/``reasoning``/``thinking`` its
reasoning, ``weight``/``loss``/``train`` its loss flag; keys that reader does not know are ignored,
as there). Rejections name the pair's own place (``conversation[2].output``):

- an item that is not an object, an input or output that is not text: ``malformed_row``;
- an input or output missing or null: ``missing_content``;
- an item with a message's ``role``/``content`` (or ShareGPT's ``from``/``value``): ``malformed_row``
  (a list mixing messages and pairs: which one a turn is cannot be told);
- pair lists under both keys: ``conflicting_carriers`` naming both (pipeline.conflicting_carriers
  says the same of a pair list beside a ``messages`` list or flat prompt/answer columns);
- an empty list is no pair list (nothing says it is one): read as pairs, ``malformed_row``.

The summary's notes say what was read: ``pairs:conversation(input+output)``.

>>> row = convert_pairs({"source": "GPT4LLM", "conversation": [
...     {"input": "What is 1+1?", "output": "<think>Add.</think>2"}]}, options=ConvertOptions())
>>> row["messages"], row["meta"]
([{'role': 'user', 'content': 'What is 1+1?'}, {'role': 'assistant', 'reasoning_content': 'Add.', 'content': '2'}], {'notes': {'pairs:conversation(input+output)': 1}})
"""

from __future__ import annotations

from typing import Any

from beam_sft.convert.assemble import convert_with
from beam_sft.convert.openai import read_openai_row
from beam_sft.convert.options import ColumnMap, ConvertOptions
from beam_sft.convert.rows import BeamRow, Rejection
from beam_sft.visible import KEY_CHARS, quoted

# (the user's key, the assistant's key) of each spelling read; see the module docstring for whose.
PAIR_KEYS: tuple[tuple[str, str], ...] = (("input", "output"), ("human", "assistant"))
LIST_KEYS = ("conversation", "conversations")


def convert_pairs(raw: Any, *, options: ConvertOptions) -> BeamRow | Rejection:
    """One row of turn pairs -> a BeamRow (without ``meta`` but its note) or a Rejection; never raises."""
    row = convert_with(read_pairs_row, raw, options=options)
    if not isinstance(row, Rejection):  # said in the summary's notes: which list and spelling were read
        key, (asked, answered) = pair_lists(raw, options.columns)[0]
        meta = row.setdefault("meta", {})
        meta["notes"] = {**meta.get("notes", {}), f"pairs:{key}({asked}+{answered})": 1}
    return row


def is_pairs(raw: Any, columns: ColumnMap) -> bool:
    """The shape detect.py votes ``pairs`` for: a pair list under one of the list keys."""
    return bool(pair_lists(raw, columns))


def list_keys(columns: ColumnMap) -> tuple[str, ...]:
    """The keys a pair list is looked for under: ``conversation`` and the mapped ``conversations``."""
    return tuple(dict.fromkeys((LIST_KEYS[0], columns.conversations)))


def pair_lists(raw: Any, columns: ColumnMap) -> list[tuple[str, tuple[str, str]]]:
    """``(key, spelling)`` of each pair list in the row (see the module docstring), in key order.

    >>> pair_lists({"conversation": [{"human": "hi", "assistant": "hello"}]}, ColumnMap())
    [('conversation', ('human', 'assistant'))]
    """
    if not isinstance(raw, dict):
        return []
    found = []
    for key in list_keys(columns):
        items = raw.get(key)
        spelling = _spelling(items, columns) if isinstance(items, list) else None
        if spelling is not None:
            found.append((key, spelling))
    return found


def _spelling(items: list, columns: ColumnMap) -> tuple[str, str] | None:
    # An item that is also a message (a ShareGPT turn with stray input/output keys) says nothing: a
    # list of such turns stays ShareGPT's or OpenAI's.
    held = _message_keys(columns)
    for item in items:
        if isinstance(item, dict) and not any(k in item for k in held):
            for pair in PAIR_KEYS:
                if pair[0] in item and pair[1] in item:
                    return pair
    return None


def _message_keys(columns: ColumnMap) -> tuple[str, ...]:
    """The keys that make an item a message (OpenAI's and ShareGPT's role and text), not a pair."""
    return tuple(dict.fromkeys(("role", "content", columns.role_key, columns.content_key)))


def read_pairs_row(raw: Any, columns: ColumnMap) -> tuple[list[dict], list[dict], dict | None]:
    """``(draft messages, tools, template kwargs)``, by the OpenAI reader over ``pair_messages``."""
    if not isinstance(raw, dict):
        raise Rejection("malformed_row", f"a row is a {type(raw).__name__}, not an object")
    found = pair_lists(raw, columns)
    if not found:
        raise Rejection("malformed_row", _no_pairs(raw, columns))
    if len(found) > 1:
        raise Rejection("conflicting_carriers", f"the row holds pair lists under {found[0][0]!r} and "
                                                f"{found[1][0]!r}: which conversation is meant is unclear")
    key, spelling = found[0]
    messages, places = pair_messages(raw[key], key, spelling, columns)
    row = {k: v for k, v in raw.items() if k != key}
    row[columns.messages] = messages
    return read_openai_row(row, columns, places)


def pair_messages(items: list, key: str, spelling: tuple[str, str], columns: ColumnMap
                  ) -> tuple[list[dict], list[str]]:
    """The OpenAI messages of a pair list, and the place each was read from (``conversation[0].input``).

    >>> pair_messages([{"input": "q", "output": "a", "weight": 0}], "conversation", ("input", "output"),
    ...               ColumnMap())
    ([{'role': 'user', 'content': 'q'}, {'weight': 0, 'role': 'assistant', 'content': 'a'}], ['conversation[0].input', 'conversation[0].output'])
    """
    asked, answered = spelling
    messages: list[dict] = []
    places: list[str] = []
    for i, item in enumerate(items):
        where = f"{key}[{i}]"
        if not isinstance(item, dict):
            raise Rejection("malformed_row", f"{where} is a {type(item).__name__}, not an {asked}/{answered} pair")
        held = [k for k in _message_keys(columns) if k in item]
        if held:
            raise Rejection("malformed_row", f"{where} has {held[0]!r}, a message's key, in a list of {asked}/"
                                             f"{answered} pairs: which one the turn is cannot be told")
        extra = {k: v for k, v in item.items() if k not in spelling}
        messages += [{"role": "user", "content": _text(item, asked, where)},
                     {**extra, "role": "assistant", "content": _text(item, answered, where)}]
        places += [f"{where}.{asked}", f"{where}.{answered}"]
    return messages, places


def _text(item: dict, key: str, where: str) -> str:
    value = item.get(key)
    if value is None:
        keys = ", ".join(quoted(k, KEY_CHARS) for k in list(item)[:12]) or "none"
        raise Rejection("missing_content", f"{where}.{key} is {'null' if key in item else 'missing'} (keys: {keys})")
    if not isinstance(value, str):
        raise Rejection("malformed_row", f"{where}.{key} is a {type(value).__name__}, not text")
    return value


def _no_pairs(raw: dict, columns: ColumnMap) -> str:
    """Why a row read as pairs holds none: the list keys' values, or the keys found."""
    for key in list_keys(columns):
        if key in raw:
            value = raw[key]
            what = ("an empty list" if value == [] else
                    f"a list with no {' or '.join('/'.join(p) for p in PAIR_KEYS)} pair" if isinstance(value, list)
                    else f"a {type(value).__name__}, not a list")
            return f"{key!r} is {what}: the row holds no pair list to read"
    found = ", ".join(quoted(k, KEY_CHARS) for k in list(raw)[:12]) or "none"
    return f"no {' or '.join(map(repr, list_keys(columns)))} list of pairs in the row (keys found: {found})"
