"""The chat template as verify renders it: what ``tokenizer.apply_chat_template(..., tokenize=False)``
returns, without that call's per-call overhead. The transformers and jinja2 internals it uses are
fenced, with their audits, in ``beam_sft.compat`` (``chat_template.oracle_compile``,
``jinja_sandbox.attribute_memo_class``).

``apply_chat_template`` spends about a fifth of a row's render outside the template: it rebuilds the
whole conversation (message objects to dicts, then every value through ``_plain_template_data``,
which exists to strip rich objects such as images and tensors that a sandboxed template must not
see) before handing it to the compiled template. A row verify reads is ``json.loads`` of its row
column, so every value is already a plain JSON value and that rebuild changes nothing; the steps
that do change what the template sees are kept, in transformers' order: drop keys whose value is
None, alias the reasoning fields (``_alias_reasoning_fields``), and pass the tokenizer's special
tokens under the row's template kwargs. The template itself is transformers' own compiled,
sandboxed template (``_compile_jinja_template``, the one ``apply_chat_template`` uses), so what the
template computes is the oracle's by construction.

Rendering itself spends about a quarter of its time in the sandbox deciding, attribute by attribute,
whether a template may read it (``is_safe_attribute``), though the answer depends only on the type of
the object, the attribute's name (and, to be safe, the type of the value), and in raising the
AttributeError that sends ``message.content`` on a dict to its item: verify renders with its own
compile of the template (``_cached_compile_jinja_template``: not the lru-cached one that
``apply_chat_template``, or anyone else, shares) whose environment remembers those answers and
reads a plain dict's items directly (``jinja_sandbox._MemoSandbox``). Every answer is jinja2's own, computed once
per key; the template, its extensions, filters and globals are transformers'. Only with the jinja2
series this was read for (3.1) and unmodified ``is_safe_attribute``/``getattr``; otherwise the shared
compile is used as it is. In that compile a ``{% generation %}`` block is its body in a scope of its
own rather than a macro handed to transformers' tracker, which returns the macro's output unchanged
when rendering to text (``chat_template.GENERATION_SOURCES``: the tracker's source as read, else no change).

Each render's macros are freed as it ends (``jinja_sandbox.render_freeing_cycles``: their closures,
which hold the render's context, emptied once the text is joined), not left in reference cycles for
the collector, which walked some eighty objects a row; where ``Template.render`` is not the source
that was read, jinja2's own render runs.

Anything off that path goes through ``apply_chat_template`` itself: a row whose values did not come
from ``json.loads`` (``plain=False``), an empty conversation, or template kwargs that collide with a
parameter of ``apply_chat_template``/``render_jinja_template`` (which those functions would consume
or reject).

``chat_template.verify_problems()`` names every internal this relies on that an upgrade removed or
re-shaped; ``Renderer`` checks it once and, when it is not empty, renders every row through
``apply_chat_template`` and says so in a warning (as it does when the memo or the generation
inlining is turned off). ``tests/verify/test_template.py`` proves the output identical to
``apply_chat_template`` on the reference template, the fixture and a template using every Jinja
feature a chat template uses. Why this is still an oracle independent of the encoder: verify imports
nothing of ``beam_sft.encode``; its compile is its own object (not the encoder's, not the one
``apply_chat_template`` caches), it remembers no macro output (only the sandbox's yes/no answers,
which depend on the key alone), and every text it renders is the template's own computation.
"""

from __future__ import annotations

from beam_sft.compat import chat_template, jinja_sandbox, switched_off


class Renderer:
    """``render(messages, tools, add_generation_prompt, kwargs, plain=...)``: the chat template's text,
    equal to ``tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=...,
    tokenize=False, **kwargs)`` (module docstring)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.problems = chat_template.verify_problems()
        switched_off("verify's direct render (beam_sft.verify.template.Renderer; every row through "
                     "apply_chat_template)", self.problems)
        self.direct = not self.problems
        self.memo_problems: list[str] = []
        self.generation_problems: list[str] = []
        self._compiled: dict[str, object] = {}
        # Each render's macros freed at once by reference counting, not left to the cyclic collector
        # (``jinja_sandbox.render_freeing_cycles``; the text is the same).
        self.cycle_problems = jinja_sandbox.render_cycle_problems() if self.direct else []
        switched_off("verify's render freeing its macros (beam_sft.compat.jinja_sandbox.render_freeing_cycles)",
                     self.cycle_problems)
        if self.direct:
            self._alias = chat_template.alias_reasoning_fields
            self._reserved = chat_template.reserved_keywords(tokenizer)
            # Compile now, so that worker processes forked after this inherit the compiled template.
            try:
                self.compiled(tokenizer.get_chat_template(None, None))
            except Exception:  # noqa: BLE001 (no template, or one that does not compile: every row says so)
                pass

    def compiled(self, source: str):
        """The compiled template for ``source``: verify's own compile (transformers' environment, with
        the memo and, where ``generation_problems`` finds nothing, generation blocks as their
        bodies), or the shared one."""
        found = self._compiled.get(source)
        if found is None:
            found, self.memo_problems, self.generation_problems = chat_template.oracle_compile(source)
            switched_off("verify's attribute memo (beam_sft.compat.jinja_sandbox.attribute_memo_class)",
                         self.memo_problems)
            switched_off("verify's generation blocks as their bodies (beam_sft.compat.chat_template)",
                         self.generation_problems)
            self._compiled[source] = found
        return found

    def public(self, messages: list, tools: list | None, add_generation_prompt: bool, kwargs: dict) -> str:
        return self.tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=add_generation_prompt,
                                                  tokenize=False, **kwargs)

    def render(self, messages: list, tools: list | None, add_generation_prompt: bool, kwargs: dict, *,
               plain: bool = False) -> str:
        """``plain``: every value of ``messages``, ``tools`` and ``kwargs`` is a plain JSON value (the
        caller read them with ``json.loads``); otherwise the public path renders."""
        if not (plain and self.direct and messages and isinstance(messages, list)
                and all(type(m) is dict for m in messages)
                and (tools is None or (type(tools) is list and all(type(t) is dict for t in tools)))
                and type(kwargs) is dict and not (kwargs.keys() & self._reserved)):
            return self.public(messages, tools, add_generation_prompt, kwargs)
        tokenizer = self.tokenizer
        compiled = self.compiled(tokenizer.get_chat_template(None, tools))
        # transformers drops None values; a message holding none (``None in`` is one C-level scan,
        # and an equality match can only over-copy) is passed as it is, not copied.
        chat = self._alias([{k: v for k, v in m.items() if v is not None} if None in m.values() else m
                            for m in messages])
        variables = {**tokenizer.special_tokens_map, **kwargs, "messages": chat, "tools": tools, "documents": None,
                     "add_generation_prompt": add_generation_prompt}
        if self.cycle_problems:
            return compiled.render(variables)
        return jinja_sandbox.render_freeing_cycles(compiled, variables)

