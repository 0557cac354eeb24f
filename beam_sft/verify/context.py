"""What the rules look at: one prepared row read back into messages, turns and spans, plus the
tokenizer-side helpers (decode, render, parse) the rules share, and the Violation they return."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from beam_sft.harmony import markers
from beam_sft.verify.spans import MarkerIds, Message, Problem, Turn, group_turns, mask_runs, parse_messages

# Parser signature: (generated_text, prompt_text, tools) -> {"thinking", "content", "tool_calls"}.
Parser = Callable[[str, str, list | None], dict]

EXCERPT_CONTEXT = 60
EXCERPT_REGION = 160


@dataclass(frozen=True)
class Violation:
    """One broken rule in one row. ``row`` is the dataset position (what ``inspect --row`` takes)."""

    rule: str
    row: int
    source: str
    row_index: int | None
    message: str
    start: int | None = None  # token range the violation is about (half-open)
    end: int | None = None
    excerpt: str = ""

    def to_json(self) -> dict:
        return asdict(self)

    def format(self) -> str:
        where = f"row {self.row} ({self.source}:{self.row_index})"
        tokens = f" tokens [{self.start}, {self.end})" if self.start is not None else ""
        text = f"{where} [{self.rule}]{tokens}: {self.message}"
        return text + (f"\n    {self.excerpt}" if self.excerpt else "")


@dataclass
class CheckEnv:
    """Per-process helpers around the prepared dataset's tokenizer."""

    tokenizer: object
    markers: MarkerIds
    parser: Parser | None = None
    parser_name: str = "unavailable"
    max_length: int | None = None

    @classmethod
    def create(cls, tokenizer, *, max_length: int | None = None) -> CheckEnv:
        from beam_sft.verify.compare import resolve_parser

        parser, name = resolve_parser(tokenizer)
        return cls(tokenizer, MarkerIds.from_tokenizer(tokenizer), parser, name, max_length)

    def decode(self, ids: Sequence[int]) -> str:
        """Every token as written, markers included (only <|return|> is special in Beam)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def render_prompt(self, row: dict, upto: int) -> str:
        """The text of ``messages[:upto]`` rendered with ``add_generation_prompt=True``."""
        return self.tokenizer.apply_chat_template(
            row["messages"][:upto], tools=row.get("tools") or None, add_generation_prompt=True,
            tokenize=False, **(row.get("chat_template_kwargs") or {}),
        )

    def tokenize(self, text: str) -> list[int]:
        """Exactly what ``apply_chat_template(..., tokenize=True)`` does with the rendered text."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def excerpt(self, ids: Sequence[int], start: int | None, end: int | None) -> str:
        """Decoded text around ``ids[start:end]``, the region itself between ⟦ and ⟧, on one line."""
        if start is None:
            return ""
        end = max(end if end is not None else start + 1, start)
        left = self.decode(ids[max(0, start - 24):start])[-EXCERPT_CONTEXT:]
        region = self.decode(ids[start:end])
        if len(region) > EXCERPT_REGION:
            half = EXCERPT_REGION // 2
            region = region[:half] + " … " + region[-half:]
        right = self.decode(ids[end:end + 24])[:EXCERPT_CONTEXT]
        return (left + "⟦" + region + "⟧" + right).replace("\n", "\\n")


class PieceTokenizer:
    """Tokenize many prompts of one row, each distinct text between markers only once.

    Markers are added tokens, which the tokenizer splits off before its model runs, so a text's
    tokens are its pieces' tokens joined. That turns checking every turn's prompt from quadratic
    into linear work; ``check_prompt_parity`` still tokenizes the longest prompt whole and falls
    back to whole-text tokenization for the row if the two ever differ.
    """

    def __init__(self, env: CheckEnv):
        self._env = env
        self._marker_ids = {markers.START: env.markers.start, markers.END: env.markers.end,
                            markers.MESSAGE: env.markers.message, markers.CHANNEL: env.markers.channel,
                            markers.CONSTRAIN: env.markers.constrain, markers.CALL: env.markers.call,
                            markers.RETURN: env.markers.ret}
        self._split = re.compile("(" + "|".join(re.escape(m) for m in markers.ALL_MARKERS) + ")")
        self._cache: dict[str, list[int]] = {}

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        for piece in self._split.split(text):
            if not piece:
                continue
            marker = self._marker_ids.get(piece)
            if marker is not None:
                out.append(marker)
                continue
            ids = self._cache.get(piece)
            if ids is None:
                ids = self._cache[piece] = self._env.tokenize(piece)
            out.extend(ids)
        return out


@dataclass(frozen=True)
class RowContext:
    """One prepared row, parsed once and shared by every rule."""

    position: int
    source: str
    row_index: int | None
    ids: list[int]
    mask: list[int]
    num_tokens: int | None
    num_trained: int | None
    row: dict | None  # None when the row column is not a JSON object with a messages list
    row_error: str | None
    messages: tuple[Message, ...] = ()
    turns: tuple[Turn, ...] = ()
    problems: tuple[Problem, ...] = ()
    spans: tuple[tuple[int, int], ...] = ()

    @property
    def shape_ok(self) -> bool:
        return len(self.ids) == len(self.mask) and all(m in (0, 1) for m in self.mask)

    @property
    def assistant_sources(self) -> list[tuple[int, dict]]:
        """(index in messages, message) of every source assistant message, in order."""
        if self.row is None:
            return []
        return [(i, m) for i, m in enumerate(self.row["messages"])
                if isinstance(m, dict) and m.get("role") == "assistant"]

    @property
    def turns_match_sources(self) -> bool:
        return self.row is not None and len(self.turns) == len(self.assistant_sources)


def is_trained_message(message: dict) -> bool:
    """A source assistant message is trained unless its weight is 0.

    >>> is_trained_message({"role": "assistant", "weight": 0})
    False
    >>> is_trained_message({"role": "assistant"})
    True
    """
    return message.get("weight", 1) != 0


def _load_row(text) -> tuple[dict | None, str | None]:
    try:
        row = json.loads(text) if isinstance(text, str) else text
    except (TypeError, ValueError) as exc:
        return None, f"row column is not JSON: {exc}"
    if not isinstance(row, dict) or not isinstance(row.get("messages"), list):
        return None, "row column is not a BeamRow (an object with a messages list)"
    return row, None


def build_context(position: int, record: dict, env: CheckEnv) -> RowContext:
    """Read one record of the prepared dataset (its columns as a dict) into a RowContext."""
    ids = list(record.get("input_ids") or [])
    mask = list(record.get("assistant_masks") or [])
    row, row_error = _load_row(record.get("row"))
    base = dict(position=position, source=str(record.get("source", "")), row_index=record.get("row_index"),
                ids=ids, mask=mask, num_tokens=record.get("num_tokens"), num_trained=record.get("num_trained"),
                row=row, row_error=row_error)
    messages, problems = parse_messages(ids, env.markers, env.decode)
    turns, turn_problems = group_turns(messages)
    spans = mask_runs(mask) if len(mask) == len(ids) else []
    return RowContext(**base, messages=tuple(messages), turns=tuple(turns),
                      problems=tuple(problems + turn_problems), spans=tuple(spans))
