"""The length policy: what happens to a row longer than ``max_length`` tokens.

``drop`` (the default) rejects it with code ``too_long``. ``trim_turns`` drops whole trailing turns
until it fits, and never cuts inside a turn.

A *turn* starts at a user message and runs to the next one: the user's message, the assistant
messages that answer it, and the tool calls and tool results in between. So a row can only be cut
right before a user message, and only where the message before the cut is an assistant message that
is trained (weight 1): the trimmed row still ends on a trained assistant message, and no tool call
is separated from its result. If no such cut fits, the row is dropped (``too_long``).
"""

from __future__ import annotations

from collections.abc import Callable

from beam_sft.errors import Rejection


def turn_cuts(messages: list[dict]) -> list[int]:
    """Message counts a row may be cut to, ascending (the last is ``len(messages)`` when allowed).

    >>> msgs = [{"role": "system"}, {"role": "user"}, {"role": "assistant"},
    ...         {"role": "user"}, {"role": "assistant", "weight": 0},
    ...         {"role": "user"}, {"role": "assistant", "tool_calls": [{}]}, {"role": "tool"},
    ...         {"role": "assistant"}]
    >>> turn_cuts(msgs)
    [3, 9]
    """
    cuts = []
    for count in range(1, len(messages) + 1):
        last = messages[count - 1]
        if last.get("role") != "assistant" or last.get("weight", 1) == 0:
            continue
        if count == len(messages) or messages[count].get("role") == "user":
            cuts.append(count)
    return cuts


def trim_row(row: dict, count: int) -> dict:
    """The row cut to its first ``count`` messages, noting the cut in ``meta``.

    >>> trim_row({"messages": [1, 2, 3], "meta": {"row": 4}}, 2)
    {'messages': [1, 2], 'meta': {'row': 4, 'trimmed_messages': 1}}
    """
    dropped = len(row["messages"]) - count
    meta = {**(row.get("meta") or {}), "trimmed_messages": dropped}
    return {**row, "messages": row["messages"][:count], "meta": meta}


def too_long(length: int, max_length: int) -> Rejection:
    return Rejection("too_long", f"{length} tokens, more than max_length={max_length}")


def fit_by_trimming(row: dict, length: int, max_length: int, encode: Callable[[dict], object]):
    """The longest prefix of whole turns that fits: ``(trimmed_row, encoded)``; Rejection when none does.

    ``encode(row)`` returns an object with ``input_ids``; ``length`` is the full row's token count.
    Rows only grow as turns are added, so a binary search over the cut points finds it in a few
    encodes (the result is checked, so a template that breaks that rule only costs more encodes).
    """
    cuts = [c for c in turn_cuts(row["messages"]) if c < len(row["messages"])]
    best = None
    low, high = 0, len(cuts) - 1
    while low <= high:
        middle = (low + high) // 2
        candidate = trim_row(row, cuts[middle])
        encoded = encode(candidate)
        if len(encoded.input_ids) <= max_length:
            best = (candidate, encoded)
            low = middle + 1
        else:
            high = middle - 1
    if best is None:
        raise too_long(length, max_length)
    return best


def max_chars_per_token(tokenizer) -> int | None:
    """The most characters of text one token can stand for, or None when it cannot be bounded.

    With no normalizer, a token's text is a piece of the input: a byte-level BPE token of k
    characters in its vocabulary spelling stands for k bytes, hence at most k characters (a
    character is at least one byte); a Metaspace token spells each input character as one; byte
    fallback tokens (``<0x0A>``) spell one byte with six characters. So the longest vocabulary or
    added token, in characters, bounds every token from above. A normalizer may delete characters
    (control characters, accents), so then no bound holds.

    >>> from beam_sft.harmony.fixture import build_tokenizer
    >>> 1 < max_chars_per_token(build_tokenizer()) < 64
    True
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or backend.normalizer is not None:
        return None
    vocab = backend.get_vocab(with_added_tokens=True)
    return max((len(token) for token in vocab), default=0) or None


def char_bound(tokenizer, max_length: int | None, policy: str) -> int | None:
    """Rows whose rendered text has more characters than this cannot fit ``max_length`` tokens
    whatever their tokenization (``max_length * max_chars_per_token``), so ``drop`` rejects them
    as ``too_long`` before tokenizing. None: no bound (no max_length, another policy, or no
    per-token bound for this tokenizer). ``trim_turns`` gets none: a cut row may still fit."""
    if max_length is None or policy != "drop":
        return None
    per_token = max_chars_per_token(tokenizer)
    return None if per_token is None else max_length * per_token


def too_many_chars(chars: int, bound: int) -> Rejection:
    return Rejection("too_long", f"{chars} characters rendered: more than max_length tokens whatever the "
                                f"tokenization (the bound is {bound} characters), so it was not tokenized")
