"""The row invariants, one pure check per rule. Each takes a RowContext and a CheckEnv and returns
the Violations it finds (an empty list when the row keeps the rule).

Rule codes (stable; they appear in verify_violations.jsonl and report.json). Every rule runs on
every row checked; the parts marked *sampled* run on the rows of the parity sample only (every row
of a small dataset; the report's ``coverage`` says how many):

- ``shape``: input_ids and assistant_masks have the same length, the mask is 0/1, and the
  num_tokens/num_trained columns agree with them.
- ``bad_token_id``: every id is a token of the tokenizer (not negative, not past the vocabulary,
  not a hole in it). A row with such an id gets only ``shape``/``bad_token_id``.
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
- ``special_token``: no added or special token of the tokenizer other than the Harmony markers
  (and what the template itself writes) is in the row's ids, and no text of the row holds the text
  of an added token (markers included), which the tokenizer would turn into a control token.
- ``prompt_parity``: the row's tokens, decoded, are what the tokenizer's chat template renders for
  the row, everywhere before its last trained span (the context every trained turn is trained
  on). Off the sample, the tool declarations are held to each tool's name, description and
  parameters (``rendered_text``); the rest of the text exactly. *Sampled*: the prompt before each trained turn, rendered with add_generation_prompt=True, is
  a prefix of the row's text that ends at the <|channel|> where that turn's span starts (markers
  are added tokens, so it is a token prefix too).
- ``parse_mismatch``: each trained span is the template's text of its source message, and parsed
  with the format's strict reader gives the source message back (reasoning, answer, tool calls
  with arguments). *Sampled*: the shipped response template reads the same, with the tools' types.
- ``tail_mismatch``: the tokens after the last trained span are what the template renders there.
- ``reasoning_markup``: no trained analysis message holds reasoning markup (``<think>``,
  ``</think>``, ``<thinking>``, ``</thinking>``, ``<reasoning>``, ``</reasoning>``,
  ``<|begin_of_thought|>``, ``<|end_of_thought|>``).
- ``template_parity`` (*sampled*): ``apply_chat_template(..., tokenize=True,
  return_assistant_tokens_mask=True)`` with weight-0 turns zeroed gives exactly the row's ids and
  mask (proves the tokenization itself, which decoding cannot). It runs on rows that passed every
  other rule, so that a corruption is reported by the rule that names it.

Folder rules (``counts.py``, over every row even with ``--sample``): ``row_count``,
``duplicate_row``, ``rejects_count``, ``report_count``; and before any row is read
(``provenance.py``): ``report_seal`` (report.json missing or edited), ``file_digest`` (a file
missing, added or changed since report.json recorded it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import numpy as np

from beam_sft.harmony.markers import ALL_MARKERS
from beam_sft.harmony.spans import mask_runs, split_markers
from beam_sft.verify.compare import compare_turn
from beam_sft.verify.context import CheckEnv, RowContext, Violation, is_trained_message
from beam_sft.verify.spans import CONTEXT_ROLES

STRADDLE_WINDOW = 8
REASONING_MARKUP = re.compile(r"</?\s*(?:think|thinking|reasoning)\s*>|<\|\s*(?:begin|end)_of_thought\s*\|>",
                              re.IGNORECASE)
SHOWN = 40


def _violation(ctx: RowContext, env: CheckEnv, rule: str, message: str,
               start: int | None = None, end: int | None = None) -> Violation:
    excerpt = env.excerpt(ctx.ids, start, end) if start is not None and (ctx.shape_ok or ctx.bad_ids) else ""
    return Violation(rule, ctx.position, ctx.source, ctx.row_index, message, start, end, excerpt)


def check_shape(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    out = []
    if len(ctx.ids) != len(ctx.mask):
        out.append(_violation(ctx, env, "shape", f"{len(ctx.ids)} input_ids but {len(ctx.mask)} mask values"))
    bad = [] if ctx.mask_is_binary else np.unique(ctx.mask[(ctx.mask != 0) & (ctx.mask != 1)]).tolist()
    if bad:
        out.append(_violation(ctx, env, "shape", f"mask values other than 0/1: {bad[:5]}"))
    if ctx.num_tokens is not None and ctx.num_tokens != len(ctx.ids):
        out.append(_violation(ctx, env, "shape", f"num_tokens is {ctx.num_tokens}, the row has {len(ctx.ids)}"))
    trained = ctx.trained_total
    if ctx.num_trained is not None and ctx.num_trained != trained:
        out.append(_violation(ctx, env, "shape", f"num_trained is {ctx.num_trained}, the mask has {trained}"))
    return out


def check_bad_token_id(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    if not ctx.bad_ids:
        return []
    first = ctx.bad_ids[0]
    values = sorted({int(ctx.ids[i]) for i in ctx.bad_ids})
    return [_violation(ctx, env, "bad_token_id", f"{len(ctx.bad_ids)} ids are not tokens of the tokenizer "
                       f"(vocabulary 0..{env.vocab_size - 1}): {values[:5]}, first at token {first}",
                       first, first + 1)]


def check_row_json(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    return [_violation(ctx, env, "row_json", ctx.row_error)] if ctx.row_error else []


def check_structure(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    out = [_violation(ctx, env, "structure", p.message, p.start, p.end) for p in ctx.problems]
    out += [v for v in text_differences(ctx, env) if v.rule == "structure"]
    if ctx.row is not None and not ctx.turns_match_sources:
        out.append(_violation(ctx, env, "structure", f"the tokens hold {len(ctx.turns)} assistant turns, "
                              f"the row has {len(ctx.assistant_sources)} assistant messages"))
    return out


def check_no_trained(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    return [] if ctx.trained_total else [_violation(ctx, env, "no_trained", "no trained token in the row")]


def check_too_long(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    if env.max_length is not None and len(ctx.ids) > env.max_length:
        return [_violation(ctx, env, "too_long", f"{len(ctx.ids)} tokens > max_length {env.max_length}",
                           env.max_length, len(ctx.ids))]
    return []


def check_span_count(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    if ctx.row is None or ctx.spans_are_turns:
        return []
    expected = [is_trained_message(m) for _, m in ctx.assistant_sources]
    problems = []
    first = None
    if ctx.turns_match_sources:
        # Per turn: trained iff its source message has weight != 0.
        for n, (turn, want, trained) in enumerate(zip(ctx.turns, expected, ctx.turn_trained, strict=True)):
            got = trained > 0
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
    if ctx.spans_are_turns:
        return []
    out = []
    for start, end in ctx.spans:
        n = ctx.turn_at(start)
        if n is None:
            out.append(_violation(ctx, env, "span_start", "span starts outside any assistant turn", start, end))
        elif start != ctx.turns[n].span_start:
            out.append(_violation(ctx, env, "span_start", f"span starts at token {start}, not at the "
                                  f"<|channel|> after <|start|>assistant (token {ctx.turns[n].span_start})",
                                  start, end))
    return out


def check_span_end(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    """Each span ends on its own turn's <|return|>/<|call|>, and that token is trained."""
    if ctx.spans_are_turns:
        return []
    out = []
    for start, end in ctx.spans:
        last = ctx.turn_at(end - 1)
        first = ctx.turn_at(start)
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
    text it stands for. With a byte-level tokenizer decoding is concatenation, so this is exactly
    "the byte after the boundary continues a UTF-8 character", read from the byte offsets. Where the
    boundary sits relative to the markers is span_start/span_end's job.
    """
    out = []
    w = STRADDLE_WINDOW
    for start, end in ctx.spans:
        for b in (start, end):
            if not 0 < b < len(ctx.ids):
                continue
            cut = ctx.text.splits_character(b)
            if cut is None:
                left, right = ctx.ids[max(0, b - w):b], ctx.ids[b:b + w]
                cut = env.decode(left) + env.decode(right) != env.decode(np.concatenate([left, right]))
            if cut:
                out.append(_violation(ctx, env, "straddle", f"a token straddles the mask boundary at "
                                      f"token {b}: the text on each side does not decode apart", b - 1, b + 1))
    return out


def check_trained_context(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    """No token of a system, developer, user, tool or unknown message is trained.

    When the spans are exactly the trained turns (``spans_are_turns``) every trained token lies in
    an assistant turn, whose messages are assistant messages only (``group_turns``), so the rule
    holds without looking at each message."""
    if ctx.spans_are_turns:
        return []
    out = []
    for message, trained in zip(ctx.messages, ctx.message_trained, strict=True):
        if trained and (message.role in CONTEXT_ROLES or message.role == "unknown"):
            trained = np.flatnonzero(ctx.mask[message.start:message.end + 1]) + message.start
            out.append(_violation(ctx, env, "trained_context", f"{len(trained)} tokens of a "
                                  f"[{message.label}] message ({message.role}) are trained",
                                  int(trained[0]), int(trained[-1]) + 1))
    return out


def check_special_token(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    out = []
    if ctx.forbidden_at:
        first = ctx.forbidden_at[0]
        names = sorted({env.added_names.get(int(ctx.ids[i]), str(int(ctx.ids[i]))) for i in ctx.forbidden_at})
        trained = sum(1 for i in ctx.forbidden_at if ctx.mask[i])
        out.append(_violation(ctx, env, "special_token", f"{len(ctx.forbidden_at)} added/special tokens that no "
                              f"rendered row holds ({', '.join(names[:5])}; {trained} of them trained), first at "
                              f"token {first}", first, first + 1))
    if ctx.raw_row is not None and ctx.row is not None and env.added_text.search(ctx.raw_row):
        # Confirm on the fields the template renders (``meta`` is not rendered).
        rendered = {k: ctx.row[k] for k in ("messages", "tools", "chat_template_kwargs") if k in ctx.row}
        found = sorted(set(env.added_text.findall(json.dumps(rendered, ensure_ascii=False))))
        if found:
            out.append(_violation(ctx, env, "special_token", f"the row's text holds {', '.join(found[:5])}: the "
                                  "tokenizer reads it as a control token, not as text"))
    return out


# --- the row's text against the chat template -----------------------------------------------------------


def _first_difference(a: str, b: str) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def _region(ctx: RowContext, start: int, end: int) -> str:
    """Which rule owns a text difference over tokens [start, end): inside a span, after the last, or before."""
    last_end = ctx.spans[-1][1] if ctx.spans else 0
    if start >= last_end:
        return "tail_mismatch"
    if any(a <= start and end <= b for a, b in ctx.spans):
        return "parse_mismatch"
    return "prompt_parity"


def text_differences(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    """Compare the decoded row with the template's rendering, marker by marker; each differing piece of
    text becomes a violation of the rule that owns its place (see ``_region``). Computed once a row."""
    if "text" in ctx.cache:
        return ctx.cache["text"]
    out: list[Violation] = []
    ctx.cache["text"] = out
    if ctx.row is None:
        return out
    try:
        rendered = rendered_text(ctx, env)
    except Exception as exc:  # the template's own error is the finding
        out.append(_violation(ctx, env, "prompt_parity", f"the row does not render through the chat template: "
                              f"{type(exc).__name__}: {exc}"))
        return out
    ctx.cache["rendered"] = rendered
    if ctx.text.full == rendered:
        if ctx.text.parts is None:
            out.append(_violation(ctx, env, "structure", "the row's text is the template's, but some of its "
                                  "markers are spelled by ordinary tokens, not marker tokens"))
        return out
    want = split_markers(rendered)
    where = list(ctx.marker_positions)
    names = env.markers.names
    bounds = [-1, *where, len(ctx.ids)]
    got: list[str] = []
    ranges: list[tuple[int, int]] = []
    for k in range(len(bounds) - 1):
        a, b = bounds[k] + 1, bounds[k + 1]
        got.append(ctx.text.text(a, b))
        ranges.append((a, b))
        if k < len(where):
            got.append(names[int(ctx.ids[where[k]])])
            ranges.append((where[k], where[k] + 1))
    if len(got) == len(want) and got[1::2] == want[1::2]:
        for k in range(0, len(got), 2):
            if got[k] != want[k]:
                a, b = ranges[k]
                at = _first_difference(got[k], want[k])
                out.append(_violation(ctx, env, _region(ctx, a, b), f"the text of tokens [{a}, {b}) differs from "
                                      f"the template's at character {at}: template "
                                      f"{want[k][max(0, at - 10):at + SHOWN]!r}, row {got[k][max(0, at - 10):at + SHOWN]!r}",
                                      a, b))
        return out
    k = next((i for i, (x, y) in enumerate(zip(got, want, strict=False)) if x != y), min(len(got), len(want)))
    a, b = ranges[k] if k < len(ranges) else (len(ctx.ids), len(ctx.ids))
    shown_want = "".join(want[k:k + 3])[:SHOWN]
    shown_got = "".join(got[k:k + 3])[:SHOWN]
    out.append(_violation(ctx, env, _region(ctx, a, max(a, b)), f"the template renders {len(want) // 2} markers, the "
                          f"row holds {len(got) // 2}; first difference at token {a}: template {shown_want!r}, row "
                          f"{shown_got!r}", a, max(a + 1, b)))
    return out


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix (binary search over C-level compares; each step copies
    only the part of ``b`` still in question, so the copies add up to about one string).

    >>> _common_prefix("abcd", "abXd"), _common_prefix("", "a"), _common_prefix("ab", "ab")
    (2, 0, 2)
    """
    lo, hi = 0, min(len(a), len(b))  # a[:lo] == b[:lo]; the prefix is at most hi long
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a.startswith(b[lo:mid], lo):
            lo = mid
        else:
            hi = mid - 1
    return lo


