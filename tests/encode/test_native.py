"""``encode/fast/native.py`` (Beam's template written out in Python) against the template itself.

Each test hands both the very inputs the fast renderer gives the template (normalized messages,
reasoning aliased, the template arguments with the special tokens): where native renders, the
template must render the same text and spans, without raising; where the template raises, native
must decline. Run on beam-sft's template and, where ../shared is there, on the checkpoint's own.
Valid rows must all render natively (a renderer that declines everything would pass the rest).
"""

from __future__ import annotations

import copy
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_sft.compat import chat_template
from beam_sft.encode.fast import native
from beam_sft.encode.fast import render as render_mod
from beam_sft.encode.fast.encoder import FastEncoder
from beam_sft.encode.fast.probe import probe, probe_rows
from beam_sft.encode.fast.render import FastRenderer
from beam_sft.encode.template_encode import TemplateEncoder
from tests.conftest import REPO_ROOT
from tests.strategies import any_conversations, any_tools, beam_rows

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                                      HealthCheck.data_too_large])
_COMPILED: dict = {}


def _inputs(tokenizer, messages, tools, kwargs):
    chat = chat_template.alias_reasoning_fields(chat_template.normalize_chat_messages(messages))
    template_kwargs = {**tokenizer.special_tokens_map, **kwargs}
    return chat, tools, template_kwargs


def _template_outcome(source, chat, tools, template_kwargs):
    compiled = _COMPILED.get(source)
    if compiled is None:
        compiled = _COMPILED[source] = chat_template.compile_private_template(source)
    try:
        text, spans = chat_template.render_with_assistant_indices(compiled, copy.deepcopy(chat), copy.deepcopy(tools),
                                                                  copy.deepcopy(template_kwargs))
    except Exception:  # noqa: BLE001 - any failure: native must decline
        return "raised"
    return text, list(spans)


def _check(tokenizer, source, messages, tools, kwargs) -> bool:
    """Native against the template on one input; True when native rendered it."""
    kwargs = {k: v for k, v in kwargs.items() if k != "add_generation_prompt"}  # training renders only
    chat, tools, template_kwargs = _inputs(tokenizer, messages, tools, kwargs)
    got = native.render(copy.deepcopy(chat), copy.deepcopy(tools), copy.deepcopy(template_kwargs),
                        tokenizer.special_tokens_map)
    if got is None:
        return False
    want = _template_outcome(source, chat, tools, template_kwargs)
    assert want != "raised", f"native rendered what the template refuses: {messages!r} {tools!r} {kwargs!r}"
    assert (got[0], list(got[1])) == want, f"native diverges from the template on {messages!r} {tools!r} {kwargs!r}"
    return True


@pytest.fixture(params=["ours", "reference"])
def template(request, tokenizer):
    if request.param == "ours":
        return tokenizer.chat_template
    return request.getfixturevalue("reference_template")


def test_known_templates(tokenizer, reference_template):
    assert native.supports(tokenizer.chat_template)
    assert native.supports(reference_template)
    assert not native.supports(tokenizer.chat_template + " ")
    assert not native.supports("{{ messages }}")


@settings(max_examples=300, **SETTINGS)
@given(conversation=any_conversations())
def test_native_matches_template_on_any_conversation(tokenizer, template, conversation):
    _check(tokenizer, template, conversation["messages"], conversation["tools"], conversation["kwargs"])


@settings(max_examples=300, **SETTINGS)
@given(tools=st.lists(any_tools(), min_size=1, max_size=4),
       builtin=st.sampled_from((None, ["search"], ["search", "browse", "bash", "f", "get_weather"], "search")))
def test_native_matches_template_on_any_tools(tokenizer, template, tools, builtin):
    kwargs = {} if builtin is None else {"builtin_tools": builtin}
    _check(tokenizer, template, [{"role": "user", "content": "hi"}], tools, kwargs)


@settings(max_examples=200, **SETTINGS)
@given(row=beam_rows())
def test_every_valid_row_renders_natively(tokenizer, template, row):
    assert _check(tokenizer, template, row["messages"], row.get("tools"), row.get("chat_template_kwargs") or {}), \
        f"a valid row was declined: {row!r}"


