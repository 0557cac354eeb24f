"""verify's render adapter (``beam_sft.verify.template``) gives exactly ``apply_chat_template``'s text.

- The transformers internals it calls are there with the parameters it passes (fails by name on an
  upgrade that moves them).
- Differential: on the fixture's template and the reference template, every row of the verify
  fixture, the benchmark's real-text rows and hand-made edge cases (None values, every reasoning
  field name, template kwargs, tools, generation prompts) render to the same text both ways.
- What the direct path must not take is handed to ``apply_chat_template``: rows not read from JSON,
  kwargs that name a parameter of the public path, an empty conversation.
"""

from __future__ import annotations

import copy
import json

import pytest

from beam_sft.compat import chat_template as template
from beam_sft.verify.template import Renderer
from tests.verify.conftest import beam_rows
from tests.verify.corpus_rows import bench_rows


def test_internals_are_as_the_adapter_expects():
    assert template.verify_problems() == []


def test_a_moved_internal_is_named(monkeypatch):
    module = template._module()
    monkeypatch.delattr(module, "_alias_reasoning_fields")
    assert template.verify_problems() == [f"{template._MODULE}._alias_reasoning_fields: missing"]
    renderer = Renderer(object())
    assert not renderer.direct and renderer.problems  # every row then goes through apply_chat_template


def test_the_memo_is_on_verifys_own_compile_only(tokenizer):
    renderer = Renderer(tokenizer)
    source = tokenizer.get_chat_template(None, None)
    shared = template._module()._compile_jinja_template(source)
    before = type(shared.environment)
    mine = renderer.compiled(source)
    assert renderer.memo_problems == [] and mine is not shared
    assert type(mine.environment).__name__ == "_MemoSandbox" and type(shared.environment) is before
    renderer.render([{"role": "user", "content": "x"}], None, False, {}, plain=True)
    assert type(mine.environment).safe_attribute_answers  # answers were remembered


def test_the_sandbox_still_refuses_what_it_refuses(tokenizer):
    from jinja2.exceptions import SecurityError

    renderer = Renderer(tokenizer)
    evil = "{{ messages.append(1) }}{{ messages[0].clear() }}"
    compiled = renderer.compiled(evil)
    for _ in range(2):  # the second time from the memo
        with pytest.raises(SecurityError):
            compiled.render(messages=[{"role": "user"}])
    assert type(compiled.environment).__name__ == "_MemoSandbox"


def test_dict_attributes_are_exactly_what_getattr_finds():
    from beam_sft.compat.jinja_sandbox import DICT_ATTRIBUTES

    assert all(hasattr({}, name) for name in DICT_ATTRIBUTES)
    for name in ("content", "role", "tool_calls", "thinking", "function", "arguments", "name", "mro", "x"):
        assert hasattr({}, name) == (name in DICT_ATTRIBUTES)
    assert {"items", "keys", "get", "values"} <= DICT_ATTRIBUTES


def test_the_quick_dict_lookup_reads_as_jinja_does(tokenizer):
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    source = ("{{ m.content }}|{{ m.missing is defined }}|{{ m.items()|list|length }}|{{ m.get('role') }}|"
              "{{ m['content'] }}|{{ n.content }}|{{ m.keys is defined }}")
    plain = ImmutableSandboxedEnvironment().from_string(source)
    renderer = Renderer(tokenizer)
    quick = renderer.compiled(source)
    assert type(quick.environment).__name__ == "_MemoSandbox"
    for value in ({"content": "c", "role": "r"}, {"items": 1, "content": None}, {}):
        kwargs = {"m": value, "n": [1]}
        assert quick.render(**kwargs) == plain.render(**kwargs)


def test_no_memo_on_an_unknown_jinja(tokenizer, monkeypatch):
    import jinja2

    monkeypatch.setattr(jinja2, "__version__", "9.0.0")
    renderer = Renderer(tokenizer)
    compiled = renderer.compiled(tokenizer.get_chat_template(None, None))
    assert renderer.memo_problems and type(compiled.environment).__name__ != "_MemoSandbox"


