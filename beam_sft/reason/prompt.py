"""The teacher's prompt: a versioned text file, and the request one turn becomes.

The file holds three placeholders, ``{{tools}}``, ``{{conversation}}`` and ``{{turn}}``, replaced
literally (no ``str.format``: the conversation's own braces stay as they are). Its digest is part
of every cache key and of every filled turn's provenance, so editing the prompt asks again.

>>> p = Prompt.from_text("T {{tools}} C {{conversation}} N {{turn}}")
>>> msgs = p.messages([{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}], 1, None)
>>> msgs[0]["content"]
'T (none) C [user]\\n2+2? N [assistant answer]\\n4'
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from beam_sft.errors import BeamError

DEFAULT_PROMPT = "v1.txt"
PLACEHOLDERS = ("{{tools}}", "{{conversation}}", "{{turn}}")


@dataclass(frozen=True)
class Prompt:
    text: str
    name: str = DEFAULT_PROMPT

    @classmethod
    def from_text(cls, text: str, name: str = "<text>") -> Prompt:
        missing = [p for p in PLACEHOLDERS if p not in text]
        if missing:
            raise BeamError(f"prompt {name}: no {', '.join(missing)} placeholder")
        return cls(text, name)

    @classmethod
    def load(cls, path: str | Path | None = None) -> Prompt:
        """The package's default prompt, or the file at ``path``."""
        if path is None:
            return cls.from_text(resources.files("beam_sft.reason").joinpath("prompts", DEFAULT_PROMPT)
                                 .read_text(encoding="utf-8"), f"beam_sft/reason/prompts/{DEFAULT_PROMPT}")
        try:
            return cls.from_text(Path(path).read_text(encoding="utf-8"), str(path))
        except (OSError, UnicodeDecodeError) as exc:
            raise BeamError(f"prompt {path}: cannot be read ({exc})") from None

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:16]

    def messages(self, messages: list[dict], turn: int, tools: list | None) -> list[dict]:
        """The chat request for ``messages[turn]``: one user message, the prompt filled in."""
        text = self.text
        for key, value in (("{{tools}}", render_tools(tools)),
                           ("{{conversation}}", render_conversation(messages[:turn])),
                           ("{{turn}}", render_turn(messages[turn]))):
            text = text.replace(key, value)
        return [{"role": "user", "content": text}]


def render_tools(tools: list | None) -> str:
    if not tools:
        return "(none)"
    return "\n".join(json.dumps(t, ensure_ascii=False, sort_keys=True) for t in tools)


def _calls(message: dict) -> str:
    lines = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        lines.append(f"{fn.get('name')}({json.dumps(fn.get('arguments'), ensure_ascii=False, sort_keys=True)})")
    return "\n".join(lines)


def render_turn(message: dict) -> str:
    if message.get("tool_calls"):
        return f"[assistant tool calls]\n{_calls(message)}"
    return f"[assistant answer]\n{message.get('content') or ''}"


def render_conversation(messages: list[dict]) -> str:
    """The context as plain text. Earlier reasoning is left out: the teacher sees what was said."""
    parts = []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            parts.append(render_turn(m))
        elif role == "tool":
            parts.append(f"[tool result {m.get('name') or m.get('tool_call_id') or ''}]\n{m.get('content') or ''}")
        else:
            parts.append(f"[{role}]\n{m.get('content') or ''}")
    return "\n\n".join(parts) if parts else "(empty)"
