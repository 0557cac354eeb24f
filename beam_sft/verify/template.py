"""The chat template as verify renders it: what ``tokenizer.apply_chat_template(..., tokenize=False)``
returns, without that call's per-call overhead, and the one place verify touches transformers'
chat-template internals.

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
reads a plain dict's items directly (``_MemoSandbox``). Every answer is jinja2's own, computed once
per key; the template, its extensions, filters and globals are transformers'. Only with the jinja2
series this was read for (3.1) and unmodified ``is_safe_attribute``/``getattr``; otherwise the shared
compile is used as it is. In that compile a ``{% generation %}`` block is its body in a scope of its
own rather than a macro handed to transformers' tracker, which returns the macro's output unchanged
when rendering to text (``GENERATION_SOURCES``: the tracker's source as read, else no change).

Anything off that path goes through ``apply_chat_template`` itself: a row whose values did not come
from ``json.loads`` (``plain=False``), an empty conversation, or template kwargs that collide with a
parameter of ``apply_chat_template``/``render_jinja_template`` (which those functions would consume
or reject).

``problems()`` names every internal this relies on that an upgrade removed or re-shaped;
``tests/verify/test_template.py`` fails on it by name, and proves the output identical to
``apply_chat_template`` on the reference template and the fixture. ``Renderer`` checks
``problems()`` once and falls back to ``apply_chat_template`` for every row when it is not empty.
Nothing here is shared with the encoder (which has its own adapter and its own compiled template).
"""

from __future__ import annotations

import inspect

_MODULE = "transformers.utils.chat_template_utils"

# name -> the parameters (in order) we pass; ``**`` means the function must take **kwargs.
PRIVATE: dict[str, tuple[str, ...]] = {
    "_compile_jinja_template": ("chat_template",),
    "_cached_compile_jinja_template": ("chat_template",),
    "_alias_reasoning_fields": ("chat",),
}
MEMO_JINJA = "3.1."  # the jinja2 series whose is_safe_attribute was read (pure in the memo's key)


def _module():
    import importlib

    return importlib.import_module(_MODULE)


def _shape(func) -> tuple[str, ...]:
    return tuple("**" if p.kind is inspect.Parameter.VAR_KEYWORD else p.name
                 for p in inspect.signature(func).parameters.values())


def problems() -> list[str]:
    """Every internal the direct path needs that is missing or changed here ([] when all hold)."""
    try:
        module = _module()
    except ImportError as exc:
        return [f"{_MODULE}: cannot import ({exc})"]
    out = []
    for name, expected in PRIVATE.items():
        func = getattr(module, name, None)
        if func is None:
            out.append(f"{_MODULE}.{name}: missing")
            continue
        got = _shape(getattr(func, "__wrapped__", func))
        if got != expected:
            out.append(f"{_MODULE}.{name}: parameters {got}, expected {expected}")
    return out


def memo_problems(environment) -> list[str]:
    """Why ``environment``'s attribute checks cannot be memoised ([] when they can)."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    out = []
    if not jinja2.__version__.startswith(MEMO_JINJA):
        out.append(f"jinja2 {jinja2.__version__} is not {MEMO_JINJA}x")
    for name in ("is_safe_attribute", "getattr"):
        if getattr(type(environment), name) is not getattr(ImmutableSandboxedEnvironment, name):
            out.append(f"{type(environment).__name__}.{name} is not jinja2's ImmutableSandboxedEnvironment's")
    return out


# transformers' ``{% generation %}`` extension (AssistantTracker), as read: ``parse`` wraps the block in a
# call of ``_generation_support`` with the block as its caller macro, and ``_generation_support``
# returns ``caller()`` unchanged, recording offsets only while a tracker is active, which a render to
# text never has. sha256 of each method's dedented source, first 16 hex digits.
GENERATION_SOURCES: dict[str, str] = {"parse": "81ec07be73b3320f", "_generation_support": "40350392bf1b8613"}


def _source_digest(func) -> str:
    import hashlib

    return hashlib.sha256(inspect.cleandoc(inspect.getsource(func)).encode()).hexdigest()[:16]


def _generation_extension(environment):
    found = [e for e in environment.extensions.values() if "generation" in getattr(e, "tags", ())]
    return found[0] if len(found) == 1 else None


def generation_problems(environment) -> list[str]:
    """Why ``environment``'s generation blocks cannot compile as their bodies ([] when they can)."""
    extension = _generation_extension(environment)
    if extension is None:
        return ["no single extension of the generation tag"]
    out = []
    for name, digest in GENERATION_SOURCES.items():
        try:
            got = _source_digest(getattr(type(extension), name))
        except (AttributeError, OSError, TypeError) as exc:
            out.append(f"{type(extension).__name__}.{name}: {exc}")
            continue
        if got != digest:
            out.append(f"{type(extension).__name__}.{name}: source {got}, read {digest}")
    return out


