"""``--judge``: a model asked whether a turn's reasoning leads to exactly that turn, and its verdict.

The request is the versioned prompt ``prompts/judge_v1.txt`` filled (as the teacher's prompt is, in
one pass, row text quoted) with the tools, the conversation, the turn and the reasoning to check.
The verdict format is strict, so that nothing is read into a reply: the first line is exactly
``VERDICT: yes`` or ``VERDICT: no`` (trailing spaces aside), then a reason on the lines after it.
Anything else (a preamble, ``Verdict: Yes``, ``VERDICT: yes.``, no reason, a second ``VERDICT:``
line, a cut-off reply) is ``judge_failed``; a ``no`` is ``teacher_inconsistent``. The judge's
answers go through the same client (budget included) and the same answer cache as the teacher's.

>>> parse_verdict("VERDICT: no\\nIt argues for get_time.", "stop")
('no', 'It argues for get_time.')
>>> parse_verdict("VERDICT: yes\\nIt leads to the call.", "stop")
('yes', 'It leads to the call.')
>>> parse_verdict("Sure! VERDICT: yes\\nfine", "stop")
Traceback (most recent call last):
...
beam_sft.reason.judge.Unparseable: the first line is not exactly 'VERDICT: yes' or 'VERDICT: no': 'Sure! VERDICT: yes'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from beam_sft.reason.client import TeacherClient
from beam_sft.reason.prompt import PLACEHOLDERS, Prompt, quote, render_conversation, render_tools, render_turn

JUDGE_PROMPT = "judge_v1.txt"
JUDGE_PLACEHOLDERS = (*PLACEHOLDERS, "{{reasoning}}")
VERDICTS = ("yes", "no")
# A second verdict in the reason ("VERDICT: no", "verdict - yes"): not a word such as "Verdicts aside".
_VERDICT_LINE = re.compile(r"\s*verdict\s*[:=\-]", re.IGNORECASE)
MAX_REASON_CHARS = 500  # of the judge's reason, kept in meta.reasoning (the whole reply stays in the cache)


class Unparseable(ValueError):
    """A judge's reply that is not a verdict in the strict format."""


def parse_verdict(text: str, finish_reason: str | None) -> tuple[str, str]:
    """``(verdict, reason)`` of a judge's reply; ``Unparseable`` with what is wrong otherwise."""
    if finish_reason == "length":
        raise Unparseable(f"the verdict was cut off (finish_reason length, {len(text)} characters)")
    first, _, rest = text.partition("\n")
    first = first.rstrip(" \t\r")
    if first not in ("VERDICT: yes", "VERDICT: no"):
        raise Unparseable(f"the first line is not exactly 'VERDICT: yes' or 'VERDICT: no': {first[:80]!r}")
    reason = rest.strip()
    if not reason:
        raise Unparseable("the verdict gives no reason")
    if any(_VERDICT_LINE.match(line) for line in rest.splitlines()):
        raise Unparseable("the reply holds a second VERDICT line")
    return first.removeprefix("VERDICT: "), reason[:MAX_REASON_CHARS]


@dataclass
class Judge:
    """Who judges and with what: the prompt, the model, where it is served, and its client (``None``:
    read the cache only, as prepare's encode workers do)."""

    prompt: Prompt
    model: str
    endpoint_host: str
    client: TeacherClient | None = None
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load_prompt(cls, path: str | None) -> Prompt:
        return Prompt.load(path, default=JUDGE_PROMPT, placeholders=JUDGE_PLACEHOLDERS)

    def messages(self, messages: list[dict], turn: int, tools: list | None, reasoning: str) -> list[dict]:
        """The judge's request for ``messages[turn]`` and the reasoning written for it."""
        return [{"role": "user", "content": self.prompt.fill({
            "{{tools}}": render_tools(tools), "{{conversation}}": render_conversation(messages[:turn]),
            "{{turn}}": render_turn(messages[turn]), "{{reasoning}}": quote(reasoning)})}]
