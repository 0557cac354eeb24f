"""Data shown to a person: every character that would act on the screen instead of being read,
written out as an escape (``\\x1b``, ``\\u202e``, ``\\r``).

Rows are user data, and the views print them: an ESC sequence in a row would clear the terminal,
retitle it or plant an OSC 8 hyperlink; a CR or backspace would overwrite what was printed; a bidi
override would reverse the tokens after it (``<|end|>`` read as ``<|dne|>``), in the terminal and
in a browser alike. What is escaped: C0 and C1 controls and DEL (but a tab, which only moves the
cursor on, and a newline where the view wants its line breaks), the bidi embeddings, overrides,
isolates and marks, the line and paragraph separators, and lone surrogates (which a UTF-8 stdout
cannot even write). Everything else, accents, CJK, emoji with their joiners, is left as it is.

A backslash is not escaped: ordinary text keeps its backslashes, at the price that a literal
``\\x1b`` typed into a row reads like an escaped ESC.
"""

from __future__ import annotations

import json
import re
from html import escape

_ACTIVE = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 but tab and newline, DEL, C1 (U+009B is a CSI of its own)
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidi marks, embeddings, overrides, isolates
    "\u2028\u2029"  # line and paragraph separators
    "\ud800-\udfff"  # lone surrogates
)
_INLINE = re.compile(f"[{_ACTIVE}]")
_ONE_LINE = re.compile(f"[{_ACTIVE}\n]")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escaped(match: re.Match) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(text: object, *, newlines: bool = True) -> str:
    """``text`` (``str()`` of it) with every active character escaped; ``newlines=False`` escapes
    newlines too, for what must stay on one line. Idempotent: what it writes is never escaped again.

    >>> visible("a\\x1b[2Jb\\u202ec\\x00d\\re\\x9b31m\\n\\tf 😀 é 中")
    'a\\\\x1b[2Jb\\\\u202ec\\\\x00d\\\\re\\\\x9b31m\\n\\tf 😀 é 中'
    >>> visible("two\\nlines", newlines=False)
    'two\\\\nlines'
    >>> visible(visible("\\x07")) == visible("\\x07") == "\\\\x07"
    True
    """
    text = text if isinstance(text, str) else str(text)
    return (_INLINE if newlines else _ONE_LINE).sub(_escaped, text)


def html_text(text: object, quote: bool = True) -> str:
    """``html.escape`` (unchanged, so markup stays text), then the active characters made visible:
    a browser would act on a bidi override or drop a NUL as the terminal does."""
    return visible(escape(text if isinstance(text, str) else str(text), quote=quote))


def json_visible(value, **dumps) -> str:
    """``json.dumps(value, ensure_ascii=False, **dumps)`` with the active characters it leaves (DEL,
    C1, bidi, separators) written as ``\\uXXXX``: still JSON, and the same value when read back.
    (JSON escapes C0 itself, and outside strings it writes no active character.)

    >>> json_visible({"a": "x\\u202ey\\x9b\\n"})
    '{"a": "x\\\\u202ey\\\\u009b\\\\n"}'
    """
    text = json.dumps(value, ensure_ascii=False, **dumps)
    return _INLINE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
