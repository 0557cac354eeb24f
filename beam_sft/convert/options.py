"""Typed conversion options: one frozen dataclass, unknown keys fail with their full path.

>>> from beam_sft.config_utils import from_dict
>>> from_dict(ConvertOptions, {"missing_reasoning": "unmask", "columns": {"conversations": "dialog"}}).columns.conversations
'dialog'
>>> from_dict(ConvertOptions, {"columns": {"convo": "x"}}, "sources[0].convert")
Traceback (most recent call last):
...
beam_sft.errors.ConfigError: sources[0].convert.columns.convo: unknown key (known: content_key, conversations, messages, role_key, system, text, tools)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

FORMATS: tuple[str, ...] = ("openai", "sharegpt", "hermes", "harmony")
MissingReasoning = Literal["drop", "truncate", "unmask"]


@dataclass(frozen=True)
class ColumnMap:
    """Column names for datasets that do not use the standard ones."""

    messages: str = "messages"  # OpenAI-style message list
    conversations: str = "conversations"  # ShareGPT list (or role/content hybrids)
    tools: str = "tools"  # list, or a JSON string of a list
    system: str = "system"  # ShareGPT system prompt column
    text: str = "text"  # a transcript (Harmony, or a Hermes SYSTEM:/USER:/ASSISTANT: string)
    role_key: str = "from"  # ShareGPT speaker key
    content_key: str = "value"  # ShareGPT text key


@dataclass(frozen=True)
class ConvertOptions:
    """How raw rows become BeamRows. Defaults are the strict, documented behaviour.

    - ``missing_reasoning``: a trained assistant turn without reasoning. ``drop`` rejects the row,
      ``truncate`` keeps the conversation up to the last reasoned assistant turn before the first
      such turn, ``unmask`` keeps such turns as context with weight 0.
    - ``tool_call_content``: text beside tool calls. The template renders no answer on a call turn,
      so ``reasoning`` appends it to the turn's reasoning (Beam writes no preambles: its analysis
      channel carries everything said before a call); ``reject`` rejects the row.
    - ``require_declared_tools``: a call to a tool the row does not declare is rejected.
    - ``strip_answer_tags``: an answer that is one ``<answer>...</answer>`` block loses the tags.
    - ``system_tools``: a ``<tools>...</tools>`` block in a leading system prompt becomes the row's
      tools (and leaves the prompt, with the Qwen/Hermes boilerplate around it).
    - ``detect_rows``: how many leading records ``--format auto`` looks at.
    """

    missing_reasoning: MissingReasoning = "drop"
    tool_call_content: Literal["reasoning", "reject"] = "reasoning"
    require_declared_tools: bool = True
    strip_answer_tags: bool = True
    system_tools: bool = True
    detect_rows: int = 32
    columns: ColumnMap = field(default_factory=ColumnMap)
