"""Tokenize text between markers without the tokenizer's slow pre-tokenizer, with the same result.

A byte-level BPE tokenizer (GPT-2, o200k/gpt-oss) turns a text into tokens in three steps: a regex
cuts it into chunks ("words"), each chunk's UTF-8 bytes are mapped to printable characters, and
the BPE model turns each mapped chunk into tokens, independently of the others. In the
``tokenizers`` library the regex step (Oniguruma, with offset bookkeeping) costs about two thirds of
the time. This module runs the same regex with Python's ``regex`` module (three times faster; ASCII
text goes through the standard ``re`` with the classes spelled out for ASCII, faster still),
keeps a dictionary from chunk to token ids (real text repeats its words), and calls the
tokenizer's own BPE model (``model.tokenize``) for chunks it has not seen.

Exactness rests on three checks, made before any text takes this path:

- the tokenizer has exactly one of the known shapes (no normalizer; a byte-level pre-tokenizer
  with the GPT-2 regex, or a Split with a known regex then a byte-level step without one; a BPE
  model without dropout); anything else is not supported and ``build`` returns None;
- every character of a text belongs to the same classes (``\\p{L}``, ``\\p{N}``, ``\\s``, ... the
  classes the regex uses) in both regex engines; a character is checked against the tokenizer's
  own engine the first time it is seen (one whose case folding is not one-to-one is also checked
  with the whole regex in the contexts where folding matters), and a text with a character that
  differs goes to the tokenizer itself (``tokenize`` returns None);
- at start-up, random texts over the checked characters tokenize identically both ways.

The encoder's start-up probe and the differential tests then compare whole rows with
``apply_chat_template``.
"""

from __future__ import annotations

import json
import random
import re
from functools import cache
from itertools import chain

GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
O200K_PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
CL100K_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
# The character classes each known regex looks at: two characters in the same classes are
# interchangeable for it. Literal characters of the pattern are classes of their own.
_BASE_CLASSES = (r"\p{L}", r"\p{N}", r"\s", r"\p{M}", r"[\r\n]", r"'", " ", "/")
KNOWN_PATTERNS: dict[str, tuple[str, ...]] = {
    GPT2_PATTERN: _BASE_CLASSES + (r"[strevmld]",),
    O200K_PATTERN: _BASE_CLASSES + (r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]",
                                    r"(?i:[strevmld])"),
    CL100K_PATTERN: _BASE_CLASSES + (r"(?i:[strevmld])",),
}
_MAX_WORDS = 100_000
_FUZZ_TEXTS = 400


