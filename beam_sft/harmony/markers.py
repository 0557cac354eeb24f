"""Beam Harmony markers. Every marker is one token; only RETURN is a special token (and eos)."""

from __future__ import annotations

START = "<|start|>"
END = "<|end|>"
MESSAGE = "<|message|>"
CHANNEL = "<|channel|>"
CONSTRAIN = "<|constrain|>"
CALL = "<|call|>"
RETURN = "<|return|>"

ALL_MARKERS: tuple[str, ...] = (START, END, MESSAGE, CHANNEL, CONSTRAIN, CALL, RETURN)
# Only <|return|> is special, so decoding with skip_special_tokens=True keeps message boundaries.
SPECIAL_MARKERS: tuple[str, ...] = (RETURN,)
EOS = RETURN
# Generation stops at either; both end a trained span.
STOP_MARKERS: tuple[str, ...] = (RETURN, CALL)

CHANNELS: tuple[str, ...] = ("analysis", "final")

PARAM_CLOSE = "</rfl:parameter>"

DEFAULT_MODEL_IDENTITY = "You are Beam, an AI assistant trained by Reflection."
REASONING_EFFORT_LABELS: dict[str, int] = {
    "minimal": 8,
    "low": 32,
    "medium": 64,
    "high": 128,
    "xhigh": 256,
    "max": 512,
}


def find_marker(text: str) -> str | None:
    """Return the first Harmony marker found in ``text``, or None.

    >>> find_marker("plain text")
    >>> find_marker("oops <|end|> here")
    '<|end|>'
    """
    for marker in ALL_MARKERS:
        if marker in text:
            return marker
    return None
