"""Small format helpers that both the encoder and the verifier use: mask runs, which turns are
trained, and splitting text on added tokens.

They live here, in the format package, so that ``verify`` can share them without importing the
encoder (an encoder bug must not be able to hide itself inside the code that checks it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np

from beam_sft.harmony.markers import ALL_MARKERS


def mask_runs(mask: Sequence[int] | np.ndarray) -> list[tuple[int, int]]:
    """Token ranges ``[start, end)`` of the maximal runs of non-zero values in a mask.

    >>> mask_runs([0, 1, 1, 0, 1])
    [(1, 3), (4, 5)]
    >>> mask_runs([])
    []
    """
    values = np.asarray(mask)
    padded = np.zeros(len(values) + 2, dtype=np.int8)
    padded[1:-1] = values != 0
    edges = np.flatnonzero(np.diff(padded))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def is_trained(message: dict) -> bool:
    """An assistant message is trained unless its weight is 0; no other message is.

    >>> is_trained({"role": "assistant"}), is_trained({"role": "assistant", "weight": 0})
    (True, False)
    >>> is_trained({"role": "user"})
    False
    """
    return message.get("role") == "assistant" and message.get("weight", 1) != 0


def token_splitter(tokens: Iterable[str]) -> re.Pattern:
    """A pattern whose ``split`` cuts text around each of ``tokens`` (longest first, as a tokenizer
    matches added tokens), keeping them: ``text, token, text, token, ..., text``.

    >>> token_splitter(["<|a|>", "<|ab|>"]).split("x<|ab|>y")
    ['x', '<|ab|>', 'y']
    """
    alternatives = sorted(set(tokens), key=len, reverse=True)
    if not alternatives:
        return re.compile(r"(?!x)x")  # matches nothing: split gives the text back whole
    return re.compile("(" + "|".join(map(re.escape, alternatives)) + ")")


MARKER_SPLIT = token_splitter(ALL_MARKERS)


def split_markers(text: str, pattern: re.Pattern = MARKER_SPLIT) -> list[str]:
    """``text`` cut around the Harmony markers: ``[text, marker, text, ..., marker, text]``.

    >>> split_markers("<|start|>user<|message|>hi<|end|>")
    ['', '<|start|>', 'user', '<|message|>', 'hi', '<|end|>', '']
    """
    return pattern.split(text)