@cache
def byte_chars() -> tuple[str, ...]:
    """GPT-2's byte -> printable character table (the one ``tokenizers``' ByteLevel uses)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return tuple(table[b] for b in range(256))


def tokenizer_pattern(backend) -> str | None:
    """The split regex of a supported byte-level BPE backend, or None."""
    if backend.normalizer is not None or getattr(backend.model, "dropout", None):
        return None
    if type(backend.model).__name__ != "BPE" or backend.pre_tokenizer is None:
        return None
    state = json.loads(backend.pre_tokenizer.__getstate__())
    if state.get("type") == "ByteLevel":
        if state.get("use_regex", True) and not state.get("add_prefix_space"):
            return GPT2_PATTERN
        return None
    if state.get("type") != "Sequence" or len(state.get("pretokenizers", [])) != 2:
        return None
    split, byte_level = state["pretokenizers"]
    if byte_level.get("type") != "ByteLevel" or byte_level.get("use_regex") or byte_level.get("add_prefix_space"):
        return None
    if split.get("type") != "Split" or split.get("behavior") != "Isolated" or split.get("invert"):
        return None
    pattern = split.get("pattern", {}).get("Regex")
    return pattern if pattern in KNOWN_PATTERNS else None


class WordTokenizer:
    """Chunk -> ids with a dictionary in front of the tokenizer's BPE model. See the module doc."""

    def __init__(self, backend, pattern: str):
        import regex

        self.backend = backend
        self.model = backend.model
        self.pattern = pattern
        self.findall = regex.compile(pattern).findall
        self.finditer = regex.compile(pattern).finditer
        self.classes = KNOWN_PATTERNS[pattern]
        self._python_classes = [regex.compile(c) for c in self.classes]
        self.byte_chars = byte_chars()
        self.ascii_map = {i: self.byte_chars[i] for i in range(128)}
        self.words: dict[str, tuple[int, ...]] = {}
        self.verified: set[str] = set()
        self.refused: set[str] = set()
        ascii_chars = [chr(i) for i in range(128)]
        self._check_chars(set(ascii_chars))
        self.ascii_ok = not (self.refused & set(ascii_chars))
        # ASCII text (most of it) goes through the standard library's faster `re`, with the Unicode
        # classes spelled out for ASCII, once every ASCII character is in the same classes there too.
        self.ascii_findall = None
        if self.ascii_ok:
            ascii_classes = [re.compile(ascii_pattern(c), re.ASCII) for c in self.classes]
            theirs = self._engine_classes("".join(ascii_chars))
            if all(bool(cls.fullmatch(c)) == theirs[k][i] for k, cls in enumerate(ascii_classes)
                   for i, c in enumerate(ascii_chars)):
                self.ascii_findall = re.compile(ascii_pattern(pattern), re.ASCII).findall
        self.stats = {"texts": 0, "refused_texts": 0}

    @classmethod
    def build(cls, backend) -> WordTokenizer | None:
        """A WordTokenizer for ``backend`` if its shape is supported and the start-up check passes."""
        pattern = tokenizer_pattern(backend)
        if pattern is None:
            return None
        words = cls(backend, pattern)
        return words if words.self_check() else None

    # characters ------------------------------------------------------------------------------
    def _check_chars(self, chars: set[str]) -> None:
        """Sort new characters into verified (same classes in both engines) and refused."""
        from tokenizers import Regex, pre_tokenizers

        candidates = sorted(c for c in chars if c not in self.verified and c not in self.refused)
        if not candidates:
            return
        ok = [not 0xD800 <= ord(c) <= 0xDFFF for c in candidates]
        ambiguous = [i for i, c in enumerate(candidates) if ok[i] and _fold_ambiguous(c)]
        if ambiguous:  # case folding is where engines differ: compare the whole regex in context
            whole = pre_tokenizers.Split(Regex(self.pattern), behavior="isolated")
            for i in ambiguous:
                c = candidates[i]
                for context in (c, "'" + c, "x'" + c, "X'" + c + c + "x", " " + c + "'s", c + "'" + c, "a" + c):
                    theirs = [piece for piece, _ in whole.pre_tokenize_str(context)]
                    if theirs != self.chunks(context):
                        ok[i] = False
                        break
        text = "".join(c if good else "a" for c, good in zip(candidates, ok, strict=True))
        theirs = self._engine_classes(text)
        for k, python_cls in enumerate(self._python_classes):
            for i, c in enumerate(candidates):
                if ok[i] and theirs[k][i] != bool(python_cls.fullmatch(c)):
                    ok[i] = False
        for c, good in zip(candidates, ok, strict=True):
            (self.verified if good else self.refused).add(c)

    def _engine_classes(self, text: str) -> list[list[bool]]:
        """Per class, per character of ``text``: does the tokenizer's own regex engine match it."""
        from tokenizers import Regex, pre_tokenizers

        out = []
        for cls_pattern in self.classes:
            kept = bytearray(len(text))  # 1 where the engine did not match
            for _, (start, end) in pre_tokenizers.Split(Regex(cls_pattern), behavior="removed").pre_tokenize_str(text):
                kept[start:end] = b"\1" * (end - start)
            out.append([not k for k in kept])
        return out

    def _usable(self, text: str) -> bool:
        if text.isascii():
            return self.ascii_ok
        chars = set(text)
        if not chars <= self.verified:
            self._check_chars(chars)
        return not (chars & self.refused)

    # tokenizing ------------------------------------------------------------------------------
    def _word(self, word: str) -> tuple[int, ...]:
        if word.isascii():
            mapped = word.translate(self.ascii_map)
        else:
            mapped = "".join([self.byte_chars[b] for b in word.encode("utf-8")])
        ids = tuple(token.id for token in self.model.tokenize(mapped))
        if len(self.words) < _MAX_WORDS:  # full: keep the words met first (the frequent ones)
            self.words[word] = ids
        return ids

    def chunks(self, text: str) -> list[str]:
        """The regex's chunks, with any unmatched gap as a chunk of its own (``Isolated``)."""
        found = self.ascii_findall(text) if self.ascii_findall is not None and text.isascii() else self.findall(text)
        if sum(map(len, found)) == len(text):
            return found
        out, last = [], 0
        for match in self.finditer(text):
            if match.start() > last:
                out.append(text[last:match.start()])
            out.append(match.group())
            last = match.end()
        if last < len(text):
            out.append(text[last:])
        return out

    def tokenize(self, text: str) -> list[int] | None:
        """Token ids of ``text`` (no added tokens in it), or None when it must go to the tokenizer."""
        self.stats["texts"] += 1
        if not self._usable(text):
            self.stats["refused_texts"] += 1
            return None
        chunks = self.chunks(text)
        found = list(map(self.words.get, chunks))
        if None in found:
            found = [ids if ids is not None else self._word(word) for word, ids in zip(chunks, found, strict=True)]
        return list(chain.from_iterable(found))

    def self_check(self, seed: int = 0) -> bool:
        """Random texts over awkward characters: identical ids both ways, or this path stays off."""
        rng = random.Random(seed)
        pool = list(" \t\n\r  \n\n'sStTreVEmMlLdD/.,;:!?-_()[]{}<>\"\\|#@$%^&*+=~`0123456789aZ")
        pool += list("éÉßñçøÆœ ЖжΩω中文日本語한국어ـعربي ँहिंदी ๆไทย 🎉👍🏽 ️ ́ ⁄ ½ ² Ⅻ ٣ ") + ["\u00a0", "\u2003", "\u3000"]
        texts = ["".join(rng.choice(pool) for _ in range(rng.randint(1, 40))) for _ in range(_FUZZ_TEXTS)]
        texts += ["don't", "DON'T", "it's 12345 1234567", "a\n\n\n b", "x  \n  y", "end.\n/path/", "   ", "\n"]
        reference = self.backend.encode_batch(texts, add_special_tokens=False)
        for text, want in zip(texts, reference, strict=True):
            got = self.tokenize(text)
            if got is not None and got != want.ids:
                return False
        return True


