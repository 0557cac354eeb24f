"""Conversations already rendered by a chat template (a ``text`` column, or a row that is one
string) -> draft messages: ChatML and Llama 3. The Hermes reader (hermes.py) reads the drafts on,
so ``<think>``, ``<tool_call>`` and ``<tool_response>`` inside the turns are read as in any Hermes row.

- ChatML (Qwen, OpenHermes, axolotl/unsloth exports): ``<|im_start|>ROLE\\nTEXT<|im_end|>``. Phi-4's
  ``<|im_start|>ROLE<|im_sep|>TEXT<|im_end|>`` is read alike.
- Llama 3: ``<|start_header_id|>ROLE<|end_header_id|>\\n\\nTEXT<|eot_id|>`` (or ``<|eom_id|>``, which
  ends a turn that waits on a tool).

Which template a text is in is told by its first turn marker; a marker of the other template anywhere
is ``malformed_row`` (mixed templates). What is taken off is exactly the templates' layout: the
newline(s) after the role (ChatML's ``\\n``, Llama 3's ``\\n\\n``; fewer where fewer are written),
whitespace between turns and around the transcript, one leading BOS (``<|begin_of_text|>`` or
``<s>``; Hermes 2 Pro on Llama 3 writes ChatML after ``<|begin_of_text|>``) and one trailing EOS
(``<|endoftext|>``, ``<|end_of_text|>`` or ``</s>``). A turn's text is kept byte for byte.

Every other thing is a rejection naming the turn (``transcript turn N``, from 0) or the character
where it is:

- text outside any turn: ``malformed_row`` (never dropped);
- a turn without its end (``<|im_end|>`` missing before the next ``<|im_start|>``, or at the end of
  the text: a cut-off turn): ``malformed_row``. One exception: an EMPTY assistant turn left open at
  the very end (the template's generation prompt, ``<|im_start|>assistant\\n``) is taken off and counted
  (``generation_prompt_dropped`` in ``meta.notes``); one holding text is an unclosed turn;
- a role of no alias (parts.ROLE_ALIASES, as in every reader): ``unknown_role``; a ``function_call``
  turn's text is the call(s) of the assistant turn before it, as in ShareGPT;
- a ``<|...|>`` control token inside a turn's text: an end-of-text token (``<|endoftext|>``,
  ``<|end_of_text|>``) is ``separator_in_text``, a media placeholder (``<|image_pad|>``,
  ``<|vision_start|>``, Llama's ``<|image|>``) ``non_text_content``, any other ``malformed_row``: the
  source's tokenizer read it as a control token, so it is not text that can be trained as text.
  Harmony's markers are left to validate.py (``harmony_marker_in_text``).

Llama 3.1's tool calls are the template's JSON: an assistant turn that is exactly one object
``{"name", "parameters"}`` (or ``"arguments"``), after an optional ``<|python_tag|>``, is that call;
a built-in tool's call (``<|python_tag|>brave_search.call(...)``, code) is ``non_text_content``.
Tool results are ``ipython`` (or ``tool``) turns, matched to the calls by position. The tools Llama
3.1's template declares in the first user or the system turn are read for every reader by
``tools.extract_llama_tools`` (assemble.finish_row, beside the ``<tools>`` block).

>>> [(d["role"], d["content"]) for d in read_template_transcript(
...     "<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\nHello!<|im_end|>\\n")]
[('user', 'Hi'), ('assistant', 'Hello!')]
>>> [(d["role"], d["content"]) for d in read_template_transcript("<|begin_of_text|><|start_header_id|>user"
...     "<|end_header_id|>\\n\\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\\n\\nHello!<|eot_id|>")]
[('user', 'Hi'), ('assistant', 'Hello!')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from beam_sft.convert.assemble import DROPPED, PLACE, add_call_turn, read_call_value
from beam_sft.convert.parts import ROLE_ALIASES, canonical_role
from beam_sft.convert.rows import Rejection
from beam_sft.convert.tools import NOT_JSON, maybe_json, parse_tool_call
from beam_sft.harmony.markers import ALL_MARKERS as HARMONY_MARKERS
from beam_sft.visible import quoted


@dataclass(frozen=True)
class Template:
    """One chat template's turn layout."""

    name: str
    start: str  # opens a turn, the role follows
    role_ends: tuple[str, ...]  # what ends the role (ChatML: a newline, or Phi-4's <|im_sep|>)
    layout: str  # the newlines the template writes after the role's end, taken off
    ends: tuple[str, ...]  # what closes a turn
    markers: frozenset[str]  # its structural tokens: any of them in the other template's text mixes the two


