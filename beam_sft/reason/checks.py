"""A teacher's text, checked before it is kept: ``None`` (keep it) or ``(code, message)``.

Each rule is a reason code of stage ``reason`` (``beam_sft/reject_codes.py``). The text is judged as the
analysis message it would become: a Harmony marker or a special token of the tokenizer would turn
into a control token, reasoning or tool-call tags would teach Beam markup it never writes, a
cut-off answer is half a thought, and an overlong one is a runaway generation.

>>> check_text("I add 2 and 2.", "stop", max_chars=100)
>>> check_text("  ", "stop", max_chars=100)[0]
'teacher_empty'
>>> check_text("\\u200b\\ufeff\\n", "stop", max_chars=100)[1]  # zero-width characters show nothing either
'the teacher wrote no reasoning (only whitespace or invisible characters)'
>>> check_text("<think>hm</think>", "stop", max_chars=100)[0]
'teacher_markup'
>>> check_text('I write <rfl:parameter name="a">2</rfl:parameter>.', "stop", max_chars=100)[0]
'teacher_markup'
>>> check_text("so <|end|>", "stop", max_chars=100)[0]
'teacher_control_token'
>>> check_text("I add", "length", max_chars=100)[0]
'teacher_cut_off'
"""

from __future__ import annotations

import unicodedata

from beam_sft.convert.reasoning import find_reasoning_markup
from beam_sft.convert.validate import TOOL_CALL_MARKUP
from beam_sft.harmony.markers import ALL_MARKERS, PARAM_CLOSE

# Beam's own call arguments (<rfl:parameter name="k">): a teacher writing the call inside its reasoning
BEAM_CALL_MARKUP = ("<rfl:parameter", PARAM_CLOSE)

DEFAULT_MAX_CHARS = 20000


def _visible(char: str) -> bool:
    """Not whitespace, a format character (zero-width space, joiners, a BOM) nor a control character."""
    return not char.isspace() and unicodedata.category(char) not in ("Cf", "Cc")


def _first(needles, text: str) -> str | None:
    return next((n for n in needles if n in text), None)


_CUT_OFF = ("length", "content_filter")


def check_text(text: str, finish_reason: str | None, *, max_chars: int = DEFAULT_MAX_CHARS,
               forbidden_tokens: tuple[str, ...] = ()) -> tuple[str, str] | None:
    if finish_reason in _CUT_OFF:  # content_filter: the server stopped it mid-text, as length does
        return "teacher_cut_off", f"the answer was cut off (finish_reason {finish_reason}, {len(text)} characters)"
    if not any(_visible(c) for c in text):
        return "teacher_empty", "the teacher wrote no reasoning" + (
            "" if not text else " (only whitespace)" if not text.strip() else " (only whitespace or invisible characters)")
    found = _first(ALL_MARKERS, text) or _first(forbidden_tokens, text)
    if found:
        return "teacher_control_token", f"the reasoning holds {found!r}"
    lowered = text.lower()
    found = find_reasoning_markup(text) or _first(TOOL_CALL_MARKUP, lowered) or _first(BEAM_CALL_MARKUP, lowered)
    if found:
        return "teacher_markup", f"the reasoning holds {found!r}"
    kept = len(text.strip())  # what is kept is the stripped text: blanks around it are not reasoning
    if kept > max_chars:
        return "teacher_too_long", f"{kept} characters, more than the bound of {max_chars}"
    return None
