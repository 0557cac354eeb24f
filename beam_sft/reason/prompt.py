"""The teacher's prompt: a versioned text file, and the request one turn becomes.

The file holds three placeholders, ``{{tools}}``, ``{{conversation}}`` and ``{{turn}}``, replaced
literally (no ``str.format``: the conversation's own braces stay as they are). Its digest is part
of every cache key and of every filled turn's provenance, so editing the prompt asks again.

Row text is data, never prompt: the placeholders are found in the template once, in one pass, and
what is put in their place is not searched again (a ``{{turn}}`` in a user's message stays as it
is, and a row cannot grow its request by naming placeholders). Every line the row supplies is
quoted with ``> ``, so a line of row text can never read as one of the prompt's section headers
(``=== ... ===``) or as a role label (``[user]``) the rendering writes: every unquoted line of a
request comes from the template or the renderer.

>>> p = Prompt.from_text("T {{tools}} C {{conversation}} N {{turn}}")
>>> msgs = p.messages([{"role": "user", "content": "2+2? {{turn}}"}, {"role": "assistant", "content": "4"}], 1, None)
>>> msgs[0]["content"]
'T (none) C [user]\\n> 2+2? {{turn}} N [assistant answer]\\n> 4'
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from beam_sft.errors import BeamError

DEFAULT_PROMPT = "v1.txt"
PLACEHOLDERS = ("{{tools}}", "{{conversation}}", "{{turn}}")
_ROLES = ("system", "developer", "user")  # labels written as they are; any other role is row text, quoted


@dataclass(frozen=True)
class Prompt:
    text: str
    name: str = DEFAULT_PROMPT

    placeholders: tuple[str, ...] = PLACEHOLDERS

    @classmethod
    def from_text(cls, text: str, name: str = "<text>", placeholders: tuple[str, ...] = PLACEHOLDERS) -> Prompt:
        missing = [p for p in placeholders if p not in text]
        if missing:
            raise BeamError(f"prompt {name}: no {', '.join(missing)} placeholder")
        return cls(text, name, placeholders)

    @classmethod
    def load(cls, path: str | Path | None = None, *, default: str = DEFAULT_PROMPT,
             placeholders: tuple[str, ...] = PLACEHOLDERS) -> Prompt:
        """The package's prompt ``default``, or the file at ``path``."""
        if path is None:
            return cls.from_text(resources.files("beam_sft.reason").joinpath("prompts", default)
                                 .read_text(encoding="utf-8"), f"beam_sft/reason/prompts/{default}", placeholders)
        try:
            return cls.from_text(Path(path).read_text(encoding="utf-8"), str(path), placeholders)
        except (OSError, UnicodeDecodeError) as exc:
            raise BeamError(f"prompt {path}: cannot be read ({exc})") from None

    def fill(self, values: dict[str, str]) -> str:
        """The template with each placeholder replaced by its value, in one pass over the template:
        a value is never searched for placeholders (it is row data).

        >>> Prompt.from_text("{{a}}|{{b}}", placeholders=("{{a}}", "{{b}}")).fill({"{{a}}": "{{b}}", "{{b}}": "x"})
        '{{b}}|x'
        """
        pattern = "|".join(re.escape(p) for p in self.placeholders)
        return re.sub(pattern, lambda m: values[m.group(0)], self.text)

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:16]

    def messages(self, messages: list[dict], turn: int, tools: list | None) -> list[dict]:
        """The chat request for ``messages[turn]``: one user message, the prompt filled in."""
        return [{"role": "user", "content": self.fill({
            "{{tools}}": render_tools(tools), "{{conversation}}": render_conversation(messages[:turn]),
            "{{turn}}": render_turn(messages[turn])})}]


def quote(text) -> str:
    """Row text as a quoted block: every line (as ``str.splitlines`` splits, so a ``\\r`` or a
    ``\\u2028`` starts a line too) begins with ``> ``.

    >>> quote("a\\n=== Tools ===\\rb")
    '> a\\n> === Tools ===\\n> b'
    """
    if not isinstance(text, str):  # a shape no converter gives; shown as data all the same
        text = json.dumps(text, ensure_ascii=False, sort_keys=True, default=str)
    return "\n".join("> " + line for line in (text.splitlines() or [""]))


def render_tools(tools: list | None) -> str:
    if not tools:
        return "(none)"
    return quote("\n".join(json.dumps(t, ensure_ascii=False, sort_keys=True) for t in tools))


def _calls(message: dict) -> str:
    lines = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        lines.append(f"{fn.get('name')}({json.dumps(fn.get('arguments'), ensure_ascii=False, sort_keys=True)})")
    return quote("\n".join(lines))


def render_turn(message: dict) -> str:
    if message.get("tool_calls"):
        return f"[assistant tool calls]\n{_calls(message)}"
    return f"[assistant answer]\n{quote(message.get('content') or '')}"


def render_conversation(messages: list[dict]) -> str:
    """The context as plain text. Earlier reasoning is left out: the teacher sees what was said."""
    parts = []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            parts.append(render_turn(m))
        elif role == "tool":  # the tool's name is row text too: one line, in JSON quotes (ASCII: no U+2028)
            label = m.get("name") or m.get("tool_call_id") or ""
            parts.append(f"[tool result {json.dumps(str(label))}]\n{quote(m.get('content') or '')}")
        else:
            parts.append(f"[{json.dumps(str(role)) if role not in _ROLES else role}]\n"
                         f"{quote(m.get('content') or '')}")
    return "\n\n".join(parts) if parts else "(empty)"
