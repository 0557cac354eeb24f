"""What the rules look at: one prepared row read back into messages, turns and spans, the
tokenizer-side helpers the rules share (``CheckEnv``), and the Violation they return.

Nothing here comes from ``beam_sft.encode``: the row is read from its token ids, decoded text and
the tokenizer's own chat template, so an encoder bug cannot hide itself in shared code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property

import numpy as np

from beam_sft.harmony.response import parse_assistant_turn
from beam_sft.harmony.spans import is_trained, mask_runs, split_markers, token_splitter
from beam_sft.verify.decode import RowText, build_decoder
from beam_sft.verify.spans import (
    MarkerIds,
    Message,
    Problem,
    Turn,
    group_turns,
    once,
    parse_aligned_messages,
    parse_messages,
    turn_at,
)
from beam_sft.verify.template import Renderer
from beam_sft.visible import marked_off, visible

EXCERPT_CONTEXT = 60
EXCERPT_REGION = 160
REGION_MARKS = "⟦⟧"  # around an excerpt's region
PARSER_NAME = "beam_sft.harmony.response.parse_assistant_turn"


@dataclass(frozen=True)
class Violation:
    """One broken rule. ``row`` is the dataset position (what ``inspect --row`` takes); None for a
    finding about the whole folder (counts, rejects.jsonl)."""

    rule: str
    row: int | None
    source: str
    row_index: int | None
    message: str
    start: int | None = None  # token range the violation is about (half-open)
    end: int | None = None
    excerpt: str = ""

    def to_json(self) -> dict:
        return asdict(self)

    def format(self) -> str:
        """For the terminal: the source, message and excerpt quote data, shown ``visible`` on one line each."""
        where = "dataset" if self.row is None else f"row {self.row}"
        where += f" ({self.source}:{self.row_index})" if self.row_index is not None else (
            f" ({self.source})" if self.source else "")
        tokens = f" tokens [{self.start}, {self.end})" if self.start is not None else ""
        text = visible(f"{where} [{self.rule}]{tokens}: {self.message}", newlines=False)
        return text + (f"\n    {visible(self.excerpt, newlines=False)}" if self.excerpt else "")


def strict_parser(text: str, tools: list | None) -> dict:
    """The strict reader of one trained span (the format's own, not the encoder's). A parser takes the
    span's text (from its ``<|channel|>`` to its ``<|return|>``/``<|call|>``) and the row's tools."""
    return parse_assistant_turn(text, check_response_template=False)


def template_parser(text: str, tools: list | None) -> dict:
    """The strict reader, then the shipped response template and the tools' schema types too."""
    return parse_assistant_turn(text, tools=tools, check_response_template=True)


def _template_placed_ids(tokenizer, added: dict[str, int]) -> set[int]:
    """Added tokens the chat template itself writes in a plain conversation (a BOS, say)."""
    probe = [{"role": "user", "content": "x"}, {"role": "assistant", "reasoning_content": "r", "content": "a"}]
    try:
        ids = tokenizer.apply_chat_template(probe, tokenize=True, return_dict=True)["input_ids"]
    except Exception:  # a template that cannot render this is every row's finding, not start-up's
        return set()
    return set(ids) & set(added.values())


