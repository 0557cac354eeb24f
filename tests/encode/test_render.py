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
from beam_sft.errors import RowError
from tests.encode.test_differential import broad_row
from tests.strategies import any_conversations, beam_rows

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def outcome(render, row):
    try:
        return render(row)
    except RowError as exc:
        return ("error", exc.code, exc.detail)


@pytest.mark.parametrize("which", ["tokenizer", "reference_tokenizer"])
@SETTINGS
@given(rows=st.lists(beam_rows(), max_size=3), conversations=st.lists(any_conversations(), max_size=3))
def test_same_as_transformers(request, which, rows, conversations):
    tok = request.getfixturevalue(which)
    renderer = _renderer(tok)
    for row in rows + [broad_row(c) for c in conversations]:
        assert outcome(renderer.render, row) == outcome(lambda r: render_with_transformers(tok, r), row)


def test_memo_is_used_on_tool_declarations(tokenizer):
    renderer = FastRenderer(tokenizer)
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


def _renderer(tok) -> FastRenderer:
    if id(tok) not in _RENDERERS:
        _RENDERERS[id(tok)] = FastRenderer(tok)
    return _RENDERERS[id(tok)]