CHATML = Template("ChatML", "<|im_start|>", ("\n", "<|im_sep|>"), "", ("<|im_end|>",),
                  frozenset({"<|im_start|>", "<|im_end|>", "<|im_sep|>"}))
LLAMA3 = Template("Llama 3", "<|start_header_id|>", ("<|end_header_id|>",), "\n\n", ("<|eot_id|>", "<|eom_id|>"),
                  frozenset({"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>",
                             "<|python_tag|>"}))
TEMPLATES = (CHATML, LLAMA3)
BOS = ("<|begin_of_text|>", "<s>")
EOS = ("<|endoftext|>", "<|end_of_text|>", "</s>")
PYTHON_TAG = "<|python_tag|>"
# A token the source's tokenizer reads as one control token (Qwen's and Llama's are all written so).
_CONTROL = re.compile(r"<\|[A-Za-z][A-Za-z0-9_]*\|>")
_MEDIA = re.compile(r"image|video|vision|audio")
_CALL_KEYS = ({"name", "parameters"}, {"name", "arguments"})


def template_of(text: str) -> Template | None:
    """The template whose turn marker comes first in ``text``; None when neither's is there.

    >>> template_of("<|im_start|>user\\nhi<|im_end|>").name, template_of("USER: hi") is None
    ('ChatML', True)
    """
    found = [(at, t) for t in TEMPLATES if (at := text.find(t.start)) >= 0]
    return min(found, key=lambda f: f[0])[1] if found else None


def read_template_transcript(text: str) -> list[dict]:
    """A ChatML or Llama 3 transcript -> draft messages (see the module's rules), or a Rejection."""
    template = template_of(text)
    if template is None:
        raise Rejection("malformed_row", "the transcript holds no ChatML <|im_start|> nor Llama 3 "
                        "<|start_header_id|> turn")
    drafts: list[dict] = []
    pos = _skip_space(text, 0)
    pos = _skip_space(text, pos + len(bos)) if (bos := _prefix(text, pos, BOS)) else pos
    turn = 0
    while pos < len(text):
        if not text.startswith(template.start, pos):
            eos = _prefix(text, pos, EOS)
            if eos and not text[pos + len(eos):].strip():
                break  # the template's end-of-text token, after the last turn
            raise _outside(text, pos, template)
        pos = _read_turn(text, pos, turn, template, drafts)
        pos = _skip_space(text, pos)
        turn += 1
    return drafts


def _read_turn(text: str, pos: int, turn: int, template: Template, drafts: list[dict]) -> int:
    """Read the turn opening at ``pos`` onto ``drafts``; where the text after it starts."""
    where = f"transcript turn {turn}"
    head = pos + len(template.start)
    reopen = text.find(template.start, head)
    limit = reopen if reopen >= 0 else len(text)  # each search stays inside the turn: linear in the text
    close, end_marker = _first(text, head, template.ends, limit)
    stop = close if close >= 0 else limit
    role_end, role_marker = _first(text, head, template.role_ends, stop)
    if role_end < 0:
        if template is LLAMA3:
            raise Rejection("malformed_row", f"{where}: no <|end_header_id|> after its role "
                            f"{quoted(text[head:stop], 60)}")
        role_end, role_marker = stop, ""
    role_name = text[head:role_end]
    body = role_end + len(role_marker)
    for newline in template.layout:  # the template's layout after the role; fewer where fewer are written
        body += body < stop and text.startswith(newline, body)
    if stop != close:  # the turn is not closed before the next turn or the end of the text
        prompt = ROLE_ALIASES.get(role_name.lower()) == "assistant" and not text[body:].strip()
        if stop == len(text) and prompt and drafts:  # the template's generation prompt, left empty
            drafts[-1][DROPPED] = [*drafts[-1].get(DROPPED, ()), "generation_prompt"]
            return len(text)
        role = quoted(role_name, 40)
        missing = " or ".join(template.ends)
        if stop == reopen:
            raise Rejection("malformed_row", f"{where} ({role}) has no {missing} before the next {template.start}")
        raise Rejection("malformed_row", f"{where} ({role}) has no {missing}: the transcript ends inside it "
                        "(cut off?)")
    role = canonical_role(role_name, where)  # the one alias table of every reader
    content = text[body:close]
    _check_tokens(content, where, template, role)
    if role == "call":  # ShareGPT's function_call turn, written by a template: the calls of the turn before
        add_call_turn(drafts, read_call_value(content, where), [], None, where)
    elif role == "assistant":
        drafts.append(_assistant(content, where, template))
    else:
        drafts.append({"role": role, "content": content, PLACE: where})
    return close + len(end_marker)