@dataclass
class CheckEnv:
    """Per-process helpers around the prepared dataset's tokenizer."""

    tokenizer: object
    markers: MarkerIds
    decoder: object
    vocab_size: int
    forbidden: np.ndarray  # added/special ids that no rendered row may hold (not markers, not template-placed)
    added_names: dict[int, str]
    added_text: re.Pattern  # every added token's text, raw and JSON-escaped
    decoder_note: str | None = None
    parser: object = strict_parser
    sample_parser: object = template_parser
    parser_name: str = PARSER_NAME
    max_length: int | None = None
    sampled: frozenset[int] = frozenset()  # positions that get the sampled rules too
    # Off the sample, compare a row with tools against the template rendered without them plus one
    # block that declares each tool (see ``invariants.rendered_text``); False renders every row whole.
    declarations_by_sample: bool = True
    renderer: Renderer | None = None

    def __post_init__(self) -> None:
        if self.renderer is None:
            self.renderer = Renderer(self.tokenizer)

    @classmethod
    def create(cls, tokenizer, *, max_length: int | None = None, renderer: Renderer | None = None) -> CheckEnv:
        marker_ids = MarkerIds.from_tokenizer(tokenizer)
        added = {str(k): int(v) for k, v in tokenizer.get_added_vocab().items()}
        for token in getattr(tokenizer, "all_special_tokens", []) or []:
            tid = tokenizer.convert_tokens_to_ids(token)
            if isinstance(tid, int) and tid >= 0:
                added.setdefault(str(token), tid)
        vocab_size = len(tokenizer)
        allowed = marker_ids.all | _template_placed_ids(tokenizer, added)
        forbidden = np.array(sorted(set(added.values()) - allowed), dtype=np.int64)
        texts = set(added) | {json.dumps(t)[1:-1] for t in added} | {json.dumps(t, ensure_ascii=False)[1:-1]
                                                                     for t in added}
        decoder, note = build_decoder(tokenizer, vocab_size)
        return cls(tokenizer, marker_ids, decoder, vocab_size, forbidden, {v: k for k, v in added.items()},
                   token_splitter(texts), decoder_note=note, max_length=max_length, renderer=renderer)

    @cached_property
    def marker_table(self) -> np.ndarray:
        """``marker_table[id]``: whether the id is a Harmony marker (a lookup, not a search, per token)."""
        table = np.zeros(self.vocab_size, dtype=bool)
        table[self.markers.array] = True
        return table

    @cached_property
    def forbidden_table(self) -> np.ndarray:
        table = np.zeros(self.vocab_size, dtype=bool)
        table[self.forbidden] = True
        return table

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        """Every token as written, markers included (only <|return|> is special in Beam)."""
        return self.decoder.decode(self.safe_ids(ids))

    def safe_ids(self, ids) -> np.ndarray:
        """``ids`` with ids outside the vocabulary replaced, so a broken row can still be shown."""
        ids = np.asarray(ids, dtype=np.int64)
        bad = (ids < 0) | (ids >= self.vocab_size)
        return np.where(bad, self.markers.start, ids) if bad.any() else ids

    def render(self, row: dict, upto: int | None = None, *, tools: bool = True, plain: bool = False) -> str:
        """The tokenizer's chat template on the row (``messages[:upto]`` with a generation prompt;
        without the row's tools when ``tools`` is False): ``apply_chat_template(..., tokenize=False)``'s
        text. ``plain``: the row is ``json.loads`` output, so ``template.Renderer`` may skip
        transformers' per-call rebuild of it."""
        messages = row["messages"] if upto is None else row["messages"][:upto]
        return self.renderer.render(messages, (row.get("tools") or None) if tools else None, upto is not None,
                                    row.get("chat_template_kwargs") or {}, plain=plain)

    def tokenize(self, text: str) -> list[int]:
        """Exactly what ``apply_chat_template(..., tokenize=True)`` does with the rendered text."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def excerpt(self, ids: Sequence[int], start: int | None, end: int | None) -> str:
        """Decoded text around ``ids[start:end]``, the region itself between ⟦ and ⟧, on one line, its
        control and bidi characters escaped (``visible``): it is printed, and kept in the violations file.
        A ⟦ or ⟧ of the row's own is escaped too, so the brackets shown are the region's."""
        if start is None:
            return ""
        end = max(end if end is not None else start + 1, start)
        left = self.decode(ids[max(0, start - 24):start])[-EXCERPT_CONTEXT:]
        region = self.decode(ids[start:end])
        if len(region) > EXCERPT_REGION:
            half = EXCERPT_REGION // 2
            region = region[:half] + " … " + region[-half:]
        right = self.decode(ids[end:end + 24])[:EXCERPT_CONTEXT]
        left, region, right = (marked_off(part, REGION_MARKS) for part in (left, region, right))
        return visible(f"{left}{REGION_MARKS[0]}{region}{REGION_MARKS[1]}{right}", newlines=False)


@dataclass(frozen=True)
class RowContext:
    """One prepared row, parsed once and shared by every rule."""

    position: int
    source: str
    row_index: int | None
    ids: np.ndarray
    mask: np.ndarray
    num_tokens: int | None
    num_trained: int | None
    raw_row: str | None
    row: dict | None  # None when the row column is not a JSON object with a messages list
    row_error: str | None
    text: RowText | None = None
    sampled: bool = False
    bad_ids: tuple[int, ...] = ()  # positions of ids outside the vocabulary
    forbidden_at: tuple[int, ...] = ()  # positions of added tokens no rendered row may hold
    marker_positions: tuple[int, ...] = ()  # positions of the Harmony marker tokens
    messages: tuple[Message, ...] = ()
    turns: tuple[Turn, ...] = ()
    problems: tuple[Problem, ...] = ()
    spans: tuple[tuple[int, int], ...] = ()
    cache: dict = field(default_factory=dict, compare=False, repr=False)

    @once
    def mask_is_binary(self) -> bool:
        """Every mask value is 0 or 1."""
        mask = self.mask
        return mask.dtype == np.bool_ or not len(mask) or bool(((mask == 0) | (mask == 1)).all())

    @once
    def shape_ok(self) -> bool:
        return len(self.ids) == len(self.mask) and self.mask_is_binary

    @once
    def trained_total(self) -> int:
        """Trained (non-zero) mask values."""
        return int(np.count_nonzero(self.mask))

    @once
    def trained_before(self) -> np.ndarray:
        """``trained_before[i]``: trained tokens in ``[0, i)``."""
        out = np.zeros(len(self.mask) + 1, dtype=np.int64)
        np.cumsum(self.mask != 0, out=out[1:])
        return out

    def _trained_between(self, bounds: list[tuple[int, int]]) -> list[int]:
        """Trained tokens in each ``[start, end)`` of ``bounds`` (one vectorised lookup)."""
        if not bounds:
            return []
        pairs = np.array(bounds, dtype=np.int64)
        before = self.trained_before
        return (before[pairs[:, 1]] - before[pairs[:, 0]]).tolist()

    @once
    def message_trained(self) -> list[int]:
        """Trained tokens of each message, ``<|start|>`` to terminator.

        When the spans are exactly the trained turns (``spans_are_turns``) these are counted from
        the turns, without the mask: every token of a trained turn from its span start on is
        trained, and no other token is."""
        if not self.spans_are_turns:
            return self._trained_between([(m.start, m.end + 1) for m in self.messages])
        counts: dict[int, int] = {}
        for turn, (_, source) in zip(self.turns, self.assistant_sources, strict=True):
            if is_trained_message(source):
                first = turn.span_start
                for message in turn.messages:
                    counts[id(message)] = message.end + 1 - max(message.start, first)
        return [counts.get(id(message), 0) for message in self.messages]

    @once
    def turn_trained(self) -> list[int]:
        """Trained tokens of each turn from its span start (``<|channel|>``) to its terminator."""
        return self._trained_between([(t.span_start, t.end + 1) for t in self.turns])

    @once
    def assistant_sources(self) -> list[tuple[int, dict]]:
        """(index in messages, message) of every source assistant message, in order."""
        if self.row is None:
            return []
        return [(i, m) for i, m in enumerate(self.row["messages"])
                if isinstance(m, dict) and m.get("role") == "assistant"]

    @once
    def turns_match_sources(self) -> bool:
        return self.row is not None and len(self.turns) == len(self.assistant_sources)

    @once
    def spans_are_turns(self) -> bool:
        """The spans are exactly the trained turns, in order: one per source message of weight != 0,
        from its ``<|channel|>`` through its ``<|return|>``/``<|call|>``, every one of them complete.
        Then span_count, span_start and span_end hold (each rule checks one side of this)."""
        if not self.turns_match_sources:
            return False
        want = []
        for turn, (_, message) in zip(self.turns, self.assistant_sources, strict=True):
            if is_trained_message(message):
                if not turn.complete:
                    return False
                want.append((turn.span_start, turn.end + 1))
        return list(self.spans) == want

    @once
    def turn_starts(self) -> list[int]:
        """The first token of each turn, in order (``turn_at``)."""
        return [turn.start for turn in self.turns]

    def turn_at(self, index: int) -> int | None:
        """Index of the turn whose tokens (first ``<|start|>`` to terminator) include ``index``
        (``spans.turn_at`` with the starts kept)."""
        return turn_at(self.turns, index, self.turn_starts)


def is_trained_message(message: dict) -> bool:
    """A source assistant message is trained unless its weight is 0.

    >>> is_trained_message({"role": "assistant", "weight": 0}), is_trained_message({"role": "assistant"})
    (False, True)
    """
    return is_trained(message)


def load_row_json(text) -> tuple[dict | None, str | None]:
    """The row column as a BeamRow, or why it is not one."""
    try:
        row = json.loads(text) if isinstance(text, str) else text
    except (TypeError, ValueError) as exc:
        return None, f"row column is not JSON: {exc}"
    if not isinstance(row, dict) or not isinstance(row.get("messages"), list):
        return None, "row column is not a BeamRow (an object with a messages list)"
    if not all(isinstance(m, dict) for m in row["messages"]):
        return None, "row column is not a BeamRow (a message is not an object)"
    return row, None


def build_context(position: int, ids: np.ndarray, mask: np.ndarray, columns: dict, env: CheckEnv,
                  text: RowText | None, bad_ids: Sequence[int] = (), forbidden_at: Sequence[int] = (),
                  marker_positions: Sequence[int] | None = None,
                  spans: Sequence[tuple[int, int]] | None = None, letters: str | None = None,
                  counts: tuple[int, bool] | None = None) -> RowContext:
    """Read one row (its token arrays and its other columns) into a RowContext; ``marker_positions``,
    ``spans`` (``mask_runs(mask)``), ``letters`` (``MarkerIds.letter_of`` of the markers) and ``counts``
    (trained mask values, whether the mask is 0/1) when the caller found them for a whole batch at once."""
    raw = columns.get("row")
    row, row_error = load_row_json(raw)
    base = dict(position=position, source=str(columns.get("source") or ""), row_index=columns.get("row_index"),
                ids=ids, mask=mask, num_tokens=columns.get("num_tokens"), num_trained=columns.get("num_trained"),
                raw_row=raw if isinstance(raw, str) else None, row=row, row_error=row_error,
                sampled=position in env.sampled, bad_ids=tuple(int(i) for i in bad_ids),
                forbidden_at=tuple(int(i) for i in forbidden_at))
    if len(bad_ids) or text is None:
        return RowContext(**base)
    where = list(marker_positions) if marker_positions is not None else \
        np.flatnonzero(np.isin(ids, env.markers.array)).tolist()
    parts = split_markers(text.full)
    messages = None
    if len(parts) == 2 * len(where) + 1:  # else some marker text is not a marker token: see check_structure
        text.align(parts, where)
        messages = parse_aligned_messages(ids, env.markers, where, parts, letters)  # a well-formed row, quickly
    problems: list[Problem] = []
    if messages is None:
        messages, problems = parse_messages(ids, env.markers, text.text, where)
    turns, turn_problems = group_turns(messages)
    if len(mask) != len(ids):
        spans = []
    elif spans is None:
        spans = mask_runs(mask)
    ctx = RowContext(**base, text=text, messages=tuple(messages), turns=tuple(turns),
                     problems=tuple(problems + turn_problems), spans=tuple(spans), marker_positions=tuple(where))
    if counts is not None:  # what ``trained_total`` and ``mask_is_binary`` would compute, found batch-wide
        ctx.__dict__["trained_total"], ctx.__dict__["mask_is_binary"] = int(counts[0]), bool(counts[1])
    return ctx

