"""Typed conversion options: one frozen dataclass, unknown keys fail with their full path.

>>> from beam_sft.config_utils import from_dict
>>> from_dict(ConvertOptions, {"missing_reasoning": "unmask", "columns": {"conversations": "dialog"}}).columns.conversations
'dialog'
>>> from_dict(ConvertOptions, {"columns": {"convo": "x"}}, "sources[0].convert")
Traceback (most recent call last):
...
beam_sft.errors.ConfigError: sources[0].convert.columns.convo: unknown key (known: answer, content_key, conversations, history, input, messages, prompt, reasoning, role_key, system, text, tools)
"""

from __future__ import annotations

import sys
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from beam_sft.convert.formats import FORMAT_NAMES
from beam_sft.errors import ConfigError

FORMATS: tuple[str, ...] = FORMAT_NAMES  # the names of convert/formats.py's table, in its order
FORMAT_CHOICES: tuple[str, ...] = ("auto", *FORMATS)  # --format of convert and prepare; auto: per row
MissingReasoning = Literal["drop", "truncate", "unmask"]
ToolCallContent = Literal["reasoning", "reject"]
TextAfterToolCall = Literal["reject", "drop"]


def choices(tp) -> tuple[str, ...]:
    """The values of a ``Literal`` option type, for command-line ``choices``.

    >>> choices(MissingReasoning)
    ('drop', 'truncate', 'unmask')
    """
    return typing.get_args(tp)


@dataclass(frozen=True)
class ColumnMap:
    """Column names for datasets that do not use the standard ones."""

    messages: str = "messages"  # OpenAI-style message list
    conversations: str = "conversations"  # ShareGPT list (or role/content hybrids)
    tools: str = "tools"  # list, or a JSON string of a list
    system: str = "system"  # ShareGPT system prompt column
    text: str = "text"  # a transcript (Harmony; Hermes SYSTEM:/USER: lines, ChatML or Llama 3: hermes.py)
    role_key: str = "from"  # ShareGPT speaker key
    content_key: str = "value"  # ShareGPT text key
    # Flat rows (convert/flat.py): Alpaca by default; prompt=Question answer=Response
    # reasoning=Complex_CoT reads a single-turn CoT set the same way.
    prompt: str = "instruction"  # the user's turn
    input: str = "input"  # Alpaca's optional input, appended to the prompt after a blank line
    answer: str = "output"  # the assistant's answer
    reasoning: str = "reasoning"  # the assistant's reasoning, when the set has it
    history: str = "history"  # earlier [prompt, answer] pairs