def inserted_block(text: str, bare: str) -> tuple[int, int] | None:
    """``(start, end)`` when ``text`` is ``bare`` with one block inserted at ``start``, else None.

    >>> inserted_block("ab# Toolscd", "abcd")
    (2, 9)
    >>> inserted_block("x<|end|><|start|>dev<|end|><|start|>user", "x<|end|><|start|>user")
    (1, 20)
    >>> inserted_block("abXd", "abcd") is None
    True
    """
    extra = len(text) - len(bare)
    if extra < 0:
        return None
    p = _common_prefix(text, bare)
    # If any insertion point works, the end of the longest common prefix does; then slide the block
    # to its leftmost equivalent place (``<|start|>`` + a new message + ``<|end|>`` reads as that).
    if not text.startswith(bare[p:], p + extra):  # the rest is the same (lengths agree by ``extra``)
        return None
    start, end = p, p + extra
    while start > 0 and text[start - 1] == text[end - 1]:
        start, end = start - 1, end - 1
    return start, end


def declares_tools(block: str, tools: list) -> bool:
    """Whether ``block`` names every tool, in order, and each tool's part of it (from the previous
    tool's name to the next tool's: a declaration may put the description before the name) holds its
    description (line by line) and its parameters' names.

    >>> tools = [{"function": {"name": "f", "description": "Adds.", "parameters": {"properties": {"a": {}}}}},
    ...          {"function": {"name": "g", "description": "Says hi."}}, {"function": {"name": "h"}}]
    >>> declares_tools("Adds. f(a) Says hi. g h", tools), declares_tools("f(a) g h Adds. Says hi.", tools)
    (True, False)
    """
    at = 0
    found: list[tuple[int, list[str]]] = []
    for tool in tools:
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            return False
        at = block.find(fn["name"], at)
        if at < 0:
            return False
        words = [line.strip() for line in str(fn.get("description") or "").splitlines() if line.strip()]
        params = (fn.get("parameters") or {}).get("properties") if isinstance(fn.get("parameters"), dict) else None
        words += [str(k) for k in params] if isinstance(params, dict) else []
        found.append((at, words))
    starts = [0] + [at for at, _ in found[:-1]]
    ends = [at for at, _ in found[1:]] + [len(block)]
    return all(block.find(word, start, end) >= 0 for start, (_, words), end in zip(starts, found, ends, strict=True)
               for word in words)