def _edge_rows() -> list[dict]:
    rows = []
    for name in ("reasoning_content", "thinking", "reasoning"):
        rows.append({"messages": [
            {"role": "system", "content": "S", "name": None},
            {"role": "user", "content": "Hi", "tool_calls": None},
            {"role": "assistant", name: "why", "content": "ok", "tool_calls": None}],
            "chat_template_kwargs": {"reasoning_effort": "low"}})
    rows.append({"messages": [{"role": "user", "content": "x"},
                              {"role": "assistant", "reasoning_content": "r", "thinking": "t", "content": "a"}],
                 "chat_template_kwargs": {"model_identity": "You are Beam.", "reasoning_effort": 64}})
    return rows


def _cases(rows):
    for row in rows:
        row = json.loads(json.dumps({k: v for k, v in row.items() if k != "meta"}))
        messages = row["messages"]
        tools = row.get("tools") or None
        kwargs = row.get("chat_template_kwargs") or {}
        yield messages, tools, False, kwargs
        yield messages, None, False, kwargs
        for upto in range(1, len(messages)):
            if messages[upto]["role"] == "assistant":
                yield messages[:upto], tools, True, kwargs


def _check_same(tok, rows) -> int:
    renderer = Renderer(tok)
    assert renderer.direct
    n = 0
    for messages, tools, prompt, kwargs in _cases(rows):
        before = copy.deepcopy((messages, tools, kwargs))
        want = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=prompt, tokenize=False, **kwargs)
        got = renderer.render(messages, tools, prompt, kwargs, plain=True)
        assert got == want
        assert (messages, tools, kwargs) == before  # the row is not changed by rendering it
        n += 1
    return n


def test_same_text_as_apply_chat_template_on_the_fixture(tokenizer):
    assert _check_same(tokenizer, beam_rows() + _edge_rows() + bench_rows(40, seed=3)) > 100


def test_same_text_as_apply_chat_template_on_the_reference(reference_tokenizer):
    assert _check_same(reference_tokenizer, beam_rows() + _edge_rows() + bench_rows(40, seed=4)) > 100


# Shows everything the template is given: each message's keys and values (so dropping None values
# and aliasing reasoning fields show), the special tokens, the kwargs, the tools, the prompt flag.
PROBE = ("{% for m in messages %}{% for k in m|list|sort %}{{ k }}={{ m[k] }};{% endfor %}|{% endfor %}"
         "{{ bos_token }}{{ eos_token }}{{ reasoning_effort }}{{ tools }}{{ add_generation_prompt }}{{ documents }}")


