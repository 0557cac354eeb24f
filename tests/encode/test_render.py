"""The memoising renderer against transformers' own rendering: same text, same generation spans.

Besides the Beam templates, small adversarial templates try to catch a memoised macro call whose
output should have changed: macros that read context variables, root variables through their
closure, namespaces they mutate, impure globals, and generation blocks inside macros.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_sft.encode.fast.encoder import render_with_transformers
from beam_sft.encode.fast.render import FastRenderer
from beam_sft.errors import Rejection
from tests.encode.test_differential import broad_row
from tests.strategies import any_conversations, beam_rows

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def outcome(render, row):
    try:
        return render(row)
    except Rejection as exc:
        return ("error", exc.code, exc.detail)


@pytest.mark.parametrize("native", [True, False], ids=["native", "jinja"])
@pytest.mark.parametrize("which", ["tokenizer", "reference_tokenizer"])
@SETTINGS
@given(rows=st.lists(beam_rows(), max_size=3), conversations=st.lists(any_conversations(), max_size=3))
def test_same_as_transformers(request, which, native, rows, conversations):
    tok = request.getfixturevalue(which)
    renderer = _renderer(tok, native)
    for row in rows + [broad_row(c) for c in conversations]:
        assert outcome(renderer.render, row) == outcome(lambda r: render_with_transformers(tok, r), row)


def test_memo_is_used_on_tool_declarations(tokenizer):
    renderer = FastRenderer(tokenizer, native=False)  # the Jinja path: native.py renders Beam's templates
    tools = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}}}}}]
    row = {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "reasoning_content": "r",
                                                           "content": "y"}], "tools": tools}
    first = renderer.render(row)
    second = renderer.render(copy.deepcopy(row))
    assert first == second
    assert renderer.memo_stats["hits"] > 0


ADVERSARIAL = {
    "context_read": (
        "{% macro m(x) %}{{ x }}|{{ flavor }}{% endmacro %}"
        "{% for message in messages %}{{ '<|start|>' + message.role + '<|message|>' }}"
        "{{ m(message.content) }}{{ '<|end|>' }}{% endfor %}"
    ),
    "closure_namespace": (
        "{% set counter = namespace(n=0) %}"
        "{% macro m(x) %}{% set counter.n = counter.n + 1 %}{{ x }}#{{ counter.n }}{% endmacro %}"
        "{% for message in messages %}{{ m(message.content) }}{{ m(message.content) }}<|end|>{% endfor %}"
    ),
    "messages_read": (
        "{% macro m(x) %}{{ x }}/{{ messages | length }}{% endmacro %}"
        "{% for message in messages %}{{ m('same') }}<|end|>{% endfor %}"
    ),
    "generation_in_macro": (
        "{% macro turn(message) %}{{ '<|start|>' + message.role }}"
        "{% if message.role == 'assistant' %}{% generation %}{{ '<|message|>' + message.content + '<|return|>' }}"
        "{% endgeneration %}{% else %}{{ '<|message|>' + message.content + '<|end|>' }}{% endif %}{% endmacro %}"
        "{% for message in messages %}{{ turn(message) }}{% endfor %}"
    ),
    "nested_pure_inside_impure": (
        "{% macro inner(x) %}[{{ x }}]{% endmacro %}"
        "{% macro outer(x) %}{{ inner(x) }}{{ flavor }}{% endmacro %}"
        "{% for message in messages %}{{ outer(message.content) }}<|end|>{% endfor %}"
    ),
    "impure_global": (
        "{% macro stamp(x) %}{{ x }}{{ strftime_now('%Y') }}{% endmacro %}"
        "{% for message in messages %}{{ stamp(message.content) }}<|end|>{% endfor %}"
    ),
}
ROWS = [
    {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
     "chat_template_kwargs": {"flavor": "x"}},
    {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
     "chat_template_kwargs": {"flavor": "y"}},
    {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                  {"role": "user", "content": "a"}], "chat_template_kwargs": {"flavor": "x"}},
    {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]},
]


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_templates(tokenizer, name):
    tok = copy.deepcopy(tokenizer)
    tok.chat_template = ADVERSARIAL[name]
    renderer = FastRenderer(tok)
    for _ in range(2):  # the second pass runs on a warm memo
        for row in ROWS:
            assert outcome(renderer.render, row) == outcome(lambda r: render_with_transformers(tok, r), row), (name, row)


_RENDERERS: dict = {}


def _renderer(tok, native: bool = True) -> FastRenderer:
    if (id(tok), native) not in _RENDERERS:
        _RENDERERS[id(tok), native] = FastRenderer(tok, native=native)
    return _RENDERERS[id(tok), native]


# The sandbox shortcuts (plain-dict keys, calls of macros and of methods of plain data): each
# template leans on one thing the shortcuts must get exactly as jinja2's sandbox does.
SHORTCUTS = {
    "dict_attribute_vs_key": (  # ``items``/``get`` are dict methods, ``nope`` is missing, ``flavor`` a key
        "{% for message in messages %}{{ message.get('content') }}|{{ message.items is defined }}|"
        "{{ message.nope is defined }}|{{ message.role }}|{{ (message.keys() | list | length) }}<|end|>{% endfor %}"
    ),
    "str_methods_in_loops": (
        "{% for message in messages %}{{ message.content.replace('a', 'A').upper() }}"
        "{{ message.content.split('a') | join('+') }}{{ '{}-{}'.format(message.role, loop.index) }}<|end|>{% endfor %}"
    ),
    "unsafe_attributes": (
        "{% for message in messages %}{{ message.content.__class__ is defined }}{{ message.update is defined }}"
        "{{ message.content.format is defined }}<|end|>{% endfor %}"
    ),
    "caller_and_kwargs": (
        "{% macro wrap(tag, sep='/') %}[{{ tag }}{{ sep }}{{ caller() }}]{% endmacro %}"
        "{% macro plain(x) %}{{ x }}{{ varargs | length }}{{ kwargs | length }}{% endmacro %}"
        "{% for message in messages %}{% call wrap(message.role, sep=':') %}{{ message.content }}{% endcall %}"
        "{{ plain(message.content, 1, 2, k=3) }}<|end|>{% endfor %}"
    ),
    "autoescape_macro": (  # unique calls, so that the macro stops memoising and takes the shortcut
        "{% macro m(x) %}<{{ x }}>{% endmacro %}"
        "{% for message in messages %}{% for i in range(40) %}{% autoescape true %}{{ m(message.content ~ i ~ '&') }}"
        "{% endautoescape %}{{ m(message.content ~ i) }}{% endfor %}<|end|>{% endfor %}"
    ),
    "unique_calls_stop_memoising": (  # > 256 unique calls: the macro stops memoising, reads still count
        "{% macro m(x) %}{{ x }}{{ flavor }}{% endmacro %}"
        "{% for message in messages %}{% for i in range(40) %}{{ m(message.content ~ i) }}{% endfor %}<|end|>{% endfor %}"
    ),
}
SHORTCUT_ROWS = [  # unique rows first: the memo gives up on a macro whose first 256 calls never repeat
    {"messages": [{"role": "user", "content": f"u{i}", "nope": "x"}, {"role": "assistant", "content": f"b{i}&<"}],
     "chat_template_kwargs": {"flavor": f"f{i % 3}"}} for i in range(24)
] + ROWS


@pytest.mark.parametrize("name", sorted(SHORTCUTS))
def test_sandbox_shortcuts(tokenizer, name):
    tok = copy.deepcopy(tokenizer)
    tok.chat_template = SHORTCUTS[name]
    renderer = FastRenderer(tok)
    for _ in range(2):
        for row in SHORTCUT_ROWS:
            assert outcome(renderer.render, row) == outcome(lambda r: render_with_transformers(tok, r), row), (name, row)
    environment = renderer._template(tok.chat_template).environment
    assert environment._shortcuts  # the shortcuts did run
    if name in ("autoescape_macro", "unique_calls_stop_memoising"):
        assert environment._unmemoised  # and so did the macro calls past the memo


def test_shortcuts_on_and_off_agree_on_beam_rows(reference_tokenizer, monkeypatch):
    from beam_sft.compat import jinja_sandbox

    rows = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "reasoning_content": "r",
                                                              "content": "a"}]}]
    tools = [{"type": "function", "function": {"name": f"f{i}", "description": f"line\nd{i}", "parameters": {
        "type": "object", "required": ["a"], "properties": {
            "a": {"type": "string", "description": f"p{i}", "enum": ["x", "y"]},
            "b": {"type": "array", "items": {"type": "integer"}, "default": [i]},
            "c": {"oneOf": [{"type": "string", "description": "s"}, {"type": "null"}], "title": "T"}}}}}
             for i in range(300)]
    for i in range(0, 300, 3):
        rows.append({"tools": tools[i:i + 3], "messages": [
            {"role": "user", "content": f"q{i}"},
            {"role": "assistant", "reasoning_content": "r", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": f"f{i}", "arguments": {"a": "x", "b": [1]}}}]},
            {"role": "tool", "tool_call_id": "c1", "name": f"f{i}", "content": "{\"ok\": true}"},
            {"role": "assistant", "reasoning_content": "r2", "content": "done"}]})
    on = FastRenderer(reference_tokenizer, native=False)
    got_on = [outcome(on.render, r) for r in rows]
    monkeypatch.setattr(jinja_sandbox, "shortcut_problems", lambda *a: ["turned off by the test"])
    off = FastRenderer(reference_tokenizer, native=False)
    got_off = [outcome(off.render, r) for r in rows]
    assert not off._template(reference_tokenizer.get_chat_template(None, tools)).environment._shortcuts
    assert got_on == got_off == [outcome(lambda r: render_with_transformers(reference_tokenizer, r), r) for r in rows]
