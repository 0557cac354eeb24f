"""Reasoning extraction: one reasoning text per assistant turn, from whichever carrier the source used.

Carriers, in the order they are read: the message fields ``reasoning_content``, ``reasoning`` and
``thinking``; content parts typed ``reasoning``/``thinking`` (read by the part reader); and an
inline ``<think>...</think>`` or ``<reasoning>...</reasoning>`` block at the start of the content.
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
   becomes the stripped text inside it.
4. Carriers agree when their stripped texts are equal; the first carrier's text is kept (fields
   come before parts, parts before inline tags).
5. Text beside tool calls that goes to the reasoning (``tool_call_content='reasoning'``) is
   stripped and appended after a blank line.

Inline tags
-----------
- Only a block that opens at the very start of the content (after whitespace) is reasoning. A
  ``<think>`` later in the text is left alone: the answer may talk about tags.
- A closing ``</think>`` with no opening tag before it means the opening tag lived in the prompt
  (DeepSeek-R1 / Qwen3 templates): the text before it is reasoning.
- A second reasoning block after the first one (reasoning, answer, reasoning) cannot be one Beam
  analysis message: ``interleaved_reasoning``. An opening tag that is never closed:
  ``unclosed_reasoning_tag``.

>>> split_inline_reasoning("<think>\\nAdd them.\\n</think>\\n\\n4")
('Add them.', '4')
>>> split_inline_reasoning("Plain answer, <think> mentioned later")
(None, 'Plain answer, <think> mentioned later')
>>> split_inline_reasoning("carried over from the prompt</think>Answer")
('carried over from the prompt', 'Answer')
"""

from __future__ import annotations

from beam_sft.convert.rows import Reject

# (open, close) pairs recognised inline; <think> is DeepSeek/Qwen, <reasoning> a common variant.
REASONING_TAGS: tuple[tuple[str, str], ...] = (("<think>", "</think>"), ("<reasoning>", "</reasoning>"))
REASONING_FIELDS: tuple[str, ...] = ("reasoning_content", "reasoning", "thinking")
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"


def normalize_reasoning(text: str | None) -> str | None:
    """Rule 2: strip; empty means absent (for inline tags).

    >>> normalize_reasoning("\\n  step one\\n"), normalize_reasoning(" \\n")
    ('step one', None)
    """
    if text is None:
        return None
    text = text.strip()
    return text or None


def split_inline_reasoning(content: str) -> tuple[str | None, str]:
    """``(reasoning, answer)`` from content with an inline reasoning block (see the module rules).

    >>> split_inline_reasoning("<think>a</think>b<think>c</think>d")
    Traceback (most recent call last):
    ...
    beam_sft.convert.rows.Reject: a second <think> block follows the answer text
    >>> split_inline_reasoning("<reasoning>x</reasoning> y")
    ('x', 'y')
    """
    head = content.lstrip()
    for open_tag, close_tag in REASONING_TAGS:
        if head.startswith(open_tag):
            body_start = len(content) - len(head) + len(open_tag)
            end = content.find(close_tag, body_start)
            if end < 0:
                raise Reject("unclosed_reasoning_tag", f"{open_tag} is never closed by {close_tag}")
            reasoning = content[body_start:end]
            answer = content[end + len(close_tag) :]
            _check_single_block(reasoning, answer, open_tag, close_tag)
            return normalize_reasoning(reasoning), answer.strip()
    for open_tag, close_tag in REASONING_TAGS:
        end = content.find(close_tag)
        if end >= 0 and open_tag not in content[:end]:
            reasoning = content[:end]
            answer = content[end + len(close_tag) :]
            _check_single_block(reasoning, answer, open_tag, close_tag)
            return normalize_reasoning(reasoning), answer.strip()
    return None, content


def _check_single_block(reasoning: str, answer: str, open_tag: str, close_tag: str) -> None:
    if open_tag in reasoning:
        raise Reject("interleaved_reasoning", f"{open_tag} opens again inside the reasoning block")
    if open_tag in answer:
        raise Reject("interleaved_reasoning", f"a second {open_tag} block follows the answer text")
    if close_tag in answer:
        raise Reject("interleaved_reasoning", f"a stray {close_tag} follows the reasoning block")


def strip_answer_tags(content: str) -> str:
    """Rule 3: ``<answer>\\nX\\n</answer>`` -> ``X``; anything else is returned unchanged.

    >>> strip_answer_tags("<answer>\\n42\\n</answer>"), strip_answer_tags("<answer>1</answer> and 2")
    ('42', '<answer>1</answer> and 2')
    """
    inner = content.strip()
    if inner.startswith(ANSWER_OPEN) and inner.endswith(ANSWER_CLOSE):
        body = inner[len(ANSWER_OPEN) : len(inner) - len(ANSWER_CLOSE)]
        if ANSWER_OPEN not in body and ANSWER_CLOSE not in body:
            return body.strip()
    return content


def merge_reasoning(carriers: list[tuple[str, str | None]]) -> str | None:
    """One reasoning text from ``(carrier name, text)`` pairs; present carriers must agree (rule 4).

    >>> merge_reasoning([("reasoning_content", " x\\n"), ("<think>", "x")])
    ' x\\n'
    >>> merge_reasoning([("reasoning_content", "x"), ("thinking", "y")])
    Traceback (most recent call last):
    ...
    beam_sft.convert.rows.Reject: reasoning_content and thinking carry different reasoning
    """
    found: tuple[str, str, str] | None = None  # (carrier, text as given, stripped text)
    for name, text in carriers:
        stripped = normalize_reasoning(text)
        if stripped is None:
            continue
        if found is None:
            found = (name, text, stripped)
        elif found[2] != stripped:
            raise Reject("conflicting_reasoning", f"{found[0]} and {name} carry different reasoning")
    return found[1] if found else None