@dataclass(frozen=True)
class ConvertOptions:
    """How raw rows become BeamRows. Defaults are the strict, documented behaviour.

    - ``missing_reasoning``: a trained assistant turn without reasoning. ``drop`` rejects the row,
      ``truncate`` keeps the conversation up to the last reasoned assistant turn before the first
      such turn, ``unmask`` keeps such turns as context with weight 0.
    - ``tool_call_content``: text beside tool calls. The template renders no answer on a call turn,
      so ``reasoning`` appends it to the turn's reasoning (Beam writes no preambles: its analysis
      channel carries everything said before a call); ``reject`` rejects the row.
    - ``text_after_tool_call``: text after a turn's first tool call (Hermes ``<tool_call>`` blocks,
      ``tool_call`` parts). It cannot be rendered where it was said, and moving it before the call
      would teach the model to claim a result before calling the tool: ``reject`` (default,
      ``text_after_tool_call``) or ``drop`` it (counted in the summary's notes).
    - ``require_declared_tools``: a call to a tool the row does not declare is rejected.
    - ``strip_answer_tags``: an answer that is one ``<answer>...</answer>`` block loses the tags.
    - ``system_tools``: a ``<tools>...</tools>`` block in a leading system prompt becomes the row's
      tools (and leaves the prompt, with the Qwen/Hermes boilerplate around it); so does Llama 3.1's
      template's function block in a leading system prompt or the first user turn.
    - ``detect_rows``: how many leading records ``--format auto`` looks at to name the file's
      main format (each row is still read by the format its own shape shows).
    - ``max_row_chars``: a record longer than this many characters as compact JSON is rejected
      (``row_too_large``, naming the row) before it is converted, validated or encoded, so one
      huge row costs one ``json.dumps``, not minutes of validation; ``None`` turns it off.
    - ``forbidden_tokens``: strings that must not appear in any text field (messages, reasoning,
      tool names, descriptions, schemas, arguments at any depth, template kwargs): the tokenizer's
      added and special tokens other than the Harmony markers (``forbidden_tokens(tokenizer)``
      in validate.py), rejected as ``special_token_in_text``.
    - ``pythonic_tool_calls``: an assistant text ending in a Python list of calls,
      ``[name(arg=value, ...)]`` (ToolACE style), becomes those calls (convert/pythonic.py: parsed,
      never evaluated; anything else stays text). Off by default: a list in prose is prose.
    - ``infer_tools``: a row that calls tools it does not declare gets declarations made from the
      calls to those tools seen in the same source (convert/infer_tools.py: names, argument names,
      JSON types, required = present in every call), marked in ``meta.inferred_tools`` and counted in
      the summary's notes. Off: ``undeclared_tool`` (with ``require_declared_tools``).
      ``inferred_tools`` holds the declarations as JSON texts; the source's first pass fills it in.
    - ``reasoning_origins``: converters note in ``meta.reasoning_origins`` which turns took their
      reasoning from inline tags or from text before tool calls (not a field). ``convert_row`` sets
      it when a fill runs (``beam_sft.reason``'s provenance); off, the converters' output is unchanged.
    - ``message_places``: converters note in ``meta.places`` the source entry each message was read
      from (``conversations[3]``), so that validate.py's rejections name it; ``convert_row`` sets it
      and takes the list off again (it is never written). Off, the converters' output is unchanged.
    """

    missing_reasoning: MissingReasoning = "drop"
    tool_call_content: ToolCallContent = "reasoning"
    text_after_tool_call: TextAfterToolCall = "reject"
    require_declared_tools: bool = True
    strip_answer_tags: bool = True
    system_tools: bool = True
    detect_rows: int = 32
    columns: ColumnMap = field(default_factory=ColumnMap)
    forbidden_tokens: tuple[str, ...] = ()
    reasoning_origins: bool = False
    message_places: bool = False
    pythonic_tool_calls: bool = False
    infer_tools: bool = False
    inferred_tools: tuple[str, ...] = ()  # JSON texts of declarations, set by the source's first pass
    max_row_chars: int | None = 4 * 1024 * 1024  # about 1M tokens: past any trained context

    def __post_init__(self) -> None:

        if self.detect_rows < 1:
            raise ConfigError("detect_rows", "must be at least 1")
        if self.max_row_chars is not None and (isinstance(self.max_row_chars, bool) or self.max_row_chars < 1):
            raise ConfigError("max_row_chars", "must be a positive number of characters (or null: no bound)")
        if any(not isinstance(t, str) or not t for t in self.forbidden_tokens):
            raise ConfigError("forbidden_tokens", "must be non-empty strings")
        if any(not isinstance(t, str) for t in self.inferred_tools):
            raise ConfigError("inferred_tools", "must be JSON texts of tool declarations")


COLUMN_MAP_DEPRECATED = "column_map"


def options_from_dict(data: dict[str, Any] | None, path: str = "convert") -> ConvertOptions:
    """ConvertOptions from a mapping. The column mapping is ``columns``; the older name
    ``column_map`` is still read (merged under ``columns``) with a deprecation message on stderr.

    >>> options_from_dict({"columns": {"messages": "dialog"}}).columns.messages
    'dialog'
    """
    from beam_sft.config_utils import from_dict

    data = dict(data or {})
    if COLUMN_MAP_DEPRECATED in data:
        old = data.pop(COLUMN_MAP_DEPRECATED) or {}
        print(f"beam-sft: {path}.column_map is deprecated: write {path}.columns", file=sys.stderr)
        if isinstance(old, dict):
            data["columns"] = {**old, **(data.get("columns") or {})}
    try:
        return from_dict(ConvertOptions, data, path)
    except ConfigError as exc:  # a value check of __post_init__ knows only its own key
        if not path or exc.path.startswith(path):
            raise
        raise ConfigError(f"{path}.{exc.path}", str(exc)[len(exc.path) + 2 :]) from None