def test_same_inputs_as_apply_chat_template(fixture_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(fixture_dir)
    tok.chat_template = PROBE
    assert _check_same(tok, beam_rows() + _edge_rows()) > 20
    shown = Renderer(tok).render(_edge_rows()[1]["messages"], None, False, {}, plain=True)
    assert "name=" not in shown and "reasoning_content=why" in shown  # None dropped, reasoning aliased


@pytest.mark.parametrize("kwargs", [{"tokenize": True}, {"tools": []}, {"chat_template": "x"},
                                    {"add_generation_prompt": True}, {"documents": []}, {"messages": []}])
def test_reserved_kwargs_go_the_public_way(tokenizer, monkeypatch, kwargs):
    renderer = Renderer(tokenizer)
    seen = []
    monkeypatch.setattr(renderer, "public", lambda *args: seen.append(args) or "public")
    assert renderer.render([{"role": "user", "content": "x"}], None, False, kwargs, plain=True) == "public"
    assert seen


@pytest.mark.parametrize(("messages", "tools", "plain"), [
    ([{"role": "user", "content": "x"}], None, False),  # not read from JSON
    ([], None, True),  # empty: apply_chat_template's own error
    ([{"role": "user", "content": "x"}], ["not a schema"], True),  # apply_chat_template rejects it
])
def test_other_inputs_go_the_public_way(tokenizer, monkeypatch, messages, tools, plain):
    renderer = Renderer(tokenizer)
    monkeypatch.setattr(renderer, "public", lambda *args: "public")
    assert renderer.render(messages, tools, False, {}, plain=plain) == "public"


# Generation blocks that set, loop, call and nest: verify's compile reads each as its body in a scope
# of its own; apply_chat_template's as a call of the tracker with the body as its caller.
GENERATION_PROBE = (
    "{% set ns = namespace(n=0) %}{% set x = 'outer' %}"
    "{% for m in messages %}{% if m.role == 'assistant' %}[{% generation %}{% set x = 'inner' %}"
    "{% set ns.n = ns.n + 1 %}{{ x }}{{ loop.index }}{% for c in m.content %}{{ loop.index }}{{ c }}"
    "{% if loop.last %}.{% endif %}{% endfor %}{{ m.content | upper }}{% endgeneration %}]{{ x }}"
    "{% else %}{{- m.content -}}{% endif %}{% endfor %}{{ ns.n }}{{ x }}"
)


def test_generation_blocks_read_as_their_bodies(fixture_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(fixture_dir)
    tok.chat_template = GENERATION_PROBE
    renderer = Renderer(tok)
    compiled = renderer.compiled(GENERATION_PROBE)
    assert renderer.generation_problems == []
    assert "_generation_support" not in compiled.environment.compile(GENERATION_PROBE, raw=True)
    rows = [{"messages": [{"role": "user", "content": "ab"}, {"role": "assistant", "content": "cd"},
                          {"role": "user", "content": " e "}, {"role": "assistant", "content": "f"}]}]
    assert _check_same(tok, rows) >= 2
    # transformers' own compile still tracks: the assistant mask comes out as before
    encoded = tok.apply_chat_template(rows[0]["messages"], tokenize=True, return_dict=True,
                                      return_assistant_tokens_mask=True)
    assert any(encoded["assistant_masks"])


def test_an_unread_generation_extension_is_compiled_as_it_is(tokenizer, monkeypatch):
    monkeypatch.setitem(template.GENERATION_SOURCES, "_generation_support", "0" * 16)
    renderer = Renderer(tokenizer)
    source = tokenizer.get_chat_template(None, None)
    compiled = renderer.compiled(source)
    assert renderer.generation_problems and "_generation_support" in renderer.generation_problems[0]
    assert "_generation_support" in compiled.environment.compile(source, raw=True)
    assert _check_same(tokenizer, beam_rows()) > 10


# Every Jinja feature a chat template uses, in one template: macros (recursive, with defaults, with
# a caller), set and namespace, loops with loop variables and filters, tests, string methods, dict
# method names as keys, tools, reasoning effort and other kwargs, generation blocks calling macros,
# whitespace control, raise_exception (not reached), the generation prompt.
FEATURES = (
    "{%- macro render_schema(s, depth=0) -%}"
    "{%- if s is mapping -%}{ {%- for k, v in s.items() | sort -%}{{ k }}:{{ render_schema(v, depth + 1) }}"
    "{%- if not loop.last %},{% endif -%}{%- endfor -%} }"
    "{%- elif s is string -%}'{{ s | replace(\"'\", \"\\\\'\") }}'"
    "{%- elif s is iterable -%}[{{ s | map('string') | join('|') }}]{%- else -%}{{ s | tojson }}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- macro boxed(tag) -%}<{{ tag }}>{{ caller() }}</{{ tag }}>{%- endmacro -%}"
    "{%- set ns = namespace(turns=0, last_user='') -%}"
    "{%- if reasoning_effort is defined and reasoning_effort is not none -%}effort={{ reasoning_effort }};"
    "{%- else -%}effort=default;{%- endif -%}"
    "{%- if model_identity is defined %}id={{ model_identity | trim }};{% endif -%}"
    "{%- if tools -%}{%- for t in tools -%}"
    "{%- set f = t.function if t.function is defined else t -%}"
    "tool {{ loop.index }}/{{ loop.length }} {{ f.name }}({{ render_schema(f.parameters or {}) }})"
    "{{ (' - ' ~ f.description.split('\\n')[0]) if f.description }};"
    "{%- endfor -%}{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- set ns.turns = ns.turns + 1 -%}"
    "{%- if m.role == 'user' -%}{%- set ns.last_user = m.content -%}"
    "{%- call boxed('u') -%}{{ m.content | default('', true) }}{%- endcall -%}"
    "{%- elif m.role == 'assistant' -%}<a>"
    "{%- generation -%}"
    "{%- if m.reasoning_content %}[think:{{ m.reasoning_content | length }}]{{ m.reasoning_content }}{% endif -%}"
    "{%- for c in m.tool_calls or [] -%}call {{ c.function.name }} {{ render_schema(c.function.arguments) }};"
    "{%- endfor -%}{%- if m.content is defined -%}{{ m.content if m.content is string else (m.content | tojson) }}"
    "{%- endif -%}"
    "{%- endgeneration -%}</a>"
    "{%- elif m.role == 'tool' -%}<t {{ m.name | default('?') }}>{{ m.content }}</t>"
    "{%- elif m.role == 'system' -%}<s>{{ m.content | upper }}{{ m['items'] | default('') }}</s>"
    "{%- else -%}{{ raise_exception('unknown role ' ~ m.role) }}"
    "{%- endif -%}{%- endfor -%}"
    "{{- '|turns=' ~ ns.turns ~ ';last=' ~ ns.last_user[:5] -}}"
    "{%- if add_generation_prompt -%}<a>{%- endif -%}"
)


def _feature_rows() -> list[dict]:
    tool = {"type": "function", "function": {"name": "lookup", "description": "Find it.\nSecond line",
            "parameters": {"type": "object", "required": ["q"], "properties": {
                "q": {"type": "string", "description": "it's the query"},
                "n": {"type": "integer", "enum": [1, 2, 3], "default": 2}}}}}
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": {"q": "x", "n": [1, 2.5]}}}
    return [
        {"messages": [{"role": "system", "content": "sys", "items": "as a key"},
                      {"role": "user", "content": "What is 'x'?"},
                      {"role": "assistant", "reasoning_content": "look it up", "tool_calls": [call]},
                      {"role": "tool", "name": "lookup", "content": "{\"ok\": true}"},
                      {"role": "assistant", "reasoning_content": "done", "content": "It is x."}],
         "tools": [tool, {"name": "bare", "parameters": {"type": "object", "properties": {}}}],
         "chat_template_kwargs": {"reasoning_effort": 16, "model_identity": "  Beam  "}},
        {"messages": [{"role": "user", "content": ""}, {"role": "assistant", "thinking": "t", "content": "a"},
                      {"role": "user", "content": "again"}, {"role": "assistant", "content": {"k": [1, None]}}],
         "chat_template_kwargs": {"reasoning_effort": "high"}},
        {"messages": [{"role": "user", "content": "no kwargs"}, {"role": "assistant", "reasoning": "r",
                                                                 "content": "ok"}]},
    ]


def test_same_text_as_apply_chat_template_on_every_template_feature(fixture_dir):
    """The two paths verify could take, its own compile and the public ``apply_chat_template``, give
    the same text on a template using every feature above, with and without tools and prompts."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(fixture_dir)
    tok.chat_template = FEATURES
    renderer = Renderer(tok)
    renderer.compiled(FEATURES)
    assert renderer.memo_problems == [] and renderer.generation_problems == []  # the audited compile ran
    assert _check_same(tok, _feature_rows()) >= 10
    text = renderer.render(_feature_rows()[0]["messages"], _feature_rows()[0]["tools"], False,
                           _feature_rows()[0]["chat_template_kwargs"], plain=True)
    for shown in ("effort=16;", "id=Beam;", "tool 2/2 bare", "call lookup {n:[1|2.5],q:'x'}", "[think:10]",
                  "<u>What is 'x'?</u>", "as a key", "|turns=5;last=What "):
        assert shown in text, shown


# --- each render's macros freed by reference counting (jinja_sandbox.render_freeing_cycles) ---------------


def _cyclic_garbage(work) -> int:
    """Objects that only the cyclic collector frees, left by ``work()``."""
    import gc

    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        work()
        return gc.collect()
    finally:
        (gc.enable if enabled else gc.disable)()


def test_a_render_leaves_nothing_for_the_cyclic_collector(reference_tokenizer):
    renderer = Renderer(reference_tokenizer)
    assert renderer.cycle_problems == []
    rows = [json.loads(json.dumps(r)) for r in bench_rows(8, seed=5)]
    assert any(r.get("tools") for r in rows)  # the tool macros (recursive ones among them) made too
    renderer.render(rows[0]["messages"], rows[0].get("tools"), False, {}, plain=True)  # (compiled, memo warm)
    assert _cyclic_garbage(lambda: [renderer.render(r["messages"], r.get("tools") or None, False,
                                                    r.get("chat_template_kwargs") or {}, plain=True)
                                    for r in rows]) == 0
    plain = renderer.compiled(reference_tokenizer.get_chat_template(None, None))
    assert _cyclic_garbage(lambda: plain.render(messages=rows[0]["messages"], tools=rows[0].get("tools"))) > 50


def test_freeing_cycles_renders_the_same_text_and_errors():
    from jinja2 import TemplateRuntimeError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from beam_sft.compat import jinja_sandbox

    environment = ImmutableSandboxedEnvironment()
    environment.globals["fail"] = lambda m: (_ for _ in ()).throw(TemplateRuntimeError(m))
    source = ("{% macro walk(n) %}{% if n %}{{ n }},{{ walk(n - 1) }}{% endif %}{% endmacro %}"
              "{% set ns = namespace(k=0) %}{% set h = given %}{{ walk(depth) }}{{ h(2) }}{% if depth > 5 %}{{ fail('deep') }}{% endif %}")
    template = environment.from_string(source)
    given = environment.from_string("{% macro g(x) %}<{{ x }}>{% endmacro %}").module.g
    for depth in (0, 3):
        assert jinja_sandbox.render_freeing_cycles(template, {"depth": depth, "given": given}) == \
            template.render(depth=depth, given=given)
    assert given(1) == "<1>"  # a macro handed in is not emptied: only the render's own
    with pytest.raises(TemplateRuntimeError, match="deep"):
        jinja_sandbox.render_freeing_cycles(template, {"depth": 9, "given": given})
    assert _cyclic_garbage(lambda: jinja_sandbox.render_freeing_cycles(template, {"depth": 4, "given": given})) == 0


def test_an_unread_render_renders_as_jinja_does(tokenizer, monkeypatch, caplog):
    import logging

    from beam_sft.compat import jinja_sandbox

    monkeypatch.setattr(jinja_sandbox, "RENDER_SOURCE", "0" * 16)
    assert "Template.render: source differs" in jinja_sandbox.render_cycle_problems()[0]
    monkeypatch.setattr(jinja_sandbox, "render_freeing_cycles", lambda *a: pytest.fail("used on an unread render"))
    with caplog.at_level(logging.WARNING):
        renderer = Renderer(tokenizer)
    assert "render freeing its macros" in caplog.text and renderer.cycle_problems
    messages = [{"role": "user", "content": "x"}]
    assert renderer.render(messages, None, False, {}, plain=True) == \
        tokenizer.apply_chat_template(messages, tokenize=False)
