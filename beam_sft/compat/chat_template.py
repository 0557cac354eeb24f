"""transformers' chat-template internals (``transformers.utils.chat_template_utils``), for the fast
encoder (``beam_sft.encode.fast``) and for verify's renderer (``beam_sft.verify.template``).

Each private symbol is listed with the parameters we call it with, per user: ``ENCODER_PRIVATE`` /
``ENCODER_PUBLIC`` for the fast encoder, ``VERIFY_PRIVATE`` for verify. ``encoder_problems()`` and
``verify_problems()`` name every one that a library upgrade removed or re-shaped; the user then
takes its slow path (the template encoder, ``apply_chat_template``), never a wrong one, and says so
in a warning (``beam_sft.compat.switched_off``). ``tests/compat/test_compat.py`` fails on any of them
by name.

Verify's compile (``oracle_compile``) is transformers' own environment with two audited changes,
both of which leave the text as it was: the sandbox's attribute answers remembered
(``jinja_sandbox.attribute_memo_class``), and a ``{% generation %}`` block compiled as its body
(``GENERATION_SOURCES``). The encoder's compile (``compile_private_template`` +
``swap_environment_class``) is a separate object with its own memo (``encode/fast/render.py``).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
from typing import Any

from beam_sft.compat import jinja_sandbox

_MODULE = "transformers.utils.chat_template_utils"

# name -> the parameters (in order) we pass; a ``**`` entry means the function must take **kwargs.
ENCODER_PRIVATE: dict[str, tuple[str, ...]] = {
    "_normalize_chat_messages": ("conversation",),
    "_plain_template_data": ("value",),
    "_alias_reasoning_fields": ("chat",),
    "_render_with_assistant_indices": ("compiled_template", "messages", "tools", "documents",
                                       "add_generation_prompt", "**"),
    "_cached_compile_jinja_template": ("chat_template",),
    "_compile_jinja_template": ("chat_template",),
}
# Public, but we rely on its keyword arguments.
ENCODER_PUBLIC: dict[str, tuple[str, ...]] = {
    "render_jinja_template": ("conversations", "tools", "documents", "chat_template",
                              "return_assistant_tokens_mask", "continue_final_message", "add_generation_prompt", "**"),
}
VERIFY_PRIVATE: dict[str, tuple[str, ...]] = {
    "_compile_jinja_template": ("chat_template",),
    "_cached_compile_jinja_template": ("chat_template",),
    "_alias_reasoning_fields": ("chat",),
}


def _module():
    return importlib.import_module(_MODULE)


def _shape(func) -> tuple[str, ...]:
    return tuple("**" if p.kind is inspect.Parameter.VAR_KEYWORD else p.name
                 for p in inspect.signature(func).parameters.values())


def _table_problems(*tables: dict[str, tuple[str, ...]]) -> list[str]:
    try:
        module = _module()
    except ImportError as exc:
        return [f"{_MODULE}: cannot import ({exc})"]
    out = []
    for table in tables:
        for name, expected in table.items():
            func = getattr(module, name, None)
            if func is None:
                out.append(f"{_MODULE}.{name}: missing")
                continue
            got = _shape(getattr(func, "__wrapped__", func))
            if got != expected:
                out.append(f"{_MODULE}.{name}: parameters {got}, expected {expected}")
    return out


def encoder_problems() -> list[str]:
    """Every internal the fast encoder needs that is missing or changed here ([] when all hold)."""
    return _table_problems(ENCODER_PRIVATE, ENCODER_PUBLIC) + jinja_sandbox.render_memo_problems()


def verify_problems() -> list[str]:
    """Every internal verify's direct render needs that is missing or changed here ([] when all hold)."""
    return _table_problems(VERIFY_PRIVATE)


# --- the fast encoder's calls -------------------------------------------------------------------

def normalize_chat_messages(messages: Any) -> list[dict]:
    return _module()._normalize_chat_messages(messages)


def plain_template_data(value: Any) -> Any:
    return _module()._plain_template_data(value)


