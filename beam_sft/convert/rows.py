"""The converters' two outcomes: a canonical ``BeamRow`` dict, or a ``Rejection`` with a reason code.

Every input row ends as exactly one of the two. A rejection carries the raw row, its source and
row index, a stable reason code and a human message; ``rejects.jsonl`` stores exactly that.

Reason codes (stable strings; ``REASON_CODES`` below is the machine-readable copy)
---------------------------------------------------------------------------------

====================================  ====================================================================
code                                  meaning
====================================  ====================================================================
*reading the source*
``invalid_json``                      a record, or a JSON-encoded field in it (``arguments``, ``tools``,
                                      a ShareGPT ``function_call`` value), is not valid JSON
``malformed_row``                     the row does not have the shape of its format (no message list, a
                                      message that is not an object, a field of the wrong type, ...)
``ambiguous_conversation``            a nested record holds several conversations that are not prefixes
                                      of one another (ToolBench ``train_messages``)
``unknown_role``                      a role (or ShareGPT ``from``) the converter does not know
``non_text_part``                     a content part that is not text (image, audio, video, ...)
``conflicting_reasoning``             two reasoning carriers on one turn disagree
``interleaved_reasoning``             reasoning that is not one block before the answer / the calls
``unclosed_reasoning_tag``            ``<think>`` (or ``<reasoning>``) without its closing tag
``malformed_tool_call``               a tool call without a usable name, a non-function call, or a
                                      ``<tool_call>`` / Qwen3 XML body that cannot be read
``conflicting_tool_calls``            ``tool_calls``, ``function_call`` and ``function_calls`` disagree
``tool_response_mixed``               a message mixes ``<tool_response>`` blocks with other text
``bad_tool_definition``               a declared tool that is not a named function (or is declared twice)
``bad_weight``                        a loss flag (``weight``/``loss``/``train``) that is not 0/1 or
                                      flags that contradict each other
``content_with_tool_calls``           text beside tool calls while ``tool_call_content='reject'`` (the
                                      template would drop it silently)
``harmony_malformed``                 a Harmony transcript that cannot be read back into messages
*Beam rules (validate.py)*
``system_not_leading``                a system/developer message after another role (never rendered)
``tool_result_unmatched``             a tool result with no call waiting for it, or naming another call
``tool_result_order``                 tool results present but not in the order of their calls
``tool_call_unanswered``              the conversation goes on before every call of a turn has a result
``arguments_not_object``              tool-call arguments that are not a JSON object
``bad_argument_name``                 an argument name that cannot be an XML attribute value
``param_delimiter_in_argument``       an argument value (at any depth) containing ``</rfl:parameter>``
``bad_tool_name``                     an empty tool name, or one with whitespace or ``<``
``harmony_marker_in_text``            a Harmony marker inside any text: it would become a control token
``bad_reasoning_effort``              ``reasoning_effort`` that is neither an int nor one of the 6 labels
``bad_template_kwargs``               another ``chat_template_kwargs`` value of the wrong type
``undeclared_tool``                   a call to a tool the row does not declare (``require_declared_tools``)
``empty_assistant``                   an assistant turn with neither an answer nor a tool call
``missing_reasoning``                 a trained assistant turn without reasoning
``no_trained_turn``                   no assistant turn is left in the loss
*pipeline*
``converter_error``                   a converter raised (a bug: the row is kept in rejects, the run goes on)
====================================  ====================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from beam_sft.errors import RowError

# A canonical row: {"messages": [...], "tools"?: [...], "chat_template_kwargs"?: {...}, "meta": {...}}.
# Plain dicts keep rows JSON-able and cheap to pass through datasets.map.
BeamRow = dict[str, Any]

REASON_CODES: dict[str, str] = {
    "invalid_json": "a record or a JSON-encoded field is not valid JSON",
    "malformed_row": "the row does not have the shape of its format",
    "ambiguous_conversation": "a nested record holds several conversations that are not prefixes of one another",
    "unknown_role": "a role the converter does not know",
    "non_text_part": "a content part that is not text",
    "conflicting_reasoning": "two reasoning carriers on one turn disagree",
    "interleaved_reasoning": "reasoning that is not one block before the answer or the calls",
    "unclosed_reasoning_tag": "a reasoning tag without its closing tag",
    "malformed_tool_call": "a tool call that cannot be read",
    "conflicting_tool_calls": "tool_calls, function_call and function_calls disagree",
    "tool_response_mixed": "a message mixes <tool_response> blocks with other text",
    "bad_tool_definition": "a declared tool that is not a named function, or is declared twice",
    "bad_weight": "a loss flag that is not 0/1, or flags that contradict each other",
    "content_with_tool_calls": "text beside tool calls (the template would drop it)",
    "harmony_malformed": "a Harmony transcript that cannot be read back",
    "system_not_leading": "a system/developer message after another role",
    "tool_result_unmatched": "a tool result with no call waiting for it",
    "tool_result_order": "tool results not in the order of their calls",
    "tool_call_unanswered": "the conversation goes on before every call has a result",
    "arguments_not_object": "tool-call arguments that are not a JSON object",
    "bad_argument_name": "an argument name that cannot be an XML attribute value",
    "param_delimiter_in_argument": "an argument value containing </rfl:parameter>",
    "bad_tool_name": "an empty tool name, or one with whitespace or '<'",
    "harmony_marker_in_text": "a Harmony marker inside text",
    "bad_reasoning_effort": "reasoning_effort is neither an int nor one of the six labels",
    "bad_template_kwargs": "a chat_template_kwargs value of the wrong type",
    "undeclared_tool": "a call to a tool the row does not declare",
    "empty_assistant": "an assistant turn with neither an answer nor a tool call",
    "missing_reasoning": "a trained assistant turn without reasoning",
    "no_trained_turn": "no assistant turn is left in the loss",
    "converter_error": "a converter raised (bug); the row is kept in rejects",
}


@dataclass(frozen=True)
class Rejection:
    """Why a row was not converted. Converters fill ``code``/``message``; the pipeline adds the rest.

    >>> r = Rejection("missing_reasoning", "messages[2] has no reasoning")
    >>> r.at(source="a.jsonl", row=3, raw={"x": 1}).to_json()["row"]
    3
    >>> Rejection("no_such_code", "x")
    Traceback (most recent call last):
    ...
    ValueError: unknown reason code 'no_such_code'
    """

    code: str
    message: str
    raw: Any = None
    source: str | None = None
    row: int | None = None

    def __post_init__(self) -> None:
        if self.code not in REASON_CODES:
            raise ValueError(f"unknown reason code {self.code!r}")

    def at(self, *, source: str | None, row: int | None, raw: Any) -> Rejection:
        return replace(self, source=source, row=row, raw=raw)

    def to_json(self) -> dict[str, Any]:
        """The rejects.jsonl record: source, row index, reason code, message and the raw row."""
        return {
            "source": self.source,
            "row": self.row,
            "code": self.code,
            "message": self.message,
            "raw": self.raw,
        }

    def to_error(self) -> RowError:
        return RowError(self.code, self.message, source=self.source, row=self.row)


class Reject(Exception):
    """Raised inside a converter to abandon the row; converters catch it and return its Rejection.

    Internal only: no converter lets it (or anything else) escape.
    """

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.rejection = Rejection(code, message)


def is_rejection(value: Any) -> bool:
    return isinstance(value, Rejection)