def test_probe_rows_and_real_text_render_natively(tokenizer, template):
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    try:
        from realtext import real_text_rows
    finally:
        sys.path.remove(str(REPO_ROOT / "benchmarks"))
    rendered = 0
    rows = probe_rows() + real_text_rows(150, seed=3)
    for row in rows:
        rendered += _check(tokenizer, template, row["messages"], row.get("tools"), row.get("chat_template_kwargs") or {})
    assert rendered >= len(rows) - 8  # probe_rows holds rows the template rejects on purpose


def test_unknown_template_arguments_are_declined(tokenizer):
    # A template argument could shadow a global the template calls (`namespace`, `raise_exception`).
    row = [{"role": "user", "content": "hi"}]
    assert native.render(row, None, {"namespace": 1}) is None
    assert native.render(row, None, {"reasoning_effort": "low"}) is not None


def test_renderer_uses_native_only_for_known_templates(tokenizer):
    row = {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "reasoning_content": "r",
                                                           "content": "y"}]}
    renderer = FastRenderer(tokenizer)
    renderer.render(row)
    assert renderer.native_stats == {"rows": 1, "declined": 0}
    other = copy.deepcopy(tokenizer)
    other.chat_template = tokenizer.chat_template.replace("Reasoning effort: ", "Effort: ")
    renderer = FastRenderer(other)
    text, _ = renderer.render(row)
    assert "Effort: 512" in text and "Reasoning effort" not in text
    assert renderer.native_stats == {"rows": 0, "declined": 0}


def test_the_template_is_compiled_only_when_many_rows_need_jinja(tokenizer, monkeypatch):
    # A compile is 0.05 s of every process's start: rows the native renderer takes never pay it, a
    # few it declines render with apply_chat_template's own compile, many get the memo's.
    monkeypatch.setattr(render_mod, "SHARED_DECLINES", 2)
    row = {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "reasoning_content": "r",
                                                           "content": "y"}]}
    renderer = FastRenderer(tokenizer)
    want = renderer.render(row)
    assert renderer.native_stats == {"rows": 1, "declined": 0} and renderer._compiled == {}
    declined = {**row, "chat_template_kwargs": {"house_style": 1}}  # native declines an unknown argument
    chat, tools, kwargs = _inputs(tokenizer, declined["messages"], None, {"house_style": 1})
    expected = _template_outcome(tokenizer.chat_template, chat, tools, kwargs)
    for n in (1, 2, 3, 4):
        text, spans = renderer.render(declined)
        assert (text, list(spans)) == expected
        assert renderer.native_stats["declined"] == n and len(renderer._compiled) == (n > 2)
    assert renderer.render(row) == want and len(renderer._compiled) == 1
    other = copy.deepcopy(tokenizer)
    other.chat_template = tokenizer.chat_template.replace("Reasoning effort: ", "Effort: ")
    renderer = FastRenderer(other)
    renderer.render(row)
    assert len(renderer._compiled) == 1  # any other template: compiled before the first row


def test_a_declined_row_the_template_refuses_is_the_templates_error_either_way(tokenizer, monkeypatch):
    bad = {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "reasoning_content": "r",
                                                           "content": "y"}], "chat_template_kwargs": {"namespace": 1}}
    errors = []
    for shared in (64, 0):
        monkeypatch.setattr(render_mod, "SHARED_DECLINES", shared)
        with pytest.raises(Exception) as exc:  # noqa: PT011 - compared below
            FastRenderer(tokenizer).render(bad)
        errors.append((type(exc.value), str(exc.value)))
    assert errors[0] == errors[1]


def test_a_wrong_native_renderer_is_caught_by_the_differential_and_the_probe(tokenizer, monkeypatch):
    """Mutation: an integer parameter declared as `int` instead of `number`."""
    monkeypatch.setattr(native, "_ts_scalar", lambda name: "int" if name == "integer" else "string")
    with pytest.raises(AssertionError, match="diverges"):
        for row in probe_rows():
            _check(tokenizer, tokenizer.chat_template, row["messages"], row.get("tools"),
                   row.get("chat_template_kwargs") or {})
    result = probe(FastEncoder(tokenizer), TemplateEncoder(tokenizer), probe_rows())
    assert not result.ok and "fast gave" in result.mismatch
