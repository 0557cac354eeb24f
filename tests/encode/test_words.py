"""The word path (Python regex + word cache + the tokenizer's own BPE model) against the tokenizer.

Also the fact it and the fast encoder rely on: text between markers tokenizes piece by piece into
exactly the tokens of the whole text, because every marker is an added token.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_sft.encode.fast.words import GPT2_PATTERN, O200K_PATTERN, WordTokenizer, tokenizer_pattern
from beam_sft.harmony import markers

TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=60) | st.text(
    alphabet=" \t\n\r'sStTdDlLmMvVeE0123456789.,/-_é日🎉\u00a0\u2003", max_size=60)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def test_fixture_uses_gpt2_pattern(tokenizer):
    assert tokenizer_pattern(tokenizer.backend_tokenizer) == GPT2_PATTERN


@SETTINGS
@given(texts=st.lists(TEXT, min_size=1, max_size=8))
def test_word_path_equals_tokenizer(tokenizer, texts):
    words = _words(tokenizer)
    texts = [t for t in texts if markers.find_marker(t) is None and "<|endoftext|>" not in t]
    for text, want in zip(texts, tokenizer.backend_tokenizer.encode_batch(texts, add_special_tokens=False), strict=True):
        got = words.tokenize(text)
        assert got is None or got == want.ids, text


def test_refused_characters_go_to_the_tokenizer(tokenizer):
    words = _words(tokenizer)
    words.refused.add("☃")
    assert words.tokenize("snow ☃ man") is None
    assert words.tokenize("snow man") is not None


def test_unsupported_shapes_are_refused(tokenizer):
    from tokenizers import Tokenizer, normalizers

    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.normalizer = normalizers.NFC()
    assert tokenizer_pattern(backend) is None
    assert WordTokenizer.build(backend) is None


@pytest.mark.parametrize("text", ["a<|end|>b", " x <|start|>assistant<|channel|>final<|message|> y\n<|return|>z"])
def test_pieces_between_markers_tokenize_like_the_whole(tokenizer, text):
    assert _piecewise(tokenizer, text) == tokenizer(text, add_special_tokens=False)["input_ids"]


@SETTINGS
@given(parts=st.lists(TEXT, min_size=1, max_size=6), seps=st.lists(st.sampled_from(markers.ALL_MARKERS), min_size=6,
                                                                    max_size=6))
def test_piecewise_equals_whole_hypothesis(tokenizer, parts, seps):
    text = "".join(p + s for p, s in zip(parts, seps, strict=False))
    assert _piecewise(tokenizer, text) == tokenizer(text, add_special_tokens=False)["input_ids"]


def _piecewise(tokenizer, text: str) -> list[int]:
    from beam_sft.encode.fast import FastEncoder

    encoder = FastEncoder(tokenizer, word_cache=False)
    parts = encoder.split_re.split(text)
    ids: list[int] = []
    for index, part in enumerate(parts):
        if not part:
            continue
        if index % 2:
            ids.append(tokenizer.convert_tokens_to_ids(part))
        else:
            ids.extend(tokenizer.backend_tokenizer.encode(part, add_special_tokens=False).ids)
    return ids


_WORDS: dict = {}


def _words(tokenizer) -> WordTokenizer:
    if id(tokenizer) not in _WORDS:
        _WORDS[id(tokenizer)] = WordTokenizer.build(tokenizer.backend_tokenizer)
    assert _WORDS[id(tokenizer)] is not None
    return _WORDS[id(tokenizer)]


# ------------------------------------------------------------------ realistic tier

@pytest.mark.realistic
def test_realistic_uses_o200k_pattern(realistic_tokenizer):
    assert tokenizer_pattern(realistic_tokenizer.backend_tokenizer) == O200K_PATTERN


@pytest.mark.realistic
@SETTINGS
@given(texts=st.lists(TEXT, min_size=1, max_size=8))
def test_realistic_word_path_equals_tokenizer(realistic_tokenizer, texts):
    test_word_path_equals_tokenizer.hypothesis.inner_test(realistic_tokenizer, texts)


@pytest.mark.realistic
@SETTINGS
@given(parts=st.lists(TEXT, min_size=1, max_size=6), seps=st.lists(st.sampled_from(markers.ALL_MARKERS), min_size=6,
                                                                    max_size=6))
def test_realistic_piecewise_equals_whole(realistic_tokenizer, parts, seps):
    test_piecewise_equals_whole_hypothesis.hypothesis.inner_test(realistic_tokenizer, parts, seps)


# The word path over a share of the texts, in a forked child (set before the fork; nothing pickled in).
_CODE_POINTS: dict = {}


def _check_share(share: int) -> tuple[list[str], set[str]]:
    words, texts, wants, shares = (_CODE_POINTS[k] for k in ("words", "texts", "wants", "shares"))
    mismatches = []
    for text, want in list(zip(texts, wants, strict=True))[share::shares]:
        got = words.tokenize(text)
        if got is not None and got != want:
            mismatches.append(text)
    return mismatches, words.verified


@pytest.mark.slow
@pytest.mark.parametrize("which", ["fixture", "realistic"])
def test_every_code_point(request, which, monkeypatch):
    """Every Unicode code point, in context: the word path agrees or refuses, never differs. The word
    path is pure Python: it runs in two forked processes (CI's two cores), each on every other text."""
    import multiprocessing
    import random

    if which == "fixture":
        tok = request.getfixturevalue("tokenizer")
    else:
        tok = request.getfixturevalue("realistic_tokenizer")
    words = WordTokenizer.build(tok.backend_tokenizer)
    rng = random.Random(0)
    context = list(" 'sS\n\t1a.Z/") + ["'s", "'ll", " \n"]
    cps = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    texts = []
    for i in range(0, len(cps), 24):
        parts = []
        for cp in cps[i:i + 24]:
            parts.append(chr(cp))
            if rng.random() < 0.5:
                parts.append(rng.choice(context))
        texts.append("".join(parts))
    texts = [t for t in texts if markers.find_marker(t) is None]
    wants = [e.ids for e in tok.backend_tokenizer.encode_batch(texts, add_special_tokens=False)]
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")  # the children's own tokenizer calls, after a fork
    monkeypatch.setitem(_CODE_POINTS, "words", words)
    monkeypatch.setitem(_CODE_POINTS, "texts", texts)
    monkeypatch.setitem(_CODE_POINTS, "wants", wants)
    monkeypatch.setitem(_CODE_POINTS, "shares", 2)
    with multiprocessing.get_context("fork").Pool(2) as pool:
        done = pool.map(_check_share, range(2))
    assert [text for mismatches, _ in done for text in mismatches] == []
    assert len(set().union(*(verified for _, verified in done))) > 1_000_000
