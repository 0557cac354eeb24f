"""Token ids back to text, fast, for whole batches.

For byte-level BPE tokenizers (gpt-oss, the fixture) every token stands for a fixed byte string,
so decoding a batch is one gather from a byte table: a numpy index over every token at once, no
Python per token. The table is built from the tokenizer's own vocabulary with the rule its
``ByteLevel`` decoder applies, and proven at start-up against the tokenizer's decoder on every id
of the vocabulary (in runs) and on random sequences; if they ever disagree, or the tokenizer is
not byte-level, decoding goes through the tokenizer itself (same results, slower).

Byte offsets per token also answer "does this token boundary cut a character in two?" exactly:
the byte right after the boundary is a UTF-8 continuation byte.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import numpy as np

PROBE_RUN = 48
PROBE_RANDOM = 256


@lru_cache(maxsize=1)
def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-to-unicode table, reversed: the character that stands for each byte."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def _is_byte_level(tokenizer) -> bool:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return False
    return type(backend.decoder).__name__ == "ByteLevel" and type(backend.model).__name__ == "BPE"


def vocab_tokens(tokenizer, vocab_size: int) -> list[str | None]:
    """Each id's token in the backend's vocabulary, added tokens included; None for an id with none.

    One ``id_to_token`` per id (a C call each, already in id order) costs less than ``get_vocab``'s
    dict of the whole vocabulary sorted back into id order."""
    return list(map(tokenizer.backend_tokenizer.id_to_token, range(vocab_size)))


class TableDecoder:
    """Decoding by byte table (see the module docstring). ``holes`` are ids with no token."""

    name = "byte_table"

    def __init__(self, blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray, holes: frozenset[int]):
        self.blob, self.starts, self.lengths, self.holes = blob, starts, lengths, holes

    @classmethod
    def build(cls, tokenizer, vocab_size: int) -> TableDecoder:
        return cls.from_tokens(vocab_tokens(tokenizer, vocab_size))

    @classmethod
    def from_tokens(cls, found: list[str | None]) -> TableDecoder:
        """The table of a byte-level vocabulary given as each id's token (None: no token, a hole)."""
        alphabet = _byte_level_alphabet()
        vocab_size = len(found)
        holes = frozenset(i for i, t in enumerate(found) if t is None) if None in found else frozenset()
        tokens = [t or "" for t in found] if holes else found
        # A token with a character outside the byte alphabet is taken as its UTF-8 bytes, as the
        # decoder does; every other token maps character by character to bytes. One pass for all
        # (and one search of the whole vocabulary first: usually no token has such a character).
        outside = re.compile("[^" + re.escape("".join(alphabet)) + "]")
        joined = "".join(tokens)
        odd = [i for i, t in enumerate(tokens) if outside.search(t)] if outside.search(joined) else []
        plain = tokens
        if odd:
            plain = list(tokens)
            for i in odd:
                plain[i] = ""
            joined = "".join(plain)
        # Every character left is in the alphabet (code points below 324): map them to their bytes
        # with one numpy lookup over the UTF-32 code points of the whole vocabulary.
        points = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
        table = np.zeros(max(map(ord, alphabet)) + 1, dtype=np.uint8)
        for c, b in alphabet.items():
            table[ord(c)] = b
        head = table[points].tobytes()
        lengths = np.fromiter(map(len, plain), dtype=np.int64, count=vocab_size)
        starts = np.zeros(vocab_size, dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        tail = bytearray()
        for i in odd:
            raw = tokens[i].encode("utf-8")
            starts[i], lengths[i] = len(head) + len(tail), len(raw)
            tail += raw
        blob = np.frombuffer(head + bytes(tail), dtype=np.uint8)
        return cls(blob, starts, lengths, holes)

    def gather(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(bytes of all ``ids`` end to end, byte offset of each token and of the end)."""
        lengths = self.lengths[ids]
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        total = int(offsets[-1])
        # int32 indices when they fit (half the memory traffic of int64): blob and batch are far smaller.
        kind = np.int32 if max(len(self.blob), total) < 2**31 - 1 else np.int64
        starts = self.starts[ids]
        if lengths.all():
            # Byte j's index in the blob is one more than byte j-1's, except at a token's first byte,
            # which jumps from the previous token's last byte to its own first: one cumulative sum
            # (``np.repeat`` of each token's start, the other way, costs twice as much).
            step = np.ones(total, dtype=kind)
            jumps = starts.astype(kind)
            jumps[1:] -= (starts[:-1] + lengths[:-1] - 1).astype(kind)
            step[offsets[:-1]] = jumps
            index = np.cumsum(step, dtype=kind)
        else:  # some token has no bytes: two tokens would start at one offset
            index = np.repeat((starts - offsets[:-1]).astype(kind), lengths)
            index += np.arange(total, dtype=kind)
        return np.take(self.blob, index), offsets

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        data, _ = self.gather(np.asarray(ids, dtype=np.int64))
        return data.tobytes().decode("utf-8", errors="replace")

    def piece_decoder(self, ids: Sequence[int] | np.ndarray):
        """``decode`` for short runs of ``ids``' tokens (the token-by-token views decode each token
        with a few of context, twice): the same bytes joined and decoded the same way, from each
        token's bytes taken once, without a numpy gather per call (tens of microseconds each)."""
        pieces = {int(i): self.blob[self.starts[i]:self.starts[i] + self.lengths[i]].tobytes()
                  for i in set(np.asarray(ids, dtype=np.int64).tolist())}

        def decode(run: Sequence[int]) -> str:
            return b"".join([pieces[int(i)] for i in run]).decode("utf-8", errors="replace")

        return decode


class TokenizerDecoder:
    """Decoding through the tokenizer itself (any tokenizer)."""

    name = "tokenizer"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.backend = getattr(tokenizer, "backend_tokenizer", None)
        self.holes: frozenset[int] = frozenset()

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        ids = np.asarray(ids, dtype=np.int64).tolist()
        if self.backend is not None:
            return self.backend.decode(ids, skip_special_tokens=False)
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def _probe_sequences(holes: frozenset[int], vocab_size: int) -> list[list[int]]:
    """Every id of the vocabulary but the holes, in runs of PROBE_RUN, then PROBE_RANDOM random
    sequences of them (seeded)."""
    if holes:
        ids = np.setdiff1d(np.arange(vocab_size, dtype=np.int64), np.fromiter(holes, dtype=np.int64))
    else:
        ids = np.arange(vocab_size, dtype=np.int64)
    pool = ids.tolist()
    rng = random.Random(0)
    runs = [pool[a:a + PROBE_RUN] for a in range(0, len(pool), PROBE_RUN)]
    return runs + [rng.choices(pool, k=rng.randint(1, 12)) for _ in range(PROBE_RANDOM)] if pool else []


def _expected(tokenizer, sequences: list[list[int]]) -> list[str]:
    """The tokenizer's own decoding of each sequence (one ``decode_batch``; it releases the GIL)."""
    return tokenizer.backend_tokenizer.decode_batch(sequences, skip_special_tokens=False)


def _compare(table: TableDecoder, sequences: list[list[int]], expected: list[str]) -> str | None:
    """None when the table decodes every sequence as ``expected``, else the first difference (the
    table decodes all of them in one gather, cut back into sequences by their byte offsets)."""
    if not sequences:
        return None
    flat = np.fromiter((i for seq in sequences for i in seq), dtype=np.int64)
    bounds = np.zeros(len(sequences) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences)), out=bounds[1:])
    data, offsets = table.gather(flat)
    raw = data.tobytes()
    cuts = offsets[bounds].tolist()
    for k, want in enumerate(expected):
        got = raw[cuts[k]:cuts[k + 1]].decode("utf-8", errors="replace")
        if got != want:
            return f"ids {sequences[k][:8]}: table {got[:40]!r}, tokenizer {want[:40]!r}"
    return None


