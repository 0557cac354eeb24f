"""``inspect`` in the terminal: one line per message, trained tokens highlighted, context dimmed.

Everything drawn from the row (token text, labels, source, provenance, violation messages) goes
through ``visible`` before our own colour codes are added: the only escape sequences written are ours."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from beam_sft.verify.context import RowContext, Violation
from beam_sft.verify.spans import Message
from beam_sft.visible import heads_marked_off, marked_off, visible

RESET = "\x1b[0m"
TRAINED = "\x1b[1;30;102m"  # bold black on bright green
CONTEXT = "\x1b[2m"  # dim
LABEL_COLORS = {"assistant": "\x1b[1;36m", "tool": "\x1b[1;35m", "unknown": "\x1b[1;31m"}
DEFAULT_LABEL_COLOR = "\x1b[1;33m"
# Without colour, trained text is bracketed instead.
PLAIN_OPEN, PLAIN_CLOSE = "⟪", "⟫"
# How the plain view's own lines after the header begin: a message's ``[label]``, the ``violations:``
# section (its ``  [rule]`` lines follow that). A row's line beginning so is escaped (``\u005b``): in
# the plain view only its place tells it from ours, where colour tells it in the other.
PLAIN_HEADS = ("[", "violations:")


@dataclass(frozen=True)
class Segment:
    """A message, or a run of tokens outside any message, as ``[start, end)``."""

    start: int
    end: int
    label: str
    role: str


def segments(ctx: RowContext) -> Iterator[Segment]:
    """Messages in order, with the tokens between them (if any) as ``[?]`` segments."""
    at = 0
    for message in ctx.messages:
        if message.start > at:
            yield Segment(at, message.start, "?", "unknown")
        yield _message_segment(message)
        at = message.end + 1
    if at < len(ctx.ids):
        yield Segment(at, len(ctx.ids), "?", "unknown")


def _message_segment(message: Message) -> Segment:
    return Segment(message.start, message.end + 1, message.label, message.role)


def runs(mask: list[int], start: int, end: int) -> Iterator[tuple[int, int, bool]]:
    """``(start, end, trained)`` runs of equal mask values inside ``[start, end)``.

    >>> list(runs([0, 1, 1, 0], 0, 4))
    [(0, 1, False), (1, 3, True), (3, 4, False)]
    """
    i = start
    while i < end:
        j = i
        while j < end and bool(mask[j]) == bool(mask[i]):
            j += 1
        yield i, j, bool(mask[i])
        i = j


def provenance_lines(row) -> list[str]:
    """Where each trained turn's reasoning came from, as the row's ``meta.reasoning`` records it
    (``beam-sft reason``); nothing for a row that records none.

    >>> provenance_lines({"meta": {"reasoning": [{"turn": 1, "source": "teacher", "model": "m",
    ...     "endpoint_host": "h:8000", "prompt_digest": "sha256:ab"}, {"turn": 3, "source": "data"},
    ...     {"turn": 5, "source": "none", "rejected": "teacher_empty"}]}})
    ['reasoning: turn 1 teacher (m @ h:8000, prompt sha256:ab)', 'reasoning: turn 3 data', 'reasoning: turn 5 none (teacher refused: teacher_empty)']
    """
    entries = ((row or {}).get("meta") or {}).get("reasoning") if isinstance(row, dict) else None
    lines = []
    for e in entries if isinstance(entries, list) else []:
        if not isinstance(e, dict):
            continue
        text = f"reasoning: turn {e.get('turn')} {e.get('source')}"
        if e.get("rejected"):
            text += f" (teacher refused: {e['rejected']})"
        elif e.get("source") == "teacher":
            text += f" ({e.get('model')} @ {e.get('endpoint_host')}, prompt {e.get('prompt_digest')})"
        judge = e.get("judge")
        if isinstance(judge, dict):
            text += f"; judge {judge.get('model')}: {judge.get('verdict') or 'no verdict'}"
        lines.append(text)
    return lines


def _paint(text: str, code: str) -> str:
    # Codes are re-opened on every line so a terminal that resets at newlines keeps them.
    return "\n".join(f"{code}{line}{RESET}" if line else line for line in text.split("\n"))


def render_terminal(ctx: RowContext, texts: list[str], *, color: bool = True,
                    violations: Sequence[Violation] = ()) -> str:
    """The row as text: a header, ``[label] message text`` for every message, then the row's violations."""
    mask = ctx.mask if len(ctx.mask) == len(ctx.ids) else [0] * len(ctx.ids)
    trained = sum(1 for m in mask if m)
    share = 100 * trained / len(ctx.ids) if len(ctx.ids) else 0.0
    lines = [visible(f"row {ctx.position}  source {ctx.source}  row_index {ctx.row_index}  "
                     f"tokens {len(ctx.ids)}  trained {trained} ({share:.1f}%)", newlines=False)]
    lines.extend(visible(line, newlines=False) for line in provenance_lines(ctx.row))
    if color:
        lines.append(f"legend: {TRAINED}trained{RESET} {CONTEXT}context{RESET}")
    else:
        lines.append(f"legend: {PLAIN_OPEN}trained{PLAIN_CLOSE} context")
    for segment in segments(ctx):
        label = visible(f"[{segment.label}]", newlines=False)
        if color:
            label = f"{LABEL_COLORS.get(segment.role, DEFAULT_LABEL_COLOR)}{label}{RESET}"
        pieces = []
        for a, b, is_trained in runs(mask, segment.start, segment.end):
            text = visible("".join(texts[a:b]))  # (its newlines are the row's line breaks)
            if color:
                pieces.append(_paint(text, TRAINED if is_trained else CONTEXT))
            else:  # (a bracket of the row's own is escaped: only ours say what is trained; so is a
                # line of its own that begins as ours do: only ours begin a message)
                text = heads_marked_off(marked_off(text, PLAIN_OPEN + PLAIN_CLOSE), PLAIN_HEADS)
                pieces.append(f"{PLAIN_OPEN}{text}{PLAIN_CLOSE}" if is_trained else text)
        lines.append(f"{label} {''.join(pieces)}")
    lines.append("")
    lines.append(f"violations: {len(violations)}" if violations else "violations: none")
    lines.extend(visible(f"  [{v.rule}] {v.message}", newlines=False) for v in violations)
    return "\n".join(lines) + "\n"
