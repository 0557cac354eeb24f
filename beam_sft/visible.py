"""Data shown to a person: every character that would act on the screen, or hide, instead of being
read, written out as an escape (``\\x1b``, ``\\u202e``, ``\\r``, ``\\U000e0041``).

Rows are user data, and the views print them: an ESC sequence in a row would clear the terminal,
retitle it or plant an OSC 8 hyperlink; a CR or backspace would overwrite what was printed; a bidi
override would reverse the tokens after it (``<|end|>`` read as ``<|dne|>``), in the terminal and
in a browser alike; a zero-width space would make ``<|en\\u200bd|>`` read as the marker it is not,
and tag characters carry a whole hidden text. What is escaped: C0 and C1 controls and DEL (but a tab,
which only moves the cursor on, and a newline where the view wants its line breaks), the bidi
embeddings, overrides, isolates and marks, the line and paragraph separators, lone surrogates (which a
UTF-8 stdout cannot even write), and the characters that draw nothing (Unicode's default-ignorables:
zero-width space, word joiner, soft hyphen, byte-order mark, Hangul fillers, invisible operators, tag
characters, ...). Three of those are kept where text needs them, and only there: a zero-width
(non-)joiner between two shown non-ASCII characters (an emoji sequence, Persian, Devanagari), a
variation selector after a shown non-ASCII character or in a keycap (``1\\ufe0f\\u20e3``), and the
tags of the three subdivision flags. Everything else, accents, CJK, emoji, is left as it is.

A backslash is not escaped: ordinary text keeps its backslashes, at the price that a literal
``\\x1b`` typed into a row reads like an escaped ESC.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from html import escape

_ALWAYS = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 but tab and newline, DEL, C1 (U+009B is a CSI of its own)
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidi marks, embeddings, overrides, isolates
    "\u2028\u2029"  # line and paragraph separators
    "\ud800-\udfff"  # lone surrogates
    # default-ignorables (DerivedCoreProperties.txt): drawn as nothing, so a shown line would lie
    "\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b\u2060-\u2065\u206a-\u206f\u3164"
    "\ufeff\uffa0\ufff0-\ufffb\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e01f0-\U000e0fff"
)
_JOINERS = "\u200c\u200d"
_SELECTORS = "\ufe00-\ufe0f\U000e0100-\U000e01ef"
_TAGS = "\U000e0000-\U000e007f"
_HIDDEN = f"{_ALWAYS}{_JOINERS}{_SELECTORS}{_TAGS}"
_INLINE = re.compile(f"[{_HIDDEN}]")  # one class, so text without any (most text) is one fast scan
_ONE_LINE = re.compile(f"[{_HIDDEN}\n]")
# ASCII text (str.isascii is a flag, not a scan) can hold only C0 and DEL: a short class is 4x faster
_ASCII_INLINE = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
_ASCII_ONE_LINE = re.compile("[\x00-\x08\x0a-\x1f\x7f]")
_BASE = re.compile(f"[^\\x00-\\x7f{_HIDDEN}]")  # a shown non-ASCII character
_FLAG = re.compile("\U0001f3f4(?:" + "|".join("".join(chr(0xE0000 + ord(c)) for c in name) + "\U000e007f"
                                              for name in ("gbeng", "gbsct", "gbwls")) + ")")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _needed(text: str, at: int) -> bool:
    """Whether the hidden character at ``text[at]`` is one the text needs there (see the module's doc)."""
    char = text[at]
    before = text[at - 1] if at else ""
    after = text[at + 1] if at + 1 < len(text) else ""
    if char in _JOINERS:  # after a shown character or an emoji's selector, before a shown character
        return bool(before and (_BASE.match(before) or before in "\ufe0e\ufe0f") and after and _BASE.match(after))
    if "\ufe00" <= char <= "\ufe0f" or "\U000e0100" <= char <= "\U000e01ef":
        return bool(before and _BASE.match(before)) or (char in "\ufe0e\ufe0f" and after == "\u20e3")
    if "\U000e0000" <= char <= "\U000e007f":
        start = text.rfind("\U0001f3f4", max(0, at - 6), at)
        flag = _FLAG.match(text, start) if start >= 0 else None
        return bool(flag and at < flag.end())
    return False


def _escaped(match: re.Match) -> str:
    char = match.group()
    if _needed(match.string, match.start()):
        return char
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: object, *, newlines: bool = True) -> str:
    """``text`` (``str()`` of it) with every active or hidden character escaped; ``newlines=False``
    escapes newlines too, for what must stay on one line. Idempotent: what it writes is never escaped again.

    >>> visible("a\\x1b[2Jb\\u202ec\\x00d\\re\\x9b31m\\n\\tf 😀 é 中")
    'a\\\\x1b[2Jb\\\\u202ec\\\\x00d\\\\re\\\\x9b31m\\n\\tf 😀 é 中'
    >>> visible("<|en\\u200bd|> x\\u200dy \\U000e0041")
    '<|en\\\\u200bd|> x\\\\u200dy \\\\U000e0041'
    >>> visible("two\\nlines", newlines=False)
    'two\\\\nlines'
    >>> visible(visible("\\x07")) == visible("\\x07") == "\\\\x07"
    True
    """
    text = text if isinstance(text, str) else str(text)
    if text.isascii():
        return (_ASCII_INLINE if newlines else _ASCII_ONE_LINE).sub(_escaped, text)
    return (_INLINE if newlines else _ONE_LINE).sub(_escaped, text)