def _probe(table: TableDecoder, tokenizer, vocab_size: int) -> str | None:
    """None when the table decodes exactly as the tokenizer does, else the first difference: every
    id of the vocabulary (in runs of PROBE_RUN) and PROBE_RANDOM random sequences."""
    sequences = _probe_sequences(table.holes, vocab_size)
    return _compare(table, sequences, _expected(tokenizer, sequences))


def build_decoder(tokenizer, vocab_size: int) -> tuple[TableDecoder | TokenizerDecoder, str | None]:
    """The fastest decoder proven exact for ``tokenizer``, and why the table was not used (or None).

    The tokenizer decodes the probe's sequences in a thread (``decode_batch`` releases the GIL)
    while this one lists the vocabulary and builds the table. The sequences assume a vocabulary
    without holes, the usual case; when it has some, they are drawn again without them."""
    if not _is_byte_level(tokenizer):
        return TokenizerDecoder(tokenizer), "not a byte-level BPE tokenizer"
    try:
        sequences = _probe_sequences(frozenset(), vocab_size)
        with ThreadPoolExecutor(max_workers=1) as pool:
            expected = pool.submit(_expected, tokenizer, sequences)
            table = TableDecoder.from_tokens(vocab_tokens(tokenizer, vocab_size))
            if table.holes:
                expected.cancel()
                sequences = _probe_sequences(table.holes, vocab_size)
                expected = pool.submit(_expected, tokenizer, sequences)
            problem = _compare(table, sequences, expected.result())
    except Exception as exc:  # a tokenizer shaped unlike any we know: be slow, not wrong
        problem = f"{type(exc).__name__}: {exc}"
    if problem is not None:
        return TokenizerDecoder(tokenizer), f"byte table disagrees with the tokenizer: {problem}"
    return table, None


