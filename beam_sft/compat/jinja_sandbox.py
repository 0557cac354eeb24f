"""jinja2's internals: what the encoder's render memo (``encode/fast/render.py``) and verify's
attribute memo (``chat_template.oracle_compile``) rely on in the sandbox, each with its audit.

- ``render_memo_problems``: the names the encoder's memo reads (``Context.resolve_or_missing``,
  ``Macro._func``, the sandbox's ``call``/``is_safe_attribute`` signatures); any missing and the
  fast encoder is not used (``chat_template.encoder_problems``).
- ``shortcut_problems``: the jinja2 functions the render shortcuts stand in for, by the digest of
  their audited source; any difference turns the shortcuts off (the sandbox's own paths run).
- ``attribute_memo_problems`` / ``attribute_memo_class``: verify's memo of ``is_safe_attribute``
  answers and its plain-dict lookup; any difference and verify uses transformers' compile as it is.
- ``macro_function``: a macro's Python function (``Macro._func``), the memo's key.
"""

from __future__ import annotations

import hashlib
import inspect
from typing import Any


def _shape(func) -> tuple[str, ...]:
    return tuple("**" if p.kind is inspect.Parameter.VAR_KEYWORD else p.name
                 for p in inspect.signature(func).parameters.values())


def macro_function(macro) -> Any:
    """The Python function a compiled macro runs (``Macro._func``: its code keys the render memo)."""
    return macro._func


def render_memo_problems() -> list[str]:
    """What the render memo relies on in jinja2 (``encode/fast/render.py``); [] when all hold."""
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


MEMO_JINJA = "3.1."  # the jinja2 series whose is_safe_attribute was read (pure in the memo's key)


def attribute_memo_problems(environment) -> list[str]:
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


# Every attribute a dict has: for an object of exactly type dict (no instance attributes, no
# __getattr__), ``getattr(obj, name)`` fails exactly when ``name`` is not among them.
DICT_ATTRIBUTES = frozenset(dir(dict))


def attribute_memo_class(base: type) -> type:
    """``base`` (a sandbox class) with verify's attribute memo (``_MemoSandbox``)."""
    # One memo for the class: the answer depends on the key alone (the base class's rule, unmodified:
    # ``attribute_memo_problems``), not on which environment asks.
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


# ``Template.render`` as read (jinja2 3.1.6), by the SHA-256 of its source: ``render_freeing_cycles``
# does what it does (a new context, the root render function joined by ``concat``, an error through
# ``handle_exception``), then frees the render's macros. Another body and it renders as jinja2 does.
RENDER_SOURCE = "c33dd2c3a2936cc0"


def render_cycle_problems() -> list[str]:
    """Why ``render_freeing_cycles`` may not stand in for ``Template.render`` here ([] when it may)."""
    from jinja2.environment import Template
    from jinja2.runtime import Macro
    from jinja2.sandbox import SandboxedEnvironment

    out = []
    try:
        digest = hashlib.sha256(inspect.getsource(Template.render).encode()).hexdigest()[:16]
    except (OSError, TypeError):
        digest = "unreadable"
    if digest != RENDER_SOURCE:
        out.append(f"jinja2.environment.Template.render: source differs from the audited one ({digest})")
    macro = SandboxedEnvironment().from_string("{% macro f(x) %}{{ x }}{% endmacro %}").module.f
    if type(macro) is not Macro or not callable(getattr(macro, "_func", None)):
        out.append("jinja2.runtime.Macro._func: missing (the macros' functions whose closures are emptied)")
    return out


def render_freeing_cycles(template, variables: dict) -> str:
    """``template.render(variables)``'s text; then the reference cycles its macros made are broken.

    Each ``{% macro %}`` of a template is made anew by every render: a ``Macro`` whose function's
    closure holds the render's context and the macros (itself too, for a recursive one), so every
    render leaves some eighty objects that only the cyclic collector frees (a tenth of verify's CPU
    on real text: the collections, not the rows). Once the text is joined nothing of the render is
    used again: emptying the closure cells of the macros this render made (the ``Macro`` values of
    its context's ``vars``, which hold the template's top-level assignments; what it was handed, the
    variables and the globals, is the context's ``parent`` and is left as it is) lets reference
    counting free all of it at once. The text is the template's, computed as before.
    Only where ``render_cycle_problems()`` is empty (the caller checks once)."""
    from jinja2.runtime import Macro

    environment = template.environment
    if environment.is_async:  # (the audited render's other branch)
        return template.render(variables)
    context = template.new_context(dict(variables))
    try:
        return environment.concat(template.root_render_func(context))
    except Exception:
        environment.handle_exception()
    finally:
        given = {id(v) for v in context.parent.values()}  # what it was handed: the variables, the globals
        for value in list(context.vars.values()):
            # made by this render (not handed in): nothing outside it can still reach it
            if type(value) is Macro and id(value) not in given:
                for cell in getattr(value._func, "__closure__", None) or ():
                    cell.cell_contents = None
        context.vars.clear()