def rendered_text(ctx: RowContext, env: CheckEnv) -> str:
    """What the template renders for the row, for comparing with its decoded tokens.

    The tool declarations (a TypeScript rendering of each JSON schema) are most of the cost of
    rendering a row, so off the parity sample a row with tools is first compared with the template
    rendered without its tools: when the decoded row is exactly that text with one block inserted
    before the first user or assistant message, and the block declares every tool (name,
    description, parameters, in order), the row's text is taken as the template's. Anything else,
    and every sampled row, is compared with the whole rendering.
    """
    tools = ctx.row.get("tools")
    if ctx.sampled or not tools or not env.declarations_by_sample or not isinstance(tools, list):
        return env.render(ctx.row, plain=ctx.raw_row is not None)
    bare = env.render(ctx.row, tools=False, plain=ctx.raw_row is not None)
    text = ctx.text.full
    block = inserted_block(text, bare)
    if block is not None:
        starts = [i for i in (bare.find("<|start|>user"), bare.find("<|start|>assistant")) if i >= 0]
        if block[0] <= min(starts, default=len(bare)) and declares_tools(text[block[0]:block[1]], tools):
            ctx.cache["declarations"] = "checked by name"
            return text
    return env.render(ctx.row, plain=ctx.raw_row is not None)


def _text_rule(code: str) -> Callable[[RowContext, CheckEnv], list[Violation]]:
    def rule(ctx: RowContext, env: CheckEnv) -> list[Violation]:
        return [v for v in text_differences(ctx, env) if v.rule == code]

    return rule


