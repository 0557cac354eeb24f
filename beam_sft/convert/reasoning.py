"""Reasoning extraction: one reasoning text per assistant turn, from whichever carrier the source used.

Carriers, in the order they are read: the message fields ``reasoning_content``, ``reasoning`` and
``thinking``; content parts typed ``reasoning``/``thinking`` (read by the part reader); and
inline ``<think>``/``<thinking>``/``<reasoning>`` blocks anywhere in the content (below).
Carriers that are present must agree (after the whitespace rule below), or the row is rejected
with ``conflicting_reasoning``.

Whitespace (deliberate)
-----------------------
1. Reasoning from an explicit carrier (a field or a reasoning part) is kept byte for byte: the
   dataset author put exactly that text there, and a valid BeamRow must survive export and
   conversion unchanged. Reasoning that is only whitespace counts as absent.
2. Reasoning from inline tags is stripped of leading and trailing whitespace, and so is the
   answer after the closing tag: the newlines around ``<think>\n...\n</think>\n\n`` are the
   layout of the tag convention, not text (Beam renders reasoning right after
   ``<|channel|>analysis<|message|>``). Inner whitespace is kept. Content that held no tag is
   kept exactly as given.
3. With ``strip_answer_tags``, content that is one ``<answer>...</answer>`` block (R1-distill style)
   or one ``<|begin_of_solution|>...<|end_of_solution|>`` block (OpenThoughts style) becomes the
   stripped text inside it (``ANSWER_TAGS``).
4. Carriers agree when their stripped texts are equal; the first carrier's text is kept (fields
   come before parts, parts before inline tags).
5. Text said before tool calls that goes to the reasoning (``tool_call_content='reasoning'``) is
   stripped and kept in its place among the inline blocks, a blank line apart (after an explicit
   reasoning field, it follows the field).

Inline tags
-----------
Tags: ``<think>`` (DeepSeek/Qwen), ``<thinking>`` and ``<reasoning>`` (``REASONING_TAGS``), and
``<|begin_of_thought|>``/``<|end_of_thought|>`` (OpenThoughts, Bespoke-Stratos, Sky-T1, whose answer
is wrapped in ``<|begin_of_solution|>``/``<|end_of_solution|>``: rule 3). A tag anywhere in the text
is read, not only at the start: no reasoning markup may reach a trained token.

- An answer turn is ``[reasoning block(s)] [answer]``: blocks that follow one another (whitespace
  apart) are joined with a blank line. Text before a block, or a block after the answer text,
  cannot be one Beam analysis message followed by the answer: ``interleaved_reasoning``.
- A closing tag with no opening tag before it means the opening tag lived in the prompt
  (DeepSeek-R1 / Qwen3 templates): the text before it is reasoning. Those templates write it at a
  line's edge (``...\n</think>\n\nAnswer``); one inside a line of text, words on both sides
  (``write the closing tag </think> at the end``), is the text talking about the tag, not the end of
  a reasoning: ``reasoning_markup_in_text``, never half an answer turned into reasoning.
- A block opened inside another, a stray closing tag, or a different tag inside a block:
  ``interleaved_reasoning``; an opening tag that is never closed: ``unclosed_reasoning_tag``.
- On a tool-call turn everything said before the calls is analysis: ``read_inline`` gives the
  blocks and the text between them in order, and assemble.py keeps that order.

>>> split_inline_reasoning("<think>\\nAdd them.\\n</think>\\n\\n4")
('Add them.', '4')
>>> split_inline_reasoning("Plain answer, no tags")
(None, 'Plain answer, no tags')
>>> split_inline_reasoning("<thinking>plan</thinking>\\nanswer")
('plan', 'answer')
>>> split_inline_reasoning("carried over from the prompt\\n</think>Answer")
('carried over from the prompt', 'Answer')
>>> split_inline_reasoning("Write the closing tag </think> at the end.")
Traceback (most recent call last):
...
beam_sft.errors.Rejection: [reasoning_markup_in_text] a stray </think> inside a line of text, with no opening tag before it (a closing tag that ends reasoning opened in the prompt stands at a line's edge)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from beam_sft.convert.rows import Rejection

# (open, close) pairs recognised inline; <think> is DeepSeek/Qwen, <thinking>/<reasoning> common
# variants, <|begin_of_thought|> the OpenThoughts/Bespoke-Stratos/Sky-T1 distillation sets'.
REASONING_TAGS: tuple[tuple[str, str], ...] = (
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    ("<reasoning>", "</reasoning>"),
    ("<|begin_of_thought|>", "<|end_of_thought|>"),
)
# Every reasoning tag string, as usually written.
REASONING_MARKUP: tuple[str, ...] = tuple(tag for pair in REASONING_TAGS for tag in pair)
# A tag as written in the wild: any case, blanks inside the brackets (``<THINK>``, ``< /think >``,
# ``<|END_OF_THOUGHT|>``). verify's reasoning_markup rule finds these in trained reasoning, so a
# converter that knew only the lower-case forms kept rows whose one stray ``<Think>`` then failed the
# whole run; every tag this matches is read as a tag here and refused in trained text (validate.py).
# Groups: 1 "/" of a closing XML-like tag, 2 its name; 3 begin/end of a thought tag.
_TAG_RE = re.compile(r"<\s*(/?)\s*(thinking|think|reasoning)\s*>|<\|\s*(begin|end)_of_thought\s*\|>",
                     re.IGNORECASE)
_THOUGHT_CLOSE_RE = re.compile(r"<\|\s*end_of_thought\s*\|>", re.IGNORECASE)


def find_reasoning_markup(text: str) -> str | None:
    """The first reasoning tag in ``text``, in any case and spacing, as written; None when there is none.

    >>> find_reasoning_markup("a </ Thinking > b"), find_reasoning_markup("think about it")
    ('</ Thinking >', None)
    """
    if "<" not in text:  # most texts: a C scan instead of the regex (every trained text of every row)
        return None
    found = _TAG_RE.search(text)
    return found.group() if found else None


def _is_close(tag: re.Match) -> bool:
    return tag.group(1) == "/" or (tag.group(3) or "").lower() == "end"


def _close_re(tag: re.Match) -> re.Pattern:
    if tag.group(3):
        return _THOUGHT_CLOSE_RE
    return re.compile(r"<\s*/\s*" + re.escape(tag.group(2)) + r"\s*>", re.IGNORECASE)


def _closing(tag: re.Match) -> str:
    """The closing tag of an opening ``tag``, as usually written (for messages)."""
    return "<|end_of_thought|>" if tag.group(3) else f"</{tag.group(2)}>"
REASONING_FIELDS: tuple[str, ...] = ("reasoning_content", "reasoning", "thinking")
# Tags that wrap a whole answer (rule 3): R1-distill's <answer>, OpenThoughts' solution markers.
ANSWER_TAGS: tuple[tuple[str, str], ...] = (
    ("<answer>", "</answer>"),
    ("<|begin_of_solution|>", "<|end_of_solution|>"),
)


def normalize_reasoning(text: str | None) -> str | None:
    """Rule 2: strip; empty means absent (for inline tags).

    >>> normalize_reasoning("\\n  step one\\n"), normalize_reasoning(" \\n")
    ('step one', None)
    """
    if text is None:
        return None
    text = text.strip()
    return text or None


@dataclass(frozen=True)
class InlineText:
    """A text cut at its reasoning tags: ``(kind, text)`` segments in order, kind ``reasoning`` or
    ``text`` (tags removed, text as given); ``tagged`` says whether any tag was found."""

    segments: tuple[tuple[str, str], ...]
    tagged: bool

    def blocks(self) -> str | None:
        """The reasoning blocks, stripped and joined with a blank line (None when there are none)."""
        return _join(t for k, t in self.segments if k == "reasoning")

    def text(self) -> str | None:
        """The text outside the blocks, stripped and joined with a blank line."""
        return _join(t for k, t in self.segments if k == "text")

    def in_order(self) -> str | None:
        """Blocks and text in their order, each stripped, joined with a blank line."""
        return _join(t for _, t in self.segments)


def _join(pieces) -> str | None:
    kept = [p.strip() for p in pieces if p.strip()]
    return "\n\n".join(kept) if kept else None


def read_inline(content: str) -> InlineText:
    """Cut ``content`` at every reasoning tag (see the module rules); raises a Rejection when the
    tags do not nest as blocks.

    >>> read_inline("A: <think>plan</think> go").segments
    (('text', 'A: '), ('reasoning', 'plan'), ('text', ' go'))
    >>> read_inline("<think>a<think>b</think></think>")
    Traceback (most recent call last):
    ...
    beam_sft.errors.Rejection: [interleaved_reasoning] <think> block holds another reasoning tag (<think>)
    """
    first = _TAG_RE.search(content)
    if first is None:
        return InlineText((("text", content),), False)
    segments: list[tuple[str, str]] = []
    pos = 0
    if _is_close(first):  # a closing tag first: the opening one was in the prompt
        before, after = content[: first.start()].rstrip(" \t"), content[first.end():].lstrip(" \t")
        if not (before == "" or before.endswith("\n") or after == "" or after.startswith(("\n", "\r"))):
            raise Rejection("reasoning_markup_in_text", f"a stray {first.group()} inside a line of text, with no opening "
                            "tag before it (a closing tag that ends reasoning opened in the prompt stands at a line's edge)")
        segments.append(("reasoning", content[: first.start()]))
        pos = first.end()
    while True:
        m = _TAG_RE.search(content, pos)
        if m is None:
            segments.append(("text", content[pos:]))
            break
        tag = m.group()
        if _is_close(m):
            raise Rejection("interleaved_reasoning", f"a stray {tag} outside a reasoning block")
        segments.append(("text", content[pos : m.start()]))
        close = _close_re(m).search(content, m.end())
        if close is None:
            raise Rejection("unclosed_reasoning_tag", f"{tag} is never closed by {_closing(m)}")
        body = content[m.end() : close.start()]
        inner = _TAG_RE.search(body)
        if inner is not None:
            raise Rejection("interleaved_reasoning", f"{tag} block holds another reasoning tag ({inner.group()})")
        segments.append(("reasoning", body))
        pos = close.end()
    return InlineText(tuple((k, t) for k, t in segments if t), True)


def split_inline_reasoning(content: str) -> tuple[str | None, str]:
    """``(reasoning, answer)`` of an answer turn's content (see the module rules).

    >>> split_inline_reasoning("<think>a</think>b<think>c</think>d")
    Traceback (most recent call last):
    ...
    beam_sft.errors.Rejection: [interleaved_reasoning] a reasoning block follows the answer text
    >>> split_inline_reasoning("<reasoning>x</reasoning> y")
    ('x', 'y')
    """
    inline = read_inline(content)
    if not inline.tagged:
        return None, content
    seen_reasoning = seen_text = False
    for kind, text in inline.segments:
        if not text.strip():
            continue
        if kind == "text":
            seen_text = True
            continue
        if seen_text:
            where = "a reasoning block follows the answer text" if seen_reasoning else "text comes before the reasoning block"
            raise Rejection("interleaved_reasoning", where)
        seen_reasoning = True
    return inline.blocks(), inline.text() or ""


def strip_answer_tags(content: str) -> str:
    """Rule 3: ``<answer>\\nX\\n</answer>`` -> ``X`` (and ``ANSWER_TAGS``' other pairs); anything
    else is returned unchanged.

    >>> strip_answer_tags("<answer>\\n42\\n</answer>"), strip_answer_tags("<answer>1</answer> and 2")
    ('42', '<answer>1</answer> and 2')
    >>> strip_answer_tags("<|begin_of_solution|>\\n\\nx = 1\\n\\n<|end_of_solution|>")
    'x = 1'
    """
    inner = content.strip()
    for opening, closing in ANSWER_TAGS:
        if inner.startswith(opening) and inner.endswith(closing) and len(inner) >= len(opening) + len(closing):
            body = inner[len(opening) : len(inner) - len(closing)]
            if opening not in body and closing not in body:
                return body.strip()
    return content


def merge_reasoning(carriers: list[tuple[str, str | None]]) -> str | None:
    """One reasoning text from ``(carrier name, text)`` pairs; present carriers must agree (rule 4).

    >>> merge_reasoning([("reasoning_content", " x\\n"), ("<think>", "x")])
    ' x\\n'
    >>> merge_reasoning([("reasoning_content", "x"), ("thinking", "y")])
    Traceback (most recent call last):
    ...
    beam_sft.errors.Rejection: [conflicting_reasoning] reasoning_content and thinking carry different reasoning
    """
    found: tuple[str, str, str] | None = None  # (carrier, text as given, stripped text)
    for name, text in carriers:
        stripped = normalize_reasoning(text)
        if stripped is None:
            continue
        if found is None:
            found = (name, text, stripped)
        elif found[2] != stripped:
            raise Rejection("conflicting_reasoning", f"{found[0]} and {name} carry different reasoning")
    return found[1] if found else None