_ASCII_CLASSES = {"L": "A-Za-z", "N": "0-9", "Lu": "A-Z", "Ll": "a-z", "Lt": "", "Lm": "", "Lo": "", "M": ""}


def ascii_pattern(pattern: str) -> str:
    """``pattern`` for ASCII-only text: each ``\\p{X}`` spelled out as ASCII ranges (for ``re``).

    >>> ascii_pattern(r" ?\\p{L}+|[^\\s\\p{L}\\p{N}]+")
    ' ?[A-Za-z]+|[^\\\\sA-Za-z0-9]+'
    """
    out, i, in_class = [], 0, False
    while i < len(pattern):
        if pattern.startswith("\\p{", i):
            end = pattern.index("}", i)
            ranges = _ASCII_CLASSES[pattern[i + 3:end]]
            out.append(ranges if in_class else (f"[{ranges}]" if ranges else "(?!)"))
            i = end + 1
            continue
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        out.append(char)
        i += 1
    return "".join(out)


def _fold_ambiguous(c: str) -> bool:
    """Characters whose case folding is not one-to-one (``ß``, ligatures, ``ſ``, the Kelvin sign):
    engines may fold them differently, so they always go to the tokenizer."""
    folded = c.casefold()
    return len(folded) != 1 or folded != c.lower() or (c.lower() != c and c.lower().upper() != c)