def check_prompt_parity(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    """The context before the last trained span is the template's (every row); on sampled rows, the
    prompt before each trained turn is a prefix of the row ending where the turn's span starts."""
    out = _text_rule("prompt_parity")(ctx, env)
    if not ctx.sampled or ctx.row is None or out or "rendered" not in ctx.cache:
        return out
    full = ctx.cache["rendered"]
    where = ctx.marker_positions
    for n, (index, message) in enumerate(ctx.assistant_sources):
        if not is_trained_message(message) or index == 0:
            continue  # an assistant message first has no prompt to render
        try:
            prompt = env.render(ctx.row, upto=index, plain=ctx.raw_row is not None)
        except Exception as exc:  # the template's own error is the finding
            out.append(_violation(ctx, env, "prompt_parity", f"messages[:{index}] does not render: {exc}"))
            continue
        at = _first_difference(prompt, full)
        if at < len(prompt):
            out.append(_violation(ctx, env, "prompt_parity", f"the prompt for messages[{index}] is not a prefix of the "
                                  f"row's text: first difference at character {at}: prompt "
                                  f"{prompt[max(0, at - 10):at + SHOWN]!r}, row {full[max(0, at - 10):at + SHOWN]!r}"))
            continue
        if not full.startswith(ALL_MARKERS, len(prompt)):
            out.append(_violation(ctx, env, "prompt_parity", f"the prompt for messages[{index}] ends inside the row's "
                                  f"text, not at a marker: {full[len(prompt):len(prompt) + SHOWN]!r} follows"))
            continue
        k = len(split_markers(prompt)) // 2  # markers in the prompt: the next one is the k-th of the row
        token = where[k] if k < len(where) else len(ctx.ids)
        if ctx.turns_match_sources and ctx.turns[n].span_start != token:
            out.append(_violation(ctx, env, "prompt_parity", f"the prompt for messages[{index}] ends at token {token} "
                                  f"but its turn's <|channel|> is token {ctx.turns[n].span_start}",
                                  token, ctx.turns[n].span_start + 1))
    return out


def check_parse(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    """Each trained span parses back to its source message; then any text of a span that differs
    from the template's (which the parse may not show, e.g. a header)."""
    out = _parsed_differences(ctx, env)
    return out + _text_rule("parse_mismatch")(ctx, env)


def _parsed_differences(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    out: list[Violation] = []
    if env.parser is None or not ctx.turns_match_sources:
        return out
    tools = ctx.row.get("tools") or None
    parser = env.sample_parser if ctx.sampled and env.sample_parser is not None else env.parser
    for n, start, end in _aligned_spans(ctx):
        source = ctx.assistant_sources[n][1]
        text = ctx.text.text(start, end)
        try:
            parsed = parser(text, tools)
        except Exception as exc:  # a span the parser rejects is the finding
            out.append(_violation(ctx, env, "parse_mismatch", f"assistant turn {n} does not parse: {exc}", start, end))
            continue
        diffs = compare_turn(parsed, source)
        if diffs:
            out.append(_violation(ctx, env, "parse_mismatch", f"assistant turn {n} (messages"
                                  f"[{ctx.assistant_sources[n][0]}]): " + "; ".join(diffs), start, end))
    return out


def _aligned_spans(ctx: RowContext) -> list[tuple[int, int, int]]:
    """(turn index, start, end) of every span that is exactly its turn's, from ``<|channel|>`` through
    ``<|return|>``/``<|call|>`` (misaligned spans are span_start/span_end's finding)."""
    if ctx.spans_are_turns:  # the spans are the trained turns, in order
        trained = [n for n, (_, message) in enumerate(ctx.assistant_sources) if is_trained_message(message)]
        return [(n, start, end) for n, (start, end) in zip(trained, ctx.spans, strict=True)]
    out = []
    for start, end in ctx.spans:
        n = ctx.turn_at(start)
        if n is not None and start == ctx.turns[n].span_start and end - 1 == ctx.turns[n].end:
            out.append((n, start, end))
    return out


check_tail = _text_rule("tail_mismatch")
check_tail.__doc__ = "The tokens after the last trained span are the template's text there."


def check_reasoning_markup(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    out = []
    for message, trained in zip(ctx.messages, ctx.message_trained, strict=True):
        if not trained or message.role != "assistant" or message.part != "analysis":
            continue
        found = REASONING_MARKUP.search(message.body)
        if found:
            out.append(_violation(ctx, env, "reasoning_markup", f"the trained reasoning holds {found.group(0)!r}: "
                                  "reasoning markup reached trained tokens", message.message + 1, message.end))
    return out


def check_template_parity(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    """Sampled: the template's own ids and mask (weight-0 turns zeroed) are exactly the row's."""
    if not ctx.sampled or ctx.row is None:
        return []
    row = ctx.row
    try:
        encoded = env.tokenizer.apply_chat_template(
            row["messages"], tools=row.get("tools") or None, tokenize=True, return_dict=True,
            return_assistant_tokens_mask=True, **(row.get("chat_template_kwargs") or {}))
    except Exception as exc:  # prompt_parity reports a template that does not render
        return [] if text_differences(ctx, env) else [_violation(
            ctx, env, "template_parity", f"apply_chat_template fails: {type(exc).__name__}: {exc}")]
    ids = np.asarray(encoded["input_ids"], dtype=np.int64)
    mask = np.asarray(encoded["assistant_masks"], dtype=np.int64)
    out = []
    if len(ids) != len(ctx.ids) or not np.array_equal(ids, ctx.ids):
        n = min(len(ids), len(ctx.ids))
        diff = np.flatnonzero(ids[:n] != ctx.ids[:n])
        at = int(diff[0]) if len(diff) else n
        out.append(_violation(ctx, env, "template_parity", f"tokenizing the template's text gives {len(ids)} ids, the "
                              f"row has {len(ctx.ids)}; first difference at token {at} (template "
                              f"{env.decode(ids[at:at + 4])!r})", at, at + 1))
        return out
    runs = mask_runs(mask)
    weights = [is_trained_message(m) for _, m in ctx.assistant_sources]
    if len(runs) == len(weights):
        for (a, b), trained in zip(runs, weights, strict=True):
            if not trained:
                mask[a:b] = 0
    if not np.array_equal(mask, ctx.mask != 0):
        at = int(np.flatnonzero(mask != (ctx.mask != 0))[0])
        out.append(_violation(ctx, env, "template_parity", f"the template's assistant mask differs from the row's "
                              f"at token {at} (template {int(mask[at])}, row {int(ctx.mask[at])})", at, at + 1))
    return out


Rule = Callable[[RowContext, CheckEnv], list[Violation]]

# Explicit registry, in the order rules run; the key is the code the rule reports.
RULES: dict[str, Rule] = {
    "shape": check_shape,
    "bad_token_id": check_bad_token_id,
    "row_json": check_row_json,
    "structure": check_structure,
    "no_trained": check_no_trained,
    "too_long": check_too_long,
    "span_count": check_span_count,
    "span_start": check_span_start,
    "span_end": check_span_end,
    "straddle": check_straddle,
    "trained_context": check_trained_context,
    "special_token": check_special_token,
    "prompt_parity": check_prompt_parity,
    "parse_mismatch": check_parse,
    "tail_mismatch": check_tail,
    "reasoning_markup": check_reasoning_markup,
    "template_parity": check_template_parity,
}
# Rules that run only on the parity sample, or whose named part does (the report's ``coverage``).
SAMPLED_PARTS: dict[str, str] = {
    "template_parity": "ids and mask equal the template's apply_chat_template(..., return_assistant_tokens_mask)",
    "prompt_parity": "each trained turn's prompt rendered with add_generation_prompt=True ends where its span starts; "
                     "the tool declarations are the template's exactly (elsewhere: names, descriptions, parameters)",
    "parse_mismatch": "the shipped response template reads each span as the strict reader does, with tool types",
}
FOLDER_RULES: tuple[str, ...] = ("row_count", "duplicate_row", "rejects_count", "report_count", "report_seal",
                                  "file_digest")
RULE_CODES: tuple[str, ...] = (*RULES, *FOLDER_RULES)


def check_row(ctx: RowContext, env: CheckEnv) -> list[Violation]:
    """Every rule on one row. A row whose ids and mask disagree in shape gets only ``shape``; a row
    with ids outside the vocabulary gets only ``shape`` and ``bad_token_id``; ``template_parity``
    runs on (sampled) rows that every other rule passed."""
    out = check_shape(ctx, env)
    if not ctx.shape_ok:
        return out
    out += check_bad_token_id(ctx, env)
    if ctx.bad_ids:
        return out
    for code, rule in RULES.items():
        if code not in ("shape", "bad_token_id", "template_parity"):
            out.extend(rule(ctx, env))
    if not out:  # the tokenization proof, for what no other rule can see; it adds nothing to a failed row
        out.extend(check_template_parity(ctx, env))
    return out
