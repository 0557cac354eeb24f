"""The text each token contributes to the decoded row, for the token-by-token views."""

from __future__ import annotations

from collections.abc import Callable, Sequence

Decode = Callable[[Sequence[int]], str]
CONTEXT_TOKENS = 4
MAX_PENDING = 8


def token_texts(ids: Sequence[int], decode: Decode) -> list[str]:
    """One string per token; joined they give ``decode(ids)`` for byte-level BPE tokenizers.

    A token that ends inside a multi-byte character gets ``""`` and the character goes to the
    token that completes it (decoding it alone would show U+FFFD). Each token is decoded after a
    few tokens of context, so tokenizers whose decoding depends on the previous token (leading
    spaces) come out right too.

    >>> pieces = {1: "a", 2: "b"}
    >>> token_texts([1, 2, 1], lambda ids: "".join(pieces[i] for i in ids))
    ['a', 'b', 'a']
    """
    ids = list(ids)
    texts: list[str] = []
    context: list[int] = []
    pending: list[int] = []
    for tid in ids:
        pending.append(tid)
        base = decode(context)
        full = decode(context + pending)
        if full.startswith(base) and not full.endswith("\ufffd"):
            text = full[len(base):]
        elif len(pending) >= MAX_PENDING:  # give up waiting: show what decodes
            text = full[len(base):] if full.startswith(base) else decode(pending)
        else:
            texts.append("")  # held until the character is complete
            continue
        texts.append(text)
        context = (context + pending)[-CONTEXT_TOKENS:]
        pending = []
    if pending:
        base = decode(context)
        full = decode(context + pending)
        texts[-1] = full[len(base):] if full.startswith(base) else decode(pending)
    return texts