def html_text(text: object, quote: bool = True) -> str:
    """``html.escape`` (unchanged, so markup stays text), then the active characters made visible:
    a browser would act on a bidi override or drop a NUL as the terminal does."""
    return visible(escape(text if isinstance(text, str) else str(text), quote=quote))


def _json_escaped(match: re.Match) -> str:
    if _needed(match.string, match.start()):
        return match.group()
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON has no escape past U+FFFF: the UTF-16 pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_visible(value, **dumps) -> str:
    """``json.dumps(value, ensure_ascii=False, **dumps)`` with the active and hidden characters it
    leaves (DEL, C1, bidi, separators, zero-width and tag characters) written as ``\\uXXXX``: still
    JSON, and the same value when read back. (JSON escapes C0 itself, and outside strings it writes
    no active character.)

    >>> json_visible({"a": "x\\u202ey\\x9b\\n\\U000e0041"})
    '{"a": "x\\\\u202ey\\\\u009b\\\\n\\\\udb40\\\\udc41"}'
    """
    text = json.dumps(value, ensure_ascii=False, **dumps)
    return (_ASCII_INLINE if text.isascii() else _INLINE).sub(_json_escaped, text)  # (JSON leaves DEL)


SHOWN_CHARS = 200  # of a row's value, what a message quotes: the rejects record keeps the row whole
KEY_CHARS = 40  # of each of the keys a message lists (a row's keys found, where none was the one looked for)


def cut(text: str, limit: int, where: str | None = None) -> str:
    """``text``, its first ``limit`` characters when longer, saying how many more there are (and that
    ``where`` holds them): a page or a message shows a bounded excerpt of what a file has whole.

    >>> cut("abcdef", 4, "rejects.jsonl")
    'abcd… (2 more characters in rejects.jsonl)'
    >>> cut("abcdef", 4)
    'abcd… (2 more characters)'
    """
    if len(text) <= limit:
        return text
    return text[:limit] + f"… ({len(text) - limit:,} more characters{f' in {where}' if where else ''})"


def quoted(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` as a message quotes a row's value (a role, a name, an argument, a whole object):
    past ``limit`` characters, the first ``limit`` and how long it was, so a 5 MB string or a huge
    object makes no 5 MB message (nor terminal line, nor report cell). One line, as ``repr`` is.

    >>> quoted("user"), quoted(["a", 1])
    ("'user'", "['a', 1]")
    >>> quoted("x" * 5_242_880, 4)
    "'xxxx'… (5,242,880 characters)"
    >>> quoted({"k": "v" * 300}, 8)
    "{'k': 'v… (309 characters as written)"
    >>> quoted(10 ** 5000)
    'a value of type int, too deep or too long to show'
    """
    if isinstance(value, str):
        return repr(value) if len(value) <= limit else f"{value[:limit]!r}… ({len(value):,} characters)"
    try:
        text = repr(value)
    except (RecursionError, ValueError):  # a hostile row's nesting, an int past Python's 4300 digits
        return f"a value of type {type(value).__name__}, too deep or too long to show"
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters as written)"


def marked_off(text: str, marks: str) -> str:
    """``text`` with each character of ``marks`` written as ``\\uXXXX``: for a view that draws its
    own brackets (``⟪trained⟫``, an excerpt's ``⟦region⟧``), so a row cannot draw them too.

    >>> marked_off("a⟫b⟪", "⟪⟫")
    'a\\\\u27ebb\\\\u27ea'
    """
    return "".join(f"\\u{ord(c):04x}" if c in marks else c for c in text) if any(m in text for m in marks) else text


@functools.lru_cache(maxsize=8)
def _heads(heads: tuple[str, ...]) -> re.Pattern:
    return re.compile("\n(?=" + "|".join(re.escape(head) for head in heads) + ")(.)", re.DOTALL)


def heads_marked_off(text: str, heads: tuple[str, ...]) -> str:
    """``text`` with the first character of each line (after its first) that begins with one of ``heads``
    written as ``\\uXXXX``: for a view whose own lines begin so (``inspect``'s ``[assistant:final]``
    label), so a line of a row's text cannot pass for one of them. (``marked_off`` for a view's lines.)

    >>> heads_marked_off("a\\n[assistant:final] b [c]\\nviolations: none", ("[", "violations:"))
    'a\\n\\\\u005bassistant:final] b [c]\\n\\\\u0076iolations: none'
    """
    if "\n" not in text:
        return text
    return _heads(heads).sub(lambda m: f"\n\\u{ord(m.group(1)):04x}", text)


class VisibleFormatter(logging.Formatter):
    """Log lines that name sources, files and folders (anyone's names): the message shown ``visible`` on
    one line, so a name cannot act on the terminal or forge a line of its own; a traceback keeps its lines.

    >>> record = logging.LogRecord("x", logging.WARNING, "", 0, "source %s is empty", ("a\\nb\\x1b[2J",), None)
    >>> VisibleFormatter("%(message)s").format(record)
    'source a\\\\nb\\\\x1b[2J is empty'
    """

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        record.message = visible(record.message, newlines=False)
        return super().formatMessage(record)
