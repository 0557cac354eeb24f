"""The one place the fast path touches library internals (transformers' chat-template helpers and
the Jinja sandbox the template runs in). Nothing else in beam_sft imports a private name.

Each private symbol is listed in ``PRIVATE`` with the parameters we call it with; ``problems()``
names every one that a library upgrade removed or re-shaped, and ``tests/encode/test_transformers_api.py``
fails on it by name. At run time the encoder choice calls ``problems()`` first and falls back to the
template encoder (slow, never wrong) when the list is not empty.
"""

from __future__ import annotations

import inspect
from typing import Any

_MODULE = "transformers.utils.chat_template_utils"

# name -> the parameters (in order) we pass; a ``**`` entry means the function must take **kwargs.
PRIVATE: dict[str, tuple[str, ...]] = {
    "_normalize_chat_messages": ("conversation",),
    "_plain_template_data": ("value",),
    "_alias_reasoning_fields": ("chat",),
    "_render_with_assistant_indices": ("compiled_template", "messages", "tools", "documents",
                                       "add_generation_prompt", "**"),
    "_cached_compile_jinja_template": ("chat_template",),
}
# Public, but we rely on its keyword arguments.
PUBLIC: dict[str, tuple[str, ...]] = {
    "render_jinja_template": ("conversations", "tools", "documents", "chat_template",
                              "return_assistant_tokens_mask", "continue_final_message", "add_generation_prompt", "**"),
}


def _module():
    import importlib

    return importlib.import_module(_MODULE)


def _shape(func) -> tuple[str, ...]:
    out = []
    for parameter in inspect.signature(func).parameters.values():
        out.append("**" if parameter.kind is inspect.Parameter.VAR_KEYWORD else parameter.name)
    return tuple(out)


def problems() -> list[str]:
    """Every internal the fast path needs that is missing or changed here ([] when all hold)."""
    out = []
    try:
        module = _module()
    except ImportError as exc:
        return [f"{_MODULE}: cannot import ({exc})"]
    for table in (PRIVATE, PUBLIC):
        for name, expected in table.items():
            func = getattr(module, name, None)
            if func is None:
                out.append(f"{_MODULE}.{name}: missing")
                continue
            got = _shape(getattr(func, "__wrapped__", func))
            if got != expected:
                out.append(f"{_MODULE}.{name}: parameters {got}, expected {expected}")
    out.extend(_jinja_problems())
    return out


def _jinja_problems() -> list[str]:
    """What the render memo relies on in jinja2 (``render.py``)."""
    out = []
    from jinja2.runtime import Context, Macro
    from jinja2.sandbox import SandboxedEnvironment

    if not callable(getattr(Context, "resolve_or_missing", None)):
        out.append("jinja2.runtime.Context.resolve_or_missing: missing")
    macro = SandboxedEnvironment().from_string("{% macro f(x) %}{{ x }}{% endmacro %}").module.f
    if type(macro) is not Macro or not callable(getattr(macro, "_func", None)):
        out.append("jinja2.runtime.Macro._func: missing (the memo keys macro calls by their function)")
    if _shape(SandboxedEnvironment.call)[:3] != ("_SandboxedEnvironment__self", "_SandboxedEnvironment__context",
                                                   "_SandboxedEnvironment__obj"):
        out.append(f"jinja2.sandbox.SandboxedEnvironment.call: parameters {_shape(SandboxedEnvironment.call)}")
    if _shape(SandboxedEnvironment.is_safe_attribute) != ("self", "obj", "attr", "value"):
        out.append("jinja2.sandbox.SandboxedEnvironment.is_safe_attribute: parameters "
                   f"{_shape(SandboxedEnvironment.is_safe_attribute)}")
    return out


# The jinja2 functions the render shortcuts (``render.py``: ``getattr``, ``_direct``) stand in for,
# by the SHA-256 of their source as audited (jinja2 3.1.6). Another body may do something the
# shortcuts do not, so any difference turns them off (the sandbox's own paths run; never wrong).
AUDITED_SOURCES: dict[str, str] = {
    "jinja2.sandbox.SandboxedEnvironment.getattr": "d5022b42a9425c44",
    "jinja2.sandbox.SandboxedEnvironment.call": "dec31de35df6b71a",
    "jinja2.sandbox.SandboxedEnvironment.is_safe_callable": "d961e1d6096d4ea2",
    "jinja2.runtime.Context.call": "a27b379ba8cc9393",
    "jinja2.utils._PassArg.from_obj": "3b203f19a15bee16",
}


def _audited_functions() -> dict[str, Any]:
    from jinja2 import runtime, sandbox, utils

    pass_arg = getattr(utils, "_PassArg")  # noqa: B009 (a private class, read here only)
    return {
        "jinja2.sandbox.SandboxedEnvironment.getattr": sandbox.SandboxedEnvironment.getattr,
        "jinja2.sandbox.SandboxedEnvironment.call": sandbox.SandboxedEnvironment.call,
        "jinja2.sandbox.SandboxedEnvironment.is_safe_callable": sandbox.SandboxedEnvironment.is_safe_callable,
        "jinja2.runtime.Context.call": runtime.Context.call,
        "jinja2.utils._PassArg.from_obj": pass_arg.from_obj,
    }


def shortcut_problems(environment_class: type | None = None) -> list[str]:
    """Why the render shortcuts may not stand in for the sandbox here ([] when they may)."""
    import hashlib

    from jinja2 import runtime, sandbox, utils

    out = []
    for name, func in _audited_functions().items():
        try:
            digest = hashlib.sha256(inspect.getsource(func).encode()).hexdigest()[:16]
        except (OSError, TypeError):
            digest = "unreadable"
        if digest != AUDITED_SOURCES[name]:
            out.append(f"{name}: source differs from the audited one ({digest})")
    pass_arg = getattr(utils, "_PassArg")  # noqa: B009
    if pass_arg.from_obj(runtime.Macro.__call__) is not pass_arg.eval_context:
        out.append("jinja2.runtime.Macro.__call__ no longer takes the eval context")
    if environment_class is not None:
        for attr in ("getattr", "call", "is_safe_callable"):
            if getattr(environment_class, attr) is not getattr(sandbox.SandboxedEnvironment, attr):
                out.append(f"{environment_class.__name__}.{attr} overrides the sandbox's")
        if environment_class.context_class is not runtime.Context:
            out.append(f"{environment_class.__name__}.context_class is not jinja2's Context")
    return out


def sandbox_shortcuts_hold(environment_class: type | None = None) -> bool:
    return not shortcut_problems(environment_class)


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
