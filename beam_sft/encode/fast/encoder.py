"""The fast encoder: render once, tokenize only the text between markers, and each distinct text once.

Why it is exact. ``apply_chat_template(..., return_assistant_tokens_mask=True)`` renders the row
(recording the character spans of the template's ``{% generation %}`` blocks), tokenizes the text,
and marks every token whose character offsets overlap a span. This encoder renders through the very
same transformers function, so text and spans are the same. The tokenizer first cuts a text at its
added tokens (every Harmony marker is one) and tokenizes each piece between them on its own, so the
pieces tokenized one by one give the same tokens.

The mask needs no offsets. When every span starts and ends where a piece starts or ends (in Beam's
templates spans run from a marker to a marker), each piece lies wholly inside a span or wholly
outside all of them, and transformers' overlap rule marks all of its tokens or none: a token
``[a, b)`` of a piece inside span ``[s, e)`` has ``s <= a`` and ``b <= e``, so it overlaps unless it
is empty and sits on the span's edge. So the encoder checks, per new piece, that its first and last
tokens are not empty, and per row, that the spans line up with the pieces. A row that fails either
check goes through ``apply_chat_template`` itself (counted in ``stats["fallback_rows"]``).

Why it is fast. Pieces repeat: role and channel names, the system message, tool declarations. Each
process keeps a dictionary from piece to token ids, so those are tokenized once; the new pieces of a
batch go to the tokenizer in one batched call.

What could still break it (an added token with ``lstrip``/``rstrip``, a normalizer, a pre-tokenizer
that treats the start of a text specially) is refused up front by ``unsupported_reasons``, and
``probe.py`` compares the encoder with ``apply_chat_template`` on real rows before a run relies on it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from beam_sft.compat import chat_template
from beam_sft.encode.encoded import ID_DTYPE, MASK_DTYPE, Encoded
from beam_sft.encode.fast.render import FastRenderer
from beam_sft.encode.fast.words import WordTokenizer
from beam_sft.encode.length import too_many_chars
from beam_sft.encode.template_encode import template_args, template_encode_raw, template_error
from beam_sft.encode.weights import apply_weights, assistant_weights
from beam_sft.errors import Rejection
from beam_sft.harmony.spans import mask_runs, token_splitter

_SHORT_PIECE = 32  # pieces up to this many characters are cached at once (names, headers)
_ABSENT = object()


def unsupported_reasons(tokenizer) -> list[str]:
    """Why piece-wise tokenization could differ from whole-text tokenization here ([] when it cannot)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return ["not a fast (tokenizers-backed) tokenizer"]
    reasons = []
    for token in tokenizer.added_tokens_decoder.values():
        if token.lstrip or token.rstrip or token.single_word:
            reasons.append(f"added token {token.content!r} strips whitespace or matches single words")
        if token.normalized and backend.normalizer is not None:
            reasons.append(f"added token {token.content!r} is matched after normalization")
    if getattr(tokenizer, "split_special_tokens", False):
        reasons.append("split_special_tokens is set")
    if "First" in repr(backend.pre_tokenizer):  # Metaspace(prepend_scheme="first")
        reasons.append("the pre-tokenizer treats the first piece of a text specially")
    if not isinstance(getattr(tokenizer, "chat_template", None), str):
        reasons.append("the tokenizer has no single chat template")
    return reasons


def piece_mask(starts: np.ndarray, total: int, spans: Sequence[tuple[int, int]]):
    """Per piece 1/0 (inside a generation span or not), and the pieces that open or close a span.

    ``starts`` are the pieces' start offsets (strictly increasing), ``total`` the text length.
    Returns None when a span edge falls inside a piece (or spans nest): not the simple case.

    >>> inside, edges = piece_mask(np.array([0, 5, 9, 12]), 20, [(5, 12)])
    >>> inside.tolist(), sorted(edges)
    ([0, 1, 1, 0], [(1, 'start'), (2, 'end')])
    >>> piece_mask(np.array([0, 5, 9, 12]), 20, [(6, 12)]) is None
    True
    """
    inside = np.zeros(len(starts), dtype=MASK_DTYPE)
    edges: set[tuple[int, str]] = set()

    def edge(offset: int) -> int | None:  # the index of the piece starting at offset, if one does
        if offset == total:
            return len(starts)
        index = int(np.searchsorted(starts, offset))
        return index if index < len(starts) and starts[index] == offset else None

    previous_end = 0
    for start, end in spans:
        if start > end or start < previous_end:
            return None
        previous_end = end
        first, last = edge(start), edge(end)
        if first is None or last is None:
            return None
        if first < last:
            inside[first:last] = 1
            edges.add((first, "start"))
            edges.add((last - 1, "end"))
    return inside, edges


