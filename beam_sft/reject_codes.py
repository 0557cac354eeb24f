"""The one table of reason codes: every code a row can be rejected or flagged with, in every stage.

A code is a stable string written to ``rejects.jsonl``, ``report.json`` and
``verify_violations.jsonl``. ``Rejection`` (beam_sft.errors) refuses a code that is not here, and a
test checks that every code the package emits is here and that the README's list is this table.

Stages: ``read`` (a record cannot be read), ``convert`` (a source format cannot be placed in a
BeamRow), ``validate`` (a BeamRow breaks a Beam rule), ``pipeline`` (conversion itself failed),
``reason`` (a teacher's reasoning for a turn without it, refused: ``beam-sft reason``; the turn then
falls back to the missing-reasoning policy), ``encode`` (rendering, weights, length), ``verify`` (a
mask invariant of a prepared row).

    python -m beam_sft.reject_codes --markdown     # the README section

>>> REASONS["too_long"].stages
('encode', 'verify')
>>> "missing_reasoning" in REASON_CODES
True
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Reason:
    code: str
    stages: tuple[str, ...]  # where the code is given; most codes have one stage
    meaning: str

    @property
    def stage(self) -> str:
        return ", ".join(self.stages)


STAGES: tuple[str, ...] = ("read", "convert", "validate", "pipeline", "reason", "encode", "verify")

_TABLE: tuple[tuple[str, str, str], ...] = (
    # --- reading the source -------------------------------------------------------------------
    ("invalid_json", "read", "a record, or a JSON-encoded field in it, is not valid JSON"),
    ("unreadable_rest", "read", "a JSON syntax error hides the rest of the file: one rejection for all of it, "
     "from byte N"),
    ("invalid_text", "read", "text that is not valid Unicode (non-UTF-8 bytes, a lone surrogate)"),
    ("non_standard_number", "read", "NaN, Infinity or a number too large for a float (1e400) in a record or in "
     "a JSON string decoded from it (not JSON; the row column could not hold it)"),
    ("duplicate_key", "read", "a JSON object holds a key twice, at any depth (in a record or a JSON string "
     "decoded from it): which value is meant cannot be told"),
    ("row_too_large", "read", "a record longer than max_row_chars characters (as compact JSON): refused "
     "before it is converted or encoded"),
    # --- converting a source format ------------------------------------------------------------
    ("malformed_row", "convert", "the row does not have the shape of its format (no message list, a field "
     "of the wrong type, ...)"),
    ("missing_content", "convert", "a user, system or tool message without content (null, or the key "
     "missing or misspelled)"),
    ("conflicting_carriers", "convert", "a row holds its conversation twice (messages and conversations, a "
     "list of turn pairs beside either, or a conversation beside instruction/output columns): which one is "
     "meant cannot be told"),
    ("ambiguous_conversation", "convert", "a nested record holds several conversations that are not "
     "prefixes of one another"),
    ("unknown_role", "convert", "a role the converters do not know (one alias table for every reader)"),
    ("non_text_content", "convert", "an images/videos/audios column, a media part or placeholder, or an item "
     "the template cannot render (a hosted tool's call, code execution, encrypted reasoning beside readable reasoning): Beam is text only"),
    ("conflicting_reasoning", "convert", "two reasoning carriers on one turn disagree"),
    ("conflicting_template_kwargs", "convert", "a row's reasoning_effort and its chat_template_kwargs.reasoning_effort "
     "disagree"),
    ("interleaved_reasoning", "convert", "reasoning that is not one block before the answer or the calls"),
    ("unclosed_reasoning_tag", "convert", "a reasoning tag without its closing tag"),
    ("reasoning_markup_in_text", "convert", "reasoning markup (<think>, </thinking>, ... in any case and "
     "spacing) left in a text that would be trained"),
    ("malformed_tool_call", "convert", "a tool call that cannot be read"),
    ("tool_call_markup_in_text", "convert", "tool-call markup (<tool_call>, <function=...>) left in "
     "assistant text"),
    ("text_after_tool_call", "convert", "text after the last tool call of a turn (it cannot be moved "
     "before the call)"),
    ("conflicting_tool_calls", "convert", "tool_calls, function_call and function_calls disagree"),
    ("tool_response_mixed", "convert", "a message mixes <tool_response> blocks with other text"),
    ("bad_tool_definition", "convert", "a declared tool that is not a named function, is declared twice, or "
     "has a parameters schema the template cannot read (or nested more than 64 schemas deep)"),
    ("bad_weight", "convert", "a loss flag (weight/loss_weight/loss/train) that is not 0/1, or flags that "
     "disagree"),
    ("content_with_tool_calls", "convert", "text beside tool calls while tool_call_content is 'reject'"),
    ("separator_in_text", "convert", "an end-of-text separator (glaive's <|endoftext|>) inside a turn, not at "
     "its end: where the turn ends cannot be told"),
    ("response_cut_off", "convert", "a logged response that did not finish (finish_reason length, "
     "content_filter, ...): its answer is not whole"),
    ("batch_missing_request", "convert", "a Batch API output line whose custom_id no line of the batch input "
     "holds"),
    ("batch_missing_response", "convert", "a Batch API request that no line of the batch output answers"),
    ("batch_http_error", "convert", "a Batch API output line whose response has a status code other than 200"),
    ("batch_error", "convert", "a Batch API output line with an error object (the request failed), or an "
     "Anthropic Message Batches result errored, canceled or expired"),
    ("batch_duplicate_id", "convert", "a custom_id on more than one line of a batch input or output: which "
     "answer belongs to which request cannot be told"),
    ("harmony_malformed", "convert", "a Harmony transcript that cannot be read back into messages"),
    ("harmony_malformed_turn", "convert", "a Harmony assistant turn the template never writes"),
    ("harmony_malformed_arguments", "convert", "Harmony tool-call arguments the template never writes"),
    ("harmony_response_template_mismatch", "convert", "the response template reads a turn differently from "
     "the strict reader"),
    # --- Beam rules (convert/validate.py) ------------------------------------------------------
    ("system_not_leading", "validate", "a system/developer message after another role (never rendered)"),
    ("tool_result_unmatched", "validate", "a tool result with no call waiting for it, or naming another call"),
    ("tool_result_order", "validate", "tool results not in the order of their calls"),
    ("tool_call_unanswered", "validate", "the conversation goes on before every call has a result"),
    ("arguments_not_object", "validate", "tool-call arguments that are not a JSON object"),
    ("bad_argument_name", "validate", "an argument name that cannot be an XML attribute value"),
    ("param_delimiter_in_argument", "validate", "an argument value (at any depth) containing </rfl:parameter>"),
    ("bad_tool_name", "validate", "an empty tool name, or one with whitespace or '<'"),
    ("harmony_marker_in_text", "validate", "a Harmony marker inside any text: it would become a control token"),
    ("special_token_in_text", "validate", "an added or special token of the tokenizer inside any text field"),
    ("bad_reasoning_effort", "validate", "reasoning_effort that is not an int >= 1 or one of the six labels"),
    ("bad_template_kwargs", "validate", "a chat_template_kwargs value the template does not accept"),
    ("undeclared_tool", "validate", "a call to a tool the row does not declare (require_declared_tools)"),
    ("empty_assistant", "validate", "an assistant turn with neither an answer nor a tool call"),
    ("missing_reasoning", "validate", "a trained assistant turn without reasoning"),
    ("no_trained_turn", "validate", "no assistant turn is left in the loss"),
    # --- pipeline --------------------------------------------------------------------------------
    ("converter_error", "pipeline", "a converter raised (a bug): the row is kept in rejects, the run goes on"),
    # --- reason (a teacher's text for a turn, checked before it is kept: beam_sft/reason/checks.py) --
    ("teacher_empty", "reason", "the teacher's reasoning is empty, or only whitespace or invisible characters"),
    ("teacher_control_token", "reason", "the teacher's reasoning holds a Harmony marker or a special token "
     "of the tokenizer"),
    ("teacher_markup", "reason", "the teacher's reasoning holds reasoning tags (<think>, ...) or tool-call "
     "tags (<tool_call>, <function=..., Beam's <rfl:parameter>)"),
    ("teacher_cut_off", "reason", "the teacher's answer was cut off (finish_reason length or content_filter)"),
    ("teacher_too_long", "reason", "the teacher's reasoning exceeds the length bound (--max-reasoning-chars)"),
    ("teacher_failed", "reason", "the request failed after its retries (HTTP error, timeout, connection, "
     "a reply that is not a chat completion), or no cached answer where none may be asked"),
    ("teacher_reply_too_large", "reason", "the teacher's reply exceeds --max-response-bytes: refused unread past "
     "the bound, cached as its refusal"),
    ("teacher_reasoning_only", "reason", "the teacher replied with reasoning (reasoning_content / reasoning) but "
     "no content (or only whitespace): its own thinking, not the text asked for"),
    ("teacher_budget_exhausted", "reason", "the request budget (--max-requests, --max-tokens-total) was "
     "spent before the turn was asked"),
    ("teacher_restates_answer", "reason", "the teacher's reasoning only restates the turn's answer (the same words, "
     "whatever the case and punctuation): no reasoning"),
    ("teacher_inconsistent", "reason", "the teacher's reasoning argues for another turn: it names a declared "
     "tool the turn does not call (and none it calls), says it will call a tool where the turn answers, or "
     "the judge (--judge) said it does not lead to this turn"),
    ("judge_failed", "reason", "the judge's (--judge) reply is not a verdict (its first line is not exactly "
     "VERDICT: yes or VERDICT: no), or was cut off"),
    # --- encode -----------------------------------------------------------------------------------
    ("no_messages", "encode", "the row has no messages"),
    ("template_error", "encode", "the chat template raised while rendering the row"),
    ("weight_unmapped", "encode", "a turn's weight could not be mapped onto its trained tokens"),
    ("too_long", "encode", "more tokens than max_length (length policy drop, or no prefix of turns fits)"),
    ("no_trained_tokens", "encode", "no token is left in the loss after weights"),
    # --- verify (rules of beam_sft/verify/invariants.py) ------------------------------------------
    ("shape", "verify", "input_ids and assistant_masks differ in length, the mask is not 0/1, or the "
     "counts disagree"),
    ("row_json", "verify", "the row column is not a BeamRow"),
    ("structure", "verify", "the tokens do not read back as well-formed Harmony messages"),
    ("no_trained", "verify", "no trained token"),
    ("span_count", "verify", "not one trained span per trained assistant turn"),
    ("span_start", "verify", "a span does not start at its turn's first <|channel|>"),
    ("span_end", "verify", "a span does not end with its turn's trained <|return|>/<|call|>"),
    ("straddle", "verify", "a token straddles a mask boundary"),
    ("trained_context", "verify", "a token of a system, developer, user or tool message is trained"),
    ("prompt_parity", "verify", "the generation prompt before a trained turn is not a prefix of the row"),
    ("parse_mismatch", "verify", "a trained span does not parse back to its source message"),
    ("unreadable_reject_line", "verify", "a line of rejects.jsonl is not a JSON record"),
    ("bad_token_id", "verify", "an id is negative, past the vocabulary, or a hole in it"),
    ("special_token", "verify", "an added or special token other than the Harmony markers in the ids, "
                                "or an added token's text inside the row's text"),
    ("tail_mismatch", "verify", "the tokens after the last trained span are not what the template renders"),
    ("reasoning_markup", "verify", "reasoning markup (<think>, <thinking>, <reasoning>, <|begin_of_thought|>) in a trained "
     "analysis message"),
    ("template_parity", "verify", "(sampled) apply_chat_template's ids and mask differ from the row's"),
    ("row_count", "verify", "rows per source differ from the report's counts or the mix's plan, or a record "
                            "is neither kept nor rejected, or both, or twice"),
    ("duplicate_row", "verify", "more copies of a source row than the mix planned"),
    ("rejects_count", "verify", "rejects.jsonl holds more or fewer lines than the report counts"),
    ("report_count", "verify", "a count of report.json disagrees with another (read = kept + rejected, totals, "
                               "mix) or with the rows (token statistics)"),
    ("report_seal", "verify", "report.json is missing, or was changed after beam-sft wrote it (its integrity digest)"),
    ("file_digest", "verify", "a file of the folder is missing, added, resized or changed since report.json "
                              "recorded its SHA-256"),
)

# The verify stage's own "too_long" rule shares the encoder's code: one meaning, given at both stages.
_ALSO = {"too_long": ("verify",)}
REASONS: dict[str, Reason] = {
    code: Reason(code, (stage, *_ALSO.get(code, ())), meaning) for code, stage, meaning in _TABLE
}
# code -> meaning, the shape older callers read.
REASON_CODES: dict[str, str] = {code: r.meaning for code, r in REASONS.items()}


def codes(stage: str) -> tuple[str, ...]:
    """The codes given at ``stage``.

    >>> "too_long" in codes("verify") and "too_long" in codes("encode")
    True
    """
    return tuple(code for code, r in REASONS.items() if stage in r.stages)


def markdown() -> str:
    """The README section: one table row per code, grouped by stage in table order."""
    lines = ["| code | stage | meaning |", "|---|---|---|"]
    for reason in REASONS.values():
        meaning = reason.meaning.replace("|", "\\|")
        lines.append(f"| `{reason.code}` | {reason.stage} | {meaning} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m beam_sft.reject_codes", description=__doc__.split("\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print the README's table (the default)")
    parser.parse_args(argv)
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