class RowText:
    """Decoded text of ranges of one row's tokens.

    With a byte table the row's bytes come from one gather per batch (``data``/``offsets``: the
    batch's bytes and token byte offsets, ``base`` the row's first token in them). Once ``align``
    has matched the row's marker tokens with the markers in its decoded text, a range that starts
    and ends at markers is a slice of the text cut at the markers, with no decoding at all.
    """

    def __init__(self, decoder, ids: np.ndarray, data: np.ndarray | None = None,
                 offsets: np.ndarray | None = None, base: int = 0):
        self.decoder, self.ids, self.data, self.offsets, self.base = decoder, ids, data, offsets, base
        self.parts: list[str] | None = None
        self._marker_index: dict[int, int] = {}
        self._full: str | None = None

    @property
    def full(self) -> str:
        """The whole row, decoded."""
        if self._full is None:
            self._full = self._decode(0, len(self.ids))
        return self._full

    def align(self, parts: list[str], marker_positions: list[int]) -> None:
        """``parts``: the decoded row cut around its markers (text, marker, ..., text), one marker per
        marker token at ``marker_positions``, in order (the caller checked the counts agree)."""
        self.parts = parts
        self._marker_index = {p: k for k, p in enumerate(marker_positions)}

    def text(self, start: int, end: int) -> str:
        start, end = max(0, start), min(len(self.ids), end)
        if end <= start:
            return ""
        if self.parts is not None:
            index = self._marker_index
            first = 2 * index[start] + 1 if start in index else (
                2 * index[start - 1] + 2 if start - 1 in index else (0 if start == 0 else None))
            last = 2 * index[end - 1] + 2 if end - 1 in index else (
                2 * index[end] + 1 if end in index else (len(self.parts) if end == len(self.ids) else None))
            if first is not None and last is not None:
                return "".join(self.parts[first:last])
        return self._decode(start, end)

    def _decode(self, start: int, end: int) -> str:
        if self.data is None:
            return self.decoder.decode(self.ids[start:end])
        a, b = self.offsets[self.base + start], self.offsets[self.base + end]
        return self.data[a:b].tobytes().decode("utf-8", errors="replace")

    def splits_character(self, boundary: int) -> bool | None:
        """Whether the boundary before token ``boundary`` cuts a UTF-8 character (None: unknown)."""
        if self.data is None:
            return None
        if not 0 < boundary < len(self.ids):
            return False
        at = self.offsets[self.base + boundary]
        if at >= self.offsets[self.base + len(self.ids)]:
            return False
        return bool(0x80 <= self.data[at] < 0xC0)