class FastEncoder:
    """Encode BeamRows in batches; output identical to ``apply_chat_template`` (see the module doc).

    Not thread-safe (the piece cache): each encode worker process (``prepare.encode_pool``) has its own.
    """

    name = "fast"

    def __init__(self, tokenizer, *, memo_render: bool = True, native_render: bool = True, word_cache: bool = True,
                 max_cache_entries: int = 20_000):
        reasons = unsupported_reasons(tokenizer)
        if reasons:
            raise ValueError("fast encoder unsupported: " + "; ".join(reasons))
        self.tokenizer = tokenizer
        self.backend = tokenizer.backend_tokenizer
        # transformers sets these per call and clears them after; make sure none is left over.
        if self.backend.truncation is not None:
            self.backend.no_truncation()
        if self.backend.padding is not None:
            self.backend.no_padding()
        added = dict(tokenizer.added_tokens_encoder)
        self.split_re = token_splitter(added)  # longest first, as the tokenizer matches
        # native_render: Beam's own templates rendered by native.py; memo_render: the memoised Jinja
        # render for every other template (off: transformers' render_jinja_template, as is)
        self.renderer = FastRenderer(tokenizer, native=native_render) if memo_render else None
        self.max_cache_entries = max_cache_entries
        self.markers = {text: np.array([i], dtype=ID_DTYPE) for text, i in added.items()}
        self.cache: dict[str, np.ndarray | None] = {}  # piece text -> token ids (None: the tokenizer failed)
        self.seen: set[int] = set()  # hashes of long pieces met once
        self.words = None
        if word_cache:
            try:
                self.words = WordTokenizer.build(self.backend)
            except Exception:  # the tokenizer itself then does all the tokenizing: slower, still exact
                self.words = None
        self.stats = {"rows": 0, "fallback_rows": 0, "pieces": 0, "cache_hits": 0, "tokenized_chars": 0}

    # rendering -------------------------------------------------------------------------------
    def render(self, row: dict, *, plain: bool = False) -> tuple[str, list[tuple[int, int]]]:
        """Rendered text and generation spans (see ``render.py``; ``plain``: the row is decoded JSON)."""
        if self.renderer is not None:
            return self.renderer.render(row, plain=plain)
        return render_with_transformers(self.tokenizer, row)

    # tokenizing ------------------------------------------------------------------------------
    def _tokenize_pieces(self, pieces: set[str]) -> dict[str, np.ndarray | None]:
        """Ids of every piece of a batch: from the cache, else from the word path or the tokenizer.

        Only pieces that repeat are kept across batches: very short ones (role and channel names) at
        once, the others (system prompts, tool declarations) from their second sighting; a piece
        seen once (most message text) leaves only its hash behind. Memory is bounded: a full cache
        takes nothing more (the pieces that repeat most are met first).
        """
        found: dict[str, np.ndarray | None] = {}
        missing = []
        for piece in pieces:
            ids = self.cache.get(piece, _ABSENT)
            if ids is _ABSENT:
                missing.append(piece)
            else:
                found[piece] = ids
        self.stats["pieces"] += len(pieces)
        self.stats["cache_hits"] += len(pieces) - len(missing)
        rest = []
        for piece in missing:
            ids = self.words.tokenize(piece) if self.words is not None else None
            if ids is None:
                rest.append(piece)
            else:
                found[piece] = np.array(ids, dtype=ID_DTYPE)
            self.stats["tokenized_chars"] += len(piece)
        if rest:
            found.update(zip(rest, self._tokenize_with_backend(rest), strict=True))
        if len(self.seen) > self.max_cache_entries * 10:
            self.seen.clear()
        for piece in missing:
            if len(self.cache) >= self.max_cache_entries:  # full: what repeats most came first
                break
            if len(piece) <= _SHORT_PIECE:
                self.cache[piece] = found[piece]
            else:
                key = hash(piece)
                if key in self.seen:
                    self.cache[piece] = found[piece]
                else:
                    self.seen.add(key)
        return found

    def _tokenize_with_backend(self, pieces: list[str]) -> list[np.ndarray | None]:
        """The tokenizer itself, batched; a piece it cannot take (a lone surrogate) gives None, and its
        rows go through ``apply_chat_template``, which reports the error the same way."""
        try:
            encodings = self.backend.encode_batch(pieces, add_special_tokens=False)
        except Exception:  # find the culprit(s) one by one
            out = []
            for piece in pieces:
                try:
                    out.append(np.array(self.backend.encode(piece, add_special_tokens=False).ids, dtype=ID_DTYPE))
                except Exception:
                    out.append(None)
            return out
        return [np.array(enc.ids, dtype=ID_DTYPE) for enc in encodings]

    def _assemble(self, parts: list[str], spans: list[tuple[int, int]],
                  pieces: dict[str, np.ndarray | None]) -> tuple[np.ndarray, np.ndarray] | None:
        arrays, starts, texts = [], [], []
        position = 0
        for index, part in enumerate(parts):
            if not part:
                continue
            if index % 2:
                arrays.append(self.markers[part])
            else:
                ids = pieces[part]
                if ids is None:  # the tokenizer failed on it: let apply_chat_template report why
                    return None
                arrays.append(ids)
                texts.append(len(starts))
            starts.append(position)
            position += len(part)
        if not arrays:
            return np.zeros(0, dtype=ID_DTYPE), np.zeros(0, dtype=MASK_DTYPE)
        found = piece_mask(np.array(starts, dtype=np.int64), position, spans)
        if found is None:
            return None
        inside, edges = found
        if edges and not self._edges_safe(parts, edges, set(texts)):
            return None
        counts = np.fromiter((len(a) for a in arrays), dtype=np.int64, count=len(arrays))
        return np.concatenate(arrays), np.repeat(inside, counts)

    def _edges_safe(self, parts: list[str], edges: set[tuple[int, str]], texts: set[int]) -> bool:
        """A text piece that opens (closes) a span must not start (end) with an empty token.

        transformers leaves such a token out of the mask; the whole-piece rule would put it in. Beam's
        templates open and close spans with markers, so this rarely has anything to check.
        """
        pieces = [p for p in parts if p]
        for index, side in edges:
            if index not in texts:
                continue
            offsets = self.backend.encode(pieces[index], add_special_tokens=False).offsets
            if offsets and (offsets[0] if side == "start" else offsets[-1])[0] == (offsets[0] if side == "start" else offsets[-1])[1]:
                return False
        return True

    def encode_batch(self, rows: Sequence[dict], *, plain: bool = False,
                     max_chars: int | None = None) -> list[Encoded | Rejection]:
        """Encode ``rows``; a row the template or the weights reject comes back as its Rejection.

        ``plain=True`` promises rows decoded from JSON (no defensive copy before rendering); a row
        whose rendered text is longer than ``max_chars`` is ``too_long`` without being tokenized
        (``beam_sft.encode.length.char_bound``).
        """
        rendered: list[tuple[list[str], list[tuple[int, int]]] | Rejection] = []
        natively: list[bool] = []
        pieces: set[str] = set()
        for row in rows:
            before = self._native_rows()
            try:
                text, spans = self.render(row, plain=plain)
            except Rejection as exc:
                rendered.append(exc)
                continue
            if max_chars is not None and len(text) > max_chars:
                rendered.append(too_many_chars(len(text), max_chars))
                continue
            parts = self.split_re.split(text)  # text, marker, text, marker, ..., text
            pieces.update(p for p in parts[::2] if p)
            rendered.append((parts, spans))
            natively.append(self._native_rows() > before)
        found = self._tokenize_pieces(pieces)
        out: list[Encoded | Rejection] = []
        native_rows = iter(natively)
        for row, item in zip(rows, rendered, strict=True):
            if isinstance(item, Rejection):
                out.append(item)
                continue
            self.stats["rows"] += 1
            native = next(native_rows)
            try:
                assembled = self._assemble(*item, found)
                fallback = assembled is None
                if fallback:
                    self.stats["fallback_rows"] += 1
                    ids, mask = template_encode_raw(row, self.tokenizer)
                    assembled = ids.astype(ID_DTYPE), mask.astype(MASK_DTYPE)
                ids, mask = assembled
                mask = apply_weights(mask, mask_runs(mask), assistant_weights(row["messages"]))
            except Rejection as exc:
                out.append(exc)
                continue
            out.append(Encoded(ids, mask, fallback, native=native and not fallback))
        return out

    def _native_rows(self) -> int:
        """Rows the renderer has rendered natively so far (one more after a row it did)."""
        return self.renderer.native_stats["rows"] if self.renderer is not None else 0

    def encode(self, row: dict) -> Encoded:
        """Encode one row (raises Rejection)."""
        result = self.encode_batch([row])[0]
        if isinstance(result, Rejection):
            raise result
        return result


def render_with_transformers(tokenizer, row: dict) -> tuple[str, list[tuple[int, int]]]:
    """Text and generation spans through transformers' own ``render_jinja_template``, as is."""
    messages, tools, kwargs = template_args(row)
    try:
        return chat_template.render_jinja_template(tokenizer, messages, tools, kwargs)
    except Exception as exc:  # a template error is a property of the row: route it to rejects
        raise template_error(exc) from exc
