"""Read a prepared row's tokens back into Harmony messages, assistant turns and mask spans.

Everything here works from marker token ids alone, never from the encoder's own bookkeeping, so a
bug in how the encoder placed its masks cannot hide itself. A message is
``<|start|>HEADER<|message|>BODY`` closed by ``<|end|>``, ``<|call|>`` or ``<|return|>``; the header
names the author, an optional ``to=RECIPIENT`` and the channel. An assistant *turn* is what one
source assistant message renders to: an analysis message, then a final answer (closed by
``<|return|>``) or one or more tool calls (the last closed by ``<|call|>``).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

from beam_sft.errors import VerificationError
from beam_sft.harmony import markers

# (start, end) -> the decoded text of tokens [start, end) of the row being read.
TextOf = Callable[[int, int], str]

CONTEXT_ROLES = ("system", "developer", "user", "tool")
_RECIPIENT = re.compile(r"(?:^|\s)to=([^\s<]+)")


class once:  # noqa: N801 (used as a decorator, like cached_property)
    """``functools.cached_property`` without its lock: Python 3.11 takes an RLock on every first access,
    which costs more than the small properties of a row's messages and context computed once each
    (they live in one thread). Writes the instance ``__dict__`` directly, so frozen dataclasses work."""

    def __init__(self, func):
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.func(obj)
        return value


@dataclass(frozen=True)
class MarkerIds:
    """Token ids of the seven Harmony markers in one tokenizer."""

    start: int
    end: int
    message: int
    channel: int
    constrain: int
    call: int
    ret: int

    @classmethod
    def from_tokenizer(cls, tokenizer) -> MarkerIds:
        """Look the markers up; each must be exactly one token or the row cannot be read."""
        ids = {}
        for name, marker in (("start", markers.START), ("end", markers.END), ("message", markers.MESSAGE),
                             ("channel", markers.CHANNEL), ("constrain", markers.CONSTRAIN),
                             ("call", markers.CALL), ("ret", markers.RETURN)):
            encoded = tokenizer.encode(marker, add_special_tokens=False)
            if len(encoded) != 1:
                raise VerificationError(f"marker {marker} is not a single token in this tokenizer: {encoded}")
            ids[name] = encoded[0]
        return cls(**ids)

    @property
    def terminators(self) -> dict[int, str]:
        return {self.end: markers.END, self.call: markers.CALL, self.ret: markers.RETURN}

    @property
    def all(self) -> frozenset[int]:
        return frozenset((self.start, self.end, self.message, self.channel, self.constrain, self.call, self.ret))

    @cached_property
    def names(self) -> dict[int, str]:
        """Marker text by token id."""
        return {self.start: markers.START, self.end: markers.END, self.message: markers.MESSAGE,
                self.channel: markers.CHANNEL, self.constrain: markers.CONSTRAIN, self.call: markers.CALL,
                self.ret: markers.RETURN}

    @cached_property
    def _letter_table(self) -> tuple[np.ndarray, np.ndarray]:
        keys = np.array([self.start, self.message, self.channel, self.constrain, self.end, self.call, self.ret],
                        dtype=np.int64)
        order = np.argsort(keys)
        return keys[order], np.frombuffer(b"SMCKELR", dtype=np.uint8)[order]

    def letter_of(self, ids: np.ndarray) -> str:
        """One letter per marker id of ``ids`` (every id a marker), as a string (``parse_aligned_messages``):
        S start, M message, C channel, K constrain, E end, L call, R return."""
        keys, letters = self._letter_table
        at = np.minimum(np.searchsorted(keys, ids), len(keys) - 1)
        if not np.array_equal(keys[at], ids):
            raise ValueError("letter_of: an id that is not a marker")
        return letters[at].tobytes().decode("ascii")

    @cached_property
    def terminator_of_letter(self) -> dict[str, str]:
        return {"E": markers.END, "L": markers.CALL, "R": markers.RETURN}

    @cached_property
    def array(self) -> np.ndarray:
        return np.array(sorted(self.all), dtype=np.int64)


@dataclass(frozen=True)
class Message:
    """One Harmony message: token indices of its ``<|start|>``, ``<|message|>`` and terminator."""

    start: int
    message: int
    end: int  # index of the terminator token (inclusive)
    terminator: str
    author: str
    recipient: str | None
    channel: str | None
    channel_index: int | None  # index of the first <|channel|> token in the header
    body: str = field(default="", compare=False, repr=False)  # decoded text between <|message|> and the end

    @classmethod
    def quick(cls, start: int, message: int, end: int, terminator: str, author: str, recipient: str | None,
              channel: str | None, channel_index: int | None, body: str) -> Message:
        """``Message(...)`` without the frozen dataclass's one ``object.__setattr__`` per field (a row
        of a real dataset holds a dozen messages); every field is given, so the result is the same."""
        obj = object.__new__(cls)
        role, part = _role_and_part(author, recipient, channel)
        obj.__dict__.update(start=start, message=message, end=end, terminator=terminator, author=author,
                            recipient=recipient, channel=channel, channel_index=channel_index, body=body,
                            role=role, part=part)  # what ``role``/``part`` would compute, found at once
        return obj

    @once
    def role(self) -> str:
        """``assistant``, ``tool`` (a result addressed to the assistant), system/developer/user or ``unknown``.

        >>> Message(0, 2, 5, "<|end|>", "get_weather", "assistant", "analysis", 1).role
        'tool'
        """
        if self.author == "assistant":
            return "assistant"
        if self.recipient == "assistant":
            return "tool"
        if self.author in ("system", "developer", "user"):
            return self.author
        return "unknown"

    @once
    def part(self) -> str:
        """For assistant messages: ``analysis``, ``final`` or ``tool_call``; otherwise the role."""
        if self.role != "assistant":
            return self.role
        if self.recipient:
            return "tool_call"
        return self.channel or "none"

    @property
    def label(self) -> str:
        """Display label: ``assistant:analysis``, ``assistant→get_weather``, ``get_weather→assistant``..."""
        if self.role == "assistant":
            return f"assistant→{self.recipient}" if self.recipient else f"assistant:{self.channel or '?'}"
        if self.role == "tool":
            return f"{self.author}→assistant"
        return self.author or "?"


@lru_cache(maxsize=4096)
def _role_and_part(author: str, recipient: str | None, channel: str | None) -> tuple[str, str]:
    """``Message.role`` and ``Message.part`` of a message with this header (a row's headers repeat)."""
    message = Message(0, 0, 0, "", author, recipient, channel, None)
    return message.role, message.part


@dataclass(frozen=True)
class Turn:
    """The messages one source assistant message renders to.

    ``span_start`` is where the trained span must begin (the ``<|channel|>`` right after the first
    ``<|start|>assistant``); ``end`` is the closing ``<|return|>``/``<|call|>`` (inclusive).
    """

    messages: tuple[Message, ...]

    @property
    def start(self) -> int:
        return self.messages[0].start

    @property
    def span_start(self) -> int:
        first = self.messages[0]
        return first.channel_index if first.channel_index is not None else first.message

    @property
    def end(self) -> int:
        return self.messages[-1].end

    @property
    def complete(self) -> bool:
        return self.messages[-1].terminator in markers.STOP_MARKERS


@dataclass(frozen=True)
class Problem:
    """A place where the token stream is not well-formed Harmony."""

    start: int
    end: int  # exclusive
    message: str


@lru_cache(maxsize=8192)
def parse_header(header: str) -> tuple[str, str | None, str | None]:
    """Split a decoded header into (author, recipient, channel).

    >>> parse_header("assistant to=get_weather<|channel|>analysis <|constrain|>xml")
    ('assistant', 'get_weather', 'analysis')
    >>> parse_header("get_weather to=assistant<|channel|>analysis")
    ('get_weather', 'assistant', 'analysis')
    >>> parse_header("user")
    ('user', None, None)
    """
    before, has_channel, after = header.partition(markers.CHANNEL)
    author = re.split(r"\s|<\|", before.strip(), maxsplit=1)[0] if before.strip() else ""
    found = _RECIPIENT.search(header.replace(markers.CHANNEL, " ").replace(markers.CONSTRAIN, " "))
    recipient = found.group(1) if found else None
    channel = None
    if has_channel:
        channel = re.split(r"\s|<\|", after.strip(), maxsplit=1)[0] or None
    return author, recipient, channel


def parse_messages(ids: np.ndarray, marker_ids: MarkerIds, text: TextOf,
                   where: Sequence[int] | None = None) -> tuple[list[Message], list[Problem]]:
    """Find every message in ``ids``; tokens that belong to no well-formed message become Problems.

    Markers are found by id over the whole row at once (``where``: their positions, when the caller
    has them); only headers and bodies are decoded (``text(start, end)``), once each.
    """
    ids = np.asarray(ids)
    if where is None:
        where = np.flatnonzero(np.isin(ids, marker_ids.array)).tolist()
    positions = list(where)
    kinds = ids[positions].tolist()
    terminators = marker_ids.terminators
    messages: list[Message] = []
    problems: list[Problem] = []
    covered_to = 0  # first index not yet accounted for
    p = 0
    n = len(ids)
    while p < len(positions):
        i = positions[p]
        if kinds[p] != marker_ids.start:
            p += 1
            continue
        if i > covered_to:
            problems.append(Problem(covered_to, i, "tokens outside any message"))
        # Header: from <|start|> to the first <|message|>; only <|channel|>/<|constrain|> may sit inside.
        q = p + 1
        channel_index = None
        while q < len(positions) and kinds[q] in (marker_ids.channel, marker_ids.constrain):
            if kinds[q] == marker_ids.channel and channel_index is None:
                channel_index = positions[q]
            q += 1
        if q >= len(positions) or kinds[q] != marker_ids.message:
            stop = positions[q] if q < len(positions) else n
            problems.append(Problem(i, stop, "message header without <|message|>"))
            covered_to, p = stop, q
            continue
        j = positions[q]
        r = q + 1
        while r < len(positions) and kinds[r] not in terminators and kinds[r] != marker_ids.start:
            r += 1
        if r >= len(positions) or kinds[r] == marker_ids.start:
            stop = positions[r] if r < len(positions) else n
            problems.append(Problem(i, stop, "message without <|end|>, <|call|> or <|return|>"))
            covered_to, p = stop, r
            continue
        if r > q + 1:
            stray = positions[q + 1]
            problems.append(Problem(stray, stray + 1, "marker token inside a message body"))
        k = positions[r]
        author, recipient, channel = parse_header(text(i + 1, j))
        messages.append(Message(i, j, k, terminators[kinds[r]], author, recipient, channel, channel_index,
                                text(j + 1, k)))
        covered_to, p = k + 1, r + 1
    if covered_to < n:
        problems.append(Problem(covered_to, n, "tokens outside any message"))
    return messages, problems


# One letter per marker kind, so that a row's marker sequence is a string a regular expression reads
# in C: S start, M message, C channel, K constrain, E end, L call, R return.
_REGULAR_ROW = re.compile(r"(?:S[CK]*M[ELR])+")
_ONE_MESSAGE = re.compile(r"S([CK]*)M([ELR])")


def parse_aligned_messages(ids: np.ndarray, marker_ids: MarkerIds, where: Sequence[int],
                           parts: Sequence[str], kinds: str | None = None) -> list[Message] | None:
    """``parse_messages``' result for a well-formed row, read from its decoded text cut at the markers,
    or None when the row is not one (then ``parse_messages`` reads it and names its problems).

    Well-formed: the markers, in order, are messages ``<|start|> (<|channel|>|<|constrain|>)*
    <|message|> (<|end|>|<|call|>|<|return|>)`` and every token belongs to one (the first is token 0,
    each message starts right after the previous one's terminator, the last ends the row). ``parts``
    is the decoded row cut around its markers (``split_markers``), one marker per marker token of
    ``where`` (``kinds``: their letters, ``MarkerIds.letter_of``, when the caller has them): a header is
    the text between its ``<|start|>`` and ``<|message|>``, a body the one
    part between ``<|message|>`` and the terminator, exactly what ``parse_messages`` decodes for them.
    """
    if not len(where) or len(parts) != 2 * len(where) + 1:
        return None
    if kinds is None:
        kinds = marker_ids.letter_of(ids[list(where)])
    elif len(kinds) != len(where):
        raise ValueError("parse_aligned_messages: one letter per marker expected")
    if _REGULAR_ROW.fullmatch(kinds) is None:
        return None
    terminators = marker_ids.terminator_of_letter
    messages: list[Message] = []
    covered_to = 0
    for found in _ONE_MESSAGE.finditer(kinds):
        p, r = found.span()
        r -= 1
        q = r - 1
        i = where[p]
        if i != covered_to:
            return None
        c = found.group(1).find("C")
        # A header without markers is one part of the text; otherwise its parts and markers.
        author, recipient, channel = parse_header(parts[2 * p + 2] if q == p + 1 else
                                                  "".join(parts[2 * p + 2:2 * q + 1]))
        k = where[r]
        messages.append(Message.quick(i, where[q], k, terminators[found.group(2)], author, recipient, channel,
                                      where[p + 1 + c] if c >= 0 else None, parts[2 * q + 2]))
        covered_to = k + 1
    return messages if covered_to == len(ids) else None


def group_turns(messages: Sequence[Message]) -> tuple[list[Turn], list[Problem]]:
    """Group assistant messages into turns; a turn closes at ``<|return|>`` or ``<|call|>``.

    A new turn opens at an assistant message when none is open. An open turn interrupted by a
    non-assistant message, or by a second analysis message, was never closed: that is a Problem.
    """
    turns: list[Turn] = []
    problems: list[Problem] = []
    current: list[Message] = []

    def close(reason: str | None) -> None:
        if current:
            turn = Turn(tuple(current))
            if reason:
                problems.append(Problem(turn.start, turn.end + 1, reason))
            turns.append(turn)
            current.clear()

    for message in messages:
        if message.role != "assistant":
            close("assistant turn not closed by <|return|> or <|call|>")
            continue
        if current and message.part == "analysis" and not message.recipient:
            close("assistant turn not closed by <|return|> or <|call|>")
        current.append(message)
        if message.terminator in markers.STOP_MARKERS:
            close(None)
    close("assistant turn not closed by <|return|> or <|call|>")
    return turns, problems


def turn_at(turns: Sequence[Turn], index: int, starts: Sequence[int] | None = None) -> int | None:
    """Index of the turn whose tokens (from its first ``<|start|>`` to its terminator) include ``index``;
    ``starts``: each turn's first token, when the caller keeps them."""
    n = bisect.bisect_right(starts if starts is not None else [turn.start for turn in turns], index) - 1
    if n >= 0 and index <= turns[n].end:
        return n
    return None
