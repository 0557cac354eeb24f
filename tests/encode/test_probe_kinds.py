"""The start-up probe compares errors by kind (reason code and the exception behind it), not by
wording: two encoders failing the same way in other words agree."""

from __future__ import annotations

from beam_sft.encode.fast.probe import _same, error_kind, probe
from beam_sft.errors import Rejection


def _error(code: str, cause: BaseException | None, message: str) -> Rejection:
    error = Rejection(code, message)
    error.__cause__ = cause
    return error


def test_the_same_kind_in_other_words_agrees():
    deep_fast = _error("template_error", RecursionError("maximum recursion depth exceeded"), "RecursionError: a")
    deep_ref = _error("template_error", RecursionError("maximum recursion depth exceeded in comparison"),
                      "RecursionError: b")
    assert error_kind(deep_fast) == ("template_error", "RecursionError")
    assert _same(deep_fast, deep_ref)


def test_another_kind_disagrees():
    recursion = _error("template_error", RecursionError("x"), "x")
    value = _error("template_error", ValueError("x"), "x")
    assert not _same(recursion, value)
    assert not _same(_error("too_long", None, "x"), _error("template_error", None, "x"))


def test_probe_passes_when_only_the_wording_differs():
    class Fake:
        def __init__(self, words):
            self.words = words

        def encode_batch(self, rows):
            return [_error("template_error", RecursionError(self.words), self.words) for _ in rows]

    assert probe(Fake("one wording"), Fake("another wording"), [{}, {}]).ok