def _inline_generation(environment) -> None:
    """Compile ``{% generation %}BODY{% endgeneration %}`` as BODY in a scope of its own (what the
    caller macro gave it: its assignments stay inside), without the macro and the sandboxed call of
    ``_generation_support`` per assistant turn, a tenth of a row's render. Same text, since that call
    returns the body's output unchanged (``GENERATION_SOURCES``); the tags lex as before."""
    import jinja2.nodes

    extension = _generation_extension(environment)

    class _PlainGeneration(type(extension)):
        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.Scope(body).set_lineno(lineno)

    extension.__class__ = _PlainGeneration


# Every attribute a dict has: for an object of exactly type dict (no instance attributes, no
# __getattr__), ``getattr(obj, name)`` fails exactly when ``name`` is not among them.
DICT_ATTRIBUTES = frozenset(dir(dict))


def _memo_class(base: type) -> type:
    # One memo for the class: the answer depends on the key alone (the base class's rule, unmodified:
    # ``memo_problems``), not on which environment asks.
    memo: dict[tuple, bool] = {}

    class _MemoSandbox(base):
        """``base`` whose is_safe_attribute answers are remembered per (object type, name, value type),
        and whose ``message.content`` on a plain dict goes straight to the item: jinja2 first tries
        ``getattr`` and reads the item when that raises AttributeError, which for a dict it does for
        every name but a dict method's (``DICT_ATTRIBUTES``); the raise is most of such a lookup's
        cost, and a row's template reads some forty of them."""

        def getattr(self, obj, attribute):
            if type(obj) is dict and type(attribute) is str and attribute not in DICT_ATTRIBUTES:
                try:
                    return obj[attribute]
                except KeyError:
                    return self.undefined(obj=obj, name=attribute)
            return base.getattr(self, obj, attribute)

        safe_attribute_answers = memo

        def is_safe_attribute(self, obj, attr, value) -> bool:
            key = (type(obj), attr, type(value))
            found = memo.get(key)
            if found is None:
                found = memo[key] = bool(base.is_safe_attribute(self, obj, attr, value))
            return found

    return _MemoSandbox


def _reserved_keywords(tokenizer) -> frozenset[str]:
    """Template kwargs the direct path cannot pass as the public path would: parameters of
    ``apply_chat_template`` or ``render_jinja_template`` (consumed or rejected there), and the names
    the compiled template is called with."""
    names = {"messages", "tools", "documents", "add_generation_prompt"}
    for func in (type(tokenizer).apply_chat_template, _module().render_jinja_template):
        names |= {p.name for p in inspect.signature(func).parameters.values()
                  if p.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)}
    return frozenset(names)


class Renderer:
    """``render(messages, tools, add_generation_prompt, kwargs, plain=...)``: the chat template's text,
    equal to ``tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=...,
    tokenize=False, **kwargs)`` (module docstring)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.problems = problems()
        self.direct = not self.problems
        self.memo_problems: list[str] = []
        self.generation_problems: list[str] = []
        self._compiled: dict[str, object] = {}
        if self.direct:
            module = _module()
            self._alias = module._alias_reasoning_fields
            self._reserved = _reserved_keywords(tokenizer)
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
            module = _module()
            # transformers' environment for chat templates, its own (from an empty template's compile)
            environment = module._cached_compile_jinja_template("").environment
            self.memo_problems = memo_problems(environment)
            if self.memo_problems:
                found = module._compile_jinja_template(source)
            else:
                environment.__class__ = _memo_class(type(environment))
                self.generation_problems = generation_problems(environment)
                if not self.generation_problems:
                    _inline_generation(environment)
                found = environment.from_string(source)
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
        return compiled.render(messages=chat, tools=tools, documents=None, add_generation_prompt=add_generation_prompt,
                               **{**tokenizer.special_tokens_map, **kwargs})