def _assistant(content: str, where: str, template: Template) -> dict:
    draft: dict[str, Any] = {"role": "assistant", "content": content, "reasoning": [], "tool_calls": [],
                             "weight": None, PLACE: where}
    if template is not LLAMA3:
        return draft
    tagged = content.lstrip().startswith(PYTHON_TAG)
    body = content.lstrip()[len(PYTHON_TAG):] if tagged else content
    value = maybe_json(body.strip(), where) if body.strip().startswith("{") else NOT_JSON
    if isinstance(value, dict) and set(value) in _CALL_KEYS and isinstance(value.get("name"), str):
        return {**draft, "content": None, "tool_calls": [parse_tool_call(value, where)]}
    if tagged:
        if value is not NOT_JSON:
            raise Rejection("malformed_tool_call", f"{where}: the JSON after {PYTHON_TAG} is not one "
                            '{"name", "parameters"} call')
        raise Rejection("non_text_content", f"{where}: a built-in tool call after {PYTHON_TAG} "
                        f"({quoted(body.strip(), 60)}), which Beam's template cannot render")
    return draft


def _check_tokens(content: str, where: str, template: Template, role: str) -> None:
    """A ``<|...|>`` control token inside a turn's text is refused (see the module's rules)."""
    if "<|" not in content:
        return
    lead = len(content) - len(content.lstrip())
    for m in _CONTROL.finditer(content):
        token = m.group()
        if token in HARMONY_MARKERS:
            continue  # validate.py names these wherever they are (harmony_marker_in_text)
        if token == PYTHON_TAG and template is LLAMA3 and role == "assistant" and m.start() == lead:
            continue  # Llama 3.1's tool-call prefix, read by _assistant
        at = f"{where} holds {token} at character {m.start()} of its text"
        if token in EOS:
            raise Rejection("separator_in_text", f"{at}: an end-of-text token inside a turn")
        if _MEDIA.search(token):
            raise Rejection("non_text_content", f"{at}: a media placeholder, and Beam reads text only")
        other = next((t for t in TEMPLATES if t is not template and token in t.markers), None)
        if other is not None:
            raise Rejection("malformed_row", f"{at}: a {other.name} marker in a {template.name} transcript "
                            "(the templates are mixed)")
        raise Rejection("malformed_row", f"{at}: a control token of the chat template, not text")


def _outside(text: str, pos: int, template: Template) -> Rejection:
    end = text.find(template.start, pos)
    stray = text[pos: end if end >= 0 else len(text)].rstrip()
    other = next((t for t in TEMPLATES if t is not template and any(m in stray for m in t.markers)), None)
    if other is not None:
        return Rejection("malformed_row", f"transcript character {pos}: {quoted(stray, 60)} holds a {other.name} "
                         f"marker in a {template.name} transcript (the templates are mixed)")
    return Rejection("malformed_row", f"transcript character {pos}: text outside any turn {quoted(stray, 60)}")


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _prefix(text: str, pos: int, options: tuple[str, ...]) -> str | None:
    return next((o for o in options if text.startswith(o, pos)), None)


def _first(text: str, pos: int, needles: tuple[str, ...], stop: int) -> tuple[int, str]:
    """``(index, needle)`` of the first of ``needles`` in ``text[pos:stop]``; ``(-1, "")`` when none is."""
    found = [(at, n) for n in needles if (at := text.find(n, pos, stop)) >= 0]
    return min(found) if found else (-1, "")