def alias_reasoning_fields(chat: list) -> list:
    return _module()._alias_reasoning_fields(chat)


def render_with_assistant_indices(compiled, messages, tools, template_kwargs: dict) -> tuple[str, list]:
    """transformers' own render loop with the ``{% generation %}`` tracker: (text, generation spans)."""
    return _module()._render_with_assistant_indices(
        compiled_template=compiled, messages=messages, tools=tools, documents=None, add_generation_prompt=False,
        **template_kwargs)


def compile_private_template(source: str):
    """A fresh compile of the chat template (not the lru-cached one ``apply_chat_template`` shares)."""
    return _module()._cached_compile_jinja_template(source)


def shared_template(source: str):
    """The lru-cached compile ``apply_chat_template`` renders with (compiled once per process)."""
    return _module()._compile_jinja_template(source)


def swap_environment_class(compiled, make_subclass) -> Any:
    """Make ``compiled``'s Jinja environment an instance of ``make_subclass(its class)``; returns it.

    Only on a private compile (``compile_private_template``): the template transformers caches for
    ``apply_chat_template`` is never touched.
    """
    environment = compiled.environment
    environment.__class__ = make_subclass(type(environment))
    return environment


def render_jinja_template(tokenizer, messages, tools, kwargs: dict) -> tuple[str, list]:
    """Text and generation spans through transformers' public ``render_jinja_template``, as is."""
    rendered, indices = _module().render_jinja_template(
        conversations=[normalize_chat_messages(messages)], tools=tools,
        chat_template=tokenizer.get_chat_template(None, tools), return_assistant_tokens_mask=True,
        **{**tokenizer.special_tokens_map, **kwargs})
    return rendered[0], list(indices[0])


# --- verify's calls -----------------------------------------------------------------------------

# transformers' ``{% generation %}`` extension (AssistantTracker), as read: ``parse`` wraps the block in a
# call of ``_generation_support`` with the block as its caller macro, and ``_generation_support``
# returns ``caller()`` unchanged, recording offsets only while a tracker is active, which a render to
# text never has. sha256 of each method's dedented source, first 16 hex digits.
GENERATION_SOURCES: dict[str, str] = {"parse": "81ec07be73b3320f", "_generation_support": "40350392bf1b8613"}


def _source_digest(func) -> str:
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


def reserved_keywords(tokenizer) -> frozenset[str]:
    """Template kwargs the direct path cannot pass as the public path would: parameters of
    ``apply_chat_template`` or ``render_jinja_template`` (consumed or rejected there), and the names
    the compiled template is called with."""
    names = {"messages", "tools", "documents", "add_generation_prompt"}
    for func in (type(tokenizer).apply_chat_template, _module().render_jinja_template):
        names |= {p.name for p in inspect.signature(func).parameters.values()
                  if p.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)}
    return frozenset(names)


def oracle_problems() -> list[str]:
    """Why verify's compile would be transformers' shared one, or keep its generation blocks ([] when neither)."""
    if verify_problems():
        return []  # verify renders through apply_chat_template then: nothing of its compile is used
    environment = _module()._cached_compile_jinja_template("").environment
    return jinja_sandbox.attribute_memo_problems(environment) or generation_problems(environment)


def oracle_compile(source: str) -> tuple[Any, list[str], list[str]]:
    """``(compiled, memo_problems, generation_problems)``: verify's compile of ``source``.

    transformers' environment for chat templates, its own instance (from an empty template's private
    compile), with the attribute memo and, where ``generation_problems`` finds nothing, generation
    blocks as their bodies. Where the memo's audit fails, transformers' shared compile as it is."""
    module = _module()
    environment = module._cached_compile_jinja_template("").environment
    memo_problems = jinja_sandbox.attribute_memo_problems(environment)
    if memo_problems:
        return module._compile_jinja_template(source), memo_problems, []
    environment.__class__ = jinja_sandbox.attribute_memo_class(type(environment))
    generation = generation_problems(environment)
    if not generation:
        _inline_generation(environment)
    return environment.from_string(source), [], generation
