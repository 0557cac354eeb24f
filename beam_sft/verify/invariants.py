"""The mask invariants, one pure check per rule. Each takes a RowContext and a CheckEnv and returns
the Violations it finds (an empty list when the row keeps the rule).

Rule codes (stable; they appear in verify_violations.jsonl and report.json):

- ``shape``: input_ids and assistant_masks have the same length, the mask is 0/1, and the
  num_tokens/num_trained columns agree with them.
- ``row_json``: the row column is a BeamRow (JSON object with a messages list).
- ``structure``: the tokens read back as well-formed Harmony messages, every assistant turn closes
  with <|return|> or <|call|>, and there are as many assistant turns as source assistant messages.
- ``no_trained``: at least one trained token.
- ``too_long``: at most max_length tokens.
- ``span_count``: one trained span per trained assistant turn (weight != 0), on exactly those turns.
- ``span_start``: each span starts at the <|channel|> right after the first <|start|>assistant of a turn.
- ``span_end``: each span ends with its turn's <|return|>/<|call|>, which is trained.
- ``straddle``: no token straddles a mask boundary (definition in ``check_straddle``).
- ``trained_context``: no token of a system, developer, user or tool message is trained.
- ``prompt_parity``: the conversation before each trained turn, rendered with
  add_generation_prompt=True, is a prefix of the row's tokens ending where the span starts.
- ``parse_mismatch``: each trained span, decoded and parsed with the response parser, gives back
  its source message (reasoning, answer, tool calls with arguments).
"""

from __future__ import annotations

from collections.abc import Callable

from beam_sft.verify.compare import compare_turn
from beam_sft.verify.context import CheckEnv, PieceTokenizer, RowContext, Violation, is_trained_message
from beam_sft.verify.spans import CONTEXT_ROLES, turn_at

STRADDLE_WINDOW = 8


def _violation(ctx: RowContext, env: CheckEnv, rule: str, message: str,
               start: int | None = None, end: int | None = None) -> Violation:
    excerpt = env.excerpt(ctx.ids, start, end) if ctx.shape_ok or start is None else ""
    return Violation(rule, ctx.position, ctx.source, ctx.row_index, message, start, end, excerpt)


def check_shape(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    out = []
    if len(ctx.ids) != len(ctx.mask):
        out.append(_violation(ctx, env, "shape", f"{len(ctx.ids)} input_ids but {len(ctx.mask)} mask values"))
    bad = sorted({m for m in ctx.mask if m not in (0, 1)})
    if bad:
        out.append(_violation(ctx, env, "shape", f"mask values other than 0/1: {bad[:5]}"))
    if ctx.num_tokens is not None and ctx.num_tokens != len(ctx.ids):
        out.append(_violation(ctx, env, "shape", f"num_tokens is {ctx.num_tokens}, the row has {len(ctx.ids)}"))
    trained = sum(1 for m in ctx.mask if m)
    if ctx.num_trained is not None and ctx.num_trained != trained:
        out.append(_violation(ctx, env, "shape", f"num_trained is {ctx.num_trained}, the mask has {trained}"))
    return out


def check_row_json(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    return [_violation(ctx, env, "row_json", ctx.row_error)] if ctx.row_error else []


def check_structure(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    out = [_violation(ctx, env, "structure", p.message, p.start, p.end) for p in ctx.problems]
    if ctx.row is not None and not ctx.turns_match_sources:
        out.append(_violation(ctx, env, "structure", f"the tokens hold {len(ctx.turns)} assistant turns, "
                              f"the row has {len(ctx.assistant_sources)} assistant messages"))
    return out


def check_no_trained(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    return [] if any(ctx.mask) else [_violation(ctx, env, "no_trained", "no trained token in the row")]


def check_too_long(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    if env.max_length is not None and len(ctx.ids) > env.max_length:
        return [_violation(ctx, env, "too_long", f"{len(ctx.ids)} tokens > max_length {env.max_length}",
                           env.max_length, len(ctx.ids))]
    return []


def check_span_count(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    if ctx.row is None:
        return []
    expected = [is_trained_message(m) for _, m in ctx.assistant_sources]
    problems = []
    first = None
    if ctx.turns_match_sources:
        # Per turn: trained iff its source message has weight != 0.
        for n, (turn, want) in enumerate(zip(ctx.turns, expected, strict=True)):
            got = any(ctx.mask[turn.span_start:turn.end + 1])
            if got != want:
                index = ctx.assistant_sources[n][0]
                state = "trained" if got else "untrained"
                problems.append(f"assistant turn {n} (messages[{index}], weight "
                                f"{ctx.assistant_sources[n][1].get('weight', 1)}) is {state}")
                first = turn if first is None else first
    if len(ctx.spans) != sum(expected) or problems:
        head = f"{len(ctx.spans)} trained spans for {sum(expected)} trained assistant turns"
        message = head + ("; " + "; ".join(problems) if problems else "")
        start, end = (first.span_start, first.end + 1) if first else (None, None)
        return [_violation(ctx, env, "span_count", message, start, end)]
    return []


def check_span_start(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    """Each span starts at the <|channel|> right after the first <|start|>assistant of its turn."""
    out = []
    for start, end in ctx.spans:
        n = turn_at(ctx.turns, start)
        if n is None:
            out.append(_violation(ctx, env, "span_start", "span starts outside any assistant turn", start, end))
        elif start != ctx.turns[n].span_start:
            out.append(_violation(ctx, env, "span_start", f"span starts at token {start}, not at the "
                                  f"<|channel|> after <|start|>assistant (token {ctx.turns[n].span_start})",
                                  start, end))
    return out


def check_span_end(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    """Each span ends on its own turn's <|return|>/<|call|>, and that token is trained."""
    out = []
    for start, end in ctx.spans:
        last = turn_at(ctx.turns, end - 1)
        first = turn_at(ctx.turns, start)
        if last is None or end - 1 != ctx.turns[last].end or not ctx.turns[last].complete:
            expect = f" (token {ctx.turns[last].end})" if last is not None else ""
            out.append(_violation(ctx, env, "span_end", f"span ends at token {end - 1}, not on its turn's "
                                  f"<|return|>/<|call|>{expect}", start, end))
        elif first is not None and first != last:
            out.append(_violation(ctx, env, "span_end", f"span runs over {last - first + 1} assistant turns",
                                  start, end))
    return out


def check_straddle(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    """No token straddles a mask boundary.

    Our definition: masks are per token, so what can straddle is *text*. A boundary b is clean when
    the text on its left and on its right decode independently, i.e.
    ``decode(ids[b-w:b]) + decode(ids[b:b+w]) == decode(ids[b-w:b+w])`` (w = STRADDLE_WINDOW). It
    fails when the boundary splits a character across byte-level tokens or a merge the tokenizer
    decodes differently in context, so the trained text would not be the substring of the rendered
    text it stands for. Where the boundary sits relative to the markers is span_start/span_end's job.
    """
    out = []
    w = STRADDLE_WINDOW
    for start, end in ctx.spans:
        for b in (start, end):
            if 0 < b < len(ctx.ids):
                left, right = ctx.ids[max(0, b - w):b], ctx.ids[b:b + w]
                if env.decode(left) + env.decode(right) != env.decode(left + right):
                    out.append(_violation(ctx, env, "straddle", f"a token straddles the mask boundary at "
                                          f"token {b}: the text on each side does not decode apart", b - 1, b + 1))
    return out


def check_trained_context(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    out = []
    for message in ctx.messages:
        if (message.role in CONTEXT_ROLES or message.role == "unknown") and any(
                ctx.mask[message.start:message.end + 1]):
            trained = [i for i in range(message.start, message.end + 1) if ctx.mask[i]]
            if trained:
                out.append(_violation(ctx, env, "trained_context", f"{len(trained)} tokens of a "
                                      f"[{message.label}] message ({message.role}) are trained",
                                      trained[0], trained[-1] + 1))
    return out


def check_prompt_parity(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    """For each trained turn, ``messages[:i]`` rendered with add_generation_prompt=True and tokenized
    as ``apply_chat_template`` does is a prefix of the row's ids and ends where the turn's span starts."""
    if ctx.row is None:
        return []
    out = []
    prompts: list[tuple[int, int, str]] = []  # (turn number, message index, prompt text)
    for n, (index, message) in enumerate(ctx.assistant_sources):
        if not is_trained_message(message) or index == 0:
            continue  # an assistant message first has no prompt to render
        try:
            prompts.append((n, index, env.render_prompt(ctx.row, index)))
        except Exception as exc:  # the template's own error is the finding
            out.append(_violation(ctx, env, "prompt_parity", f"messages[:{index}] does not render: {exc}"))
    if not prompts:
        return out
    pieces = PieceTokenizer(env)
    longest = env.tokenize(prompts[-1][2])
    by_pieces = pieces.encode(prompts[-1][2]) == longest
    for n, index, text in prompts:
        if text is prompts[-1][2]:
            prompt = longest
        else:
            prompt = pieces.encode(text) if by_pieces else env.tokenize(text)
        head = ctx.ids[:len(prompt)]
        if head != prompt:
            at = next((i for i, (a, b) in enumerate(zip(head, prompt, strict=False)) if a != b),
                      min(len(head), len(prompt)))
            out.append(_violation(ctx, env, "prompt_parity", f"the prompt for messages[{index}] ({len(prompt)} "
                                  f"tokens) is not a prefix of the row: first difference at token {at}, "
                                  f"expected {env.decode(prompt[at:at + 8])!r}", at, at + 8))
        elif ctx.turns_match_sources and ctx.turns[n].span_start != len(prompt):
            out.append(_violation(ctx, env, "prompt_parity", f"the prompt for messages[{index}] ends at token "
                                  f"{len(prompt)} but its turn's <|channel|> is token {ctx.turns[n].span_start}",
                                  len(prompt), ctx.turns[n].span_start + 1))
    return out


def check_parse(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    if env.parser is None or not ctx.turns_match_sources:
        return []
    out = []
    tools = ctx.row.get("tools") or None
    for start, end in ctx.spans:
        n = turn_at(ctx.turns, start)
        if n is None or start != ctx.turns[n].span_start or end - 1 != ctx.turns[n].end:
            continue  # misaligned spans are span_start/span_end's finding
        source = ctx.assistant_sources[n][1]
        text = env.decode(ctx.ids[start:end])
        try:
            # The parser only reads the prompt after its last <|start|>assistant: a short tail will do.
            parsed = env.parser(text, env.decode(ctx.ids[max(0, start - 16):start]), tools)
        except Exception as exc:  # a span the parser rejects is the finding
            out.append(_violation(ctx, env, "parse_mismatch", f"assistant turn {n} does not parse: {exc}", start, end))
            continue
        diffs = compare_turn(parsed, source)
        if diffs:
            out.append(_violation(ctx, env, "parse_mismatch", f"assistant turn {n} (messages"
                                  f"[{ctx.assistant_sources[n][0]}]): " + "; ".join(diffs), start, end))
    return out


Rule = Callable[[RowContext, CheckEnv], list[Violation]]

# Explicit registry, in the order rules run; the key is the code the rule reports.
RULES: dict[str, Rule] = {
    "shape": check_shape,
    "row_json": check_row_json,
    "structure": check_structure,
    "no_trained": check_no_trained,
    "too_long": check_too_long,
    "span_count": check_span_count,
    "span_start": check_span_start,
    "span_end": check_span_end,
    "straddle": check_straddle,
    "trained_context": check_trained_context,
    "prompt_parity": check_prompt_parity,
    "parse_mismatch": check_parse,
}

RULE_CODES: tuple[str, ...] = tuple(RULES)


def check_row(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    """Every rule on one row. A row whose ids and mask disagree in shape gets only ``shape``."""
    out = check_shape(ctx, env)
    if not ctx.shape_ok:
        return out
    for code, rule in RULES.items():
        if code != "shape":
            out.extend(rule(ctx, env))
    return out
