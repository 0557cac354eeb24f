"""A faster way to run the tokenizer's own chat template: same template, same sandbox, less repeated work.

Rendering goes through transformers' compiled template (the ``ImmutableSandboxedEnvironment``, its
globals and the ``{% generation %}`` tracker), on a private copy whose environment is a subclass that
remembers two things:

- the sandbox's verdict on an attribute, which depends only on the object's type and the attribute
  name (jinja2's ``is_safe_attribute`` looks at nothing else);
- the output of a *macro call*, keyed by the macro, its arguments (plain data, by ``plain_key``, which
  tells ``1``, ``1.0`` and ``True`` apart) and every context variable the call read (recorded while
  it ran). A macro whose closure holds anything but other macros, pure filters and tests, and the
  sandbox's pure globals is never remembered, nor is a call that ran a ``{% generation %}`` block or
  an impure global (``strftime_now``, ``lipsum``), nor any call around it.

Same inputs, same path through the macro, same output: the text and the generation spans are what
``apply_chat_template`` renders. The tool declarations (a recursive TypeScript rendering of each JSON
schema, by far the dearest part of a Beam row) are then rendered once per distinct tool. The start-up
probe (``probe.py``) checks the result against ``apply_chat_template`` before a run relies on it.

Two shortcuts take the sandbox's own slow paths out of the hottest operations, with the same result:
``schema.type`` on a plain dict whose class has no such attribute goes straight to the key (the
sandbox first tries the attribute and pays for an AttributeError), and a call of a macro or of a
bound method of plain data (``schema.get``, ``text.split``) goes straight to the callable (the
sandbox checks ``unsafe_callable``/``alters_data`` flags and context-passing markers, which neither
can carry). They mirror jinja2's ``SandboxedEnvironment.getattr``/``call`` and ``Context.call`` as
audited (``beam_sft.compat.jinja_sandbox.shortcut_problems``); any other jinja2 turns them off, with
a warning naming why.
"""

from __future__ import annotations

import marshal
import re
from types import BuiltinMethodType
from typing import Any

from beam_sft.compat import chat_template, jinja_sandbox, switched_off
from beam_sft.compat.jinja_sandbox import macro_function
from beam_sft.encode.fast import native
from beam_sft.encode.template_encode import template_args, template_error

_FRAME_CELLS = frozenset({"concat", "context", "environment", "missing", "resolve", "undefined",
                          "cond_expr_undefined", "escape", "markup_join", "str_join", "Markup", "Namespace",
                          "LoopContext", "Macro", "TemplateReference", "Undefined"})
_TEST_OR_FILTER = re.compile(r"t_\d+$")
_IMPURE_FILTERS = ("random",)
_IMPURE_GLOBALS = ("strftime_now", "lipsum", "cycler", "joiner")
_MAX_MEMO = 10_000
_DICT_ATTRS = frozenset(dir(dict))
_PLAIN_OWNERS = (str, dict, list, tuple)
_FORMAT_METHODS = ("format", "format_map")
_STOP_ITERATION = "value was undefined because a callable raised a StopIteration exception"


def plain_key(value: Any) -> bytes | None:
    """A key that only an equal value of the same types, in the same order, has; None for values
    that are not plain data (Markup, Undefined, namespaces, any other object).

    ``marshal`` (format 2: no back-references, so equal values give equal bytes) takes only the
    builtin data types and rebuilds exactly what it wrote, so equal keys mean equal data, with ``1``,
    ``1.0`` and ``True`` told apart and dict order kept: a template renders both alike.

    >>> plain_key({"a": [1, 2.0, None, ("x", True)]}) == plain_key({"a": [1, 2.0, None, ("x", True)]})
    True
    >>> plain_key((1,)) == plain_key((1.0,)) or plain_key((1,)) == plain_key((True,))
    False
    >>> plain_key({"a": 1, "b": 2}) == plain_key({"b": 2, "a": 1}), plain_key({"a": object()})
    (False, None)
    """
    try:
        return marshal.dumps(value, 2)
    except (ValueError, RecursionError):
        return None


_MISSING_KEY = ("<missing>",)  # never equal to a plain_key


def _value_key(value: Any, missing: Any) -> bytes | tuple | None:
    return _MISSING_KEY if value is missing else plain_key(value)


def _memo_environment_class(base: type):
    """A subclass of transformers' sandbox class that memoises attribute checks and pure macro calls."""
    from jinja2.runtime import Context, Macro, missing

    resolve = Context.resolve_or_missing

    class MemoContext(Context):
        def resolve_or_missing(self, key):
            value = resolve(self, key)
            frames = self.environment._memo_frames
            if frames:
                value_key = _value_key(value, missing)
                for frame in frames:
                    if value_key is None:
                        frame["poisoned"] = True
                    else:
                        frame["reads"][key] = value_key
            return value

    class MemoSandbox(base):
        context_class = MemoContext

        def _memo_setup(self) -> None:
            self._memo_frames: list[dict] = []
            self._memo: dict[tuple, list[tuple[tuple, Any]]] = {}
            self._safe_attrs: dict[tuple, bool] = {}
            self._impure = {id(self.filters[name]) for name in _IMPURE_FILTERS if name in self.filters}
            self._impure |= {id(self.globals[name]) for name in _IMPURE_GLOBALS if name in self.globals}
            self._pure_globals = {id(v) for k, v in self.globals.items() if k not in _IMPURE_GLOBALS}
            self.memo_stats = {"hits": 0, "misses": 0}
            self._per_code: dict[Any, list[int]] = {}  # code -> [hits, misses]; rarely-hit macros stop memoising
            self._unmemoised: set = set()  # codes of macros that stopped memoising
            problems = jinja_sandbox.shortcut_problems(base)
            switched_off("the render shortcuts (beam_sft.encode.fast.render: getattr, _direct)", problems)
            self._shortcuts = not problems

        def getattr(self, obj, attribute):
            # A plain dict's class has no attribute of this name: the sandbox would fail on getattr,
            # then index; index at once (same value, same undefined).
            kind = type(obj)
            if kind in _PLAIN_OWNERS and self._shortcuts:
                if kind is dict and attribute not in _DICT_ATTRS:
                    try:
                        return obj[attribute]
                    except (TypeError, LookupError):
                        return self.undefined(obj=obj, name=attribute)
                # An attribute of plain data whose verdict is known and that is not str.format.
                verdict = self._safe_attrs.get((kind, attribute))
                if verdict is not None and attribute not in _FORMAT_METHODS:
                    try:
                        value = getattr(obj, attribute)
                    except AttributeError:
                        return super().getattr(obj, attribute)
                    return value if verdict else self.unsafe_undefined(obj, attribute)
            return super().getattr(obj, attribute)

        def _direct(self, context, obj, args, kwargs):
            # What SandboxedEnvironment.call then Context.call do for a callable that carries no
            # sandbox flag (a Macro, a bound method of plain data): a Macro's __call__ takes the
            # eval context first (pass_eval_context), a bound method nothing.
            if type(obj) is Macro:
                args = (context.eval_ctx, *args)
            kwargs.pop("_block_vars", None)
            kwargs.pop("_loop_vars", None)
            try:
                return obj(*args, **kwargs)
            except StopIteration:
                return context.environment.undefined(_STOP_ITERATION)

        def is_safe_attribute(self, obj, attr, value):
            key = (type(obj), attr)
            verdict = self._safe_attrs.get(key)
            if verdict is None:
                verdict = self._safe_attrs[key] = super().is_safe_attribute(obj, attr, value)
            return verdict

        def _memoizable(self, macro) -> bool:
            func = macro_function(macro)
            for name, cell in zip(func.__code__.co_freevars, func.__closure__ or (), strict=True):
                if name in _FRAME_CELLS:
                    continue
                value = cell.cell_contents
                if _TEST_OR_FILTER.match(name):
                    if id(value) in self._impure:
                        return False
                elif name.startswith("l_0_"):
                    if not (type(value) is Macro or id(value) in self._pure_globals):
                        return False
                else:
                    return False
            return True

        def _poison(self) -> None:
            for frame in self._memo_frames:
                frame["poisoned"] = True

        def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (jinja's signature)
            kind = type(__obj)
            if kind is not Macro:
                if (kind is BuiltinMethodType and __self._shortcuts and "caller" not in kwargs
                        and type(__obj.__self__) in _PLAIN_OWNERS and __obj.__name__ not in _FORMAT_METHODS):
                    return __self._direct(__context, __obj, args, kwargs)  # pure: nothing to poison
                if "caller" in kwargs or id(__obj) in __self._impure or not __self._is_tracked_pure(__obj):
                    __self._poison()
                return super().call(__context, __obj, *args, **kwargs)
            if not __self._memo_frames and macro_function(__obj).__code__ in __self._unmemoised and "caller" not in kwargs:
                # No enclosing memoised call to keep honest and a macro whose calls never repeat.
                return (__self._direct(__context, __obj, args, kwargs) if __self._shortcuts
                        else super().call(__context, __obj, *args, **kwargs))
            plain_kwargs = {k: v for k, v in kwargs.items() if k not in ("_loop_vars", "_block_vars")}
            arguments = plain_key((args, sorted(plain_kwargs.items())))
            if "caller" in plain_kwargs or arguments is None or not __self._memoizable(__obj):
                __self._poison()
                return super().call(__context, __obj, *args, **kwargs)
            code = macro_function(__obj).__code__
            counts = __self._per_code.setdefault(code, [0, 0])
            if counts[1] > 256 and counts[0] * 16 < counts[1]:  # unique arguments every time: not worth it
                __self._unmemoised.add(code)
                return super().call(__context, __obj, *args, **kwargs)
            key = (code, arguments)
            for reads, output in __self._memo.get(key, ()):
                if all(_value_key(__context.resolve_or_missing(name), missing) == value for name, value in reads):
                    __self.memo_stats["hits"] += 1
                    counts[0] += 1
                    return output
            frame = {"reads": {}, "poisoned": False}
            __self._memo_frames.append(frame)
            try:
                output = super().call(__context, __obj, *args, **kwargs)
            finally:
                __self._memo_frames.pop()
            if frame["poisoned"]:
                __self._poison()
            elif isinstance(output, str):
                __self.memo_stats["misses"] += 1
                counts[1] += 1
                if len(__self._memo) < _MAX_MEMO:  # full: keep what came first (tool declarations)
                    __self._memo.setdefault(key, []).append((tuple(frame["reads"].items()), output))
            return output

        def _is_tracked_pure(self, obj) -> bool:
            # Bound methods of plain data (dict.get, str.split, ...) and the sandbox's pure globals.
            owner = getattr(obj, "__self__", None)
            if owner is not None and type(owner) in (str, dict, list, tuple):
                return True
            return id(obj) in self._pure_globals

    return MemoSandbox


SHARED_DECLINES = 64  # declined rows rendered without the memo before it is compiled


class FastRenderer:
    """Render BeamRows exactly like ``render_jinja_template`` (text and generation spans), faster."""

    def __init__(self, tokenizer, *, native: bool = True):
        self.tokenizer = tokenizer
        self.special_tokens_map = dict(tokenizer.special_tokens_map)
        self._compiled: dict[str, Any] = {}
        self.native = native
        self.native_stats = {"rows": 0, "declined": 0}

    def _template(self, source: str):
        compiled = self._compiled.get(source)
        if compiled is None:
            # A fresh compile, so the shared (lru-cached) template apply_chat_template uses is untouched.
            compiled = chat_template.compile_private_template(source)
            environment = chat_template.swap_environment_class(compiled, _memo_environment_class)
            environment._memo_setup()
            self._compiled[source] = compiled
        return compiled

    @property
    def memo_stats(self) -> dict[str, int]:
        totals = {"hits": 0, "misses": 0}
        for compiled in self._compiled.values():
            for key, value in compiled.environment.memo_stats.items():
                totals[key] += value
        return totals

    def render(self, row: dict, *, plain: bool = False) -> tuple[str, list[tuple[int, int]]]:
        """Text and generation spans. ``plain=True`` promises JSON-decoded data (skips a defensive copy)."""
        messages, tools, kwargs = template_args(row)
        source = self.tokenizer.get_chat_template(None, tools)
        use_native = self.native and native.supports(source)
        # A template the native renderer takes is compiled only when a row falls back to Jinja (a
        # compile is 0.05 s of every start); any other is compiled here, its errors not a row's.
        compiled = None if use_native else self._template(source)
        try:
            # The steps of apply_chat_template -> render_jinja_template, in order.
            if plain:  # what _normalize_chat_messages does to JSON data: copy, dropping None values
                chat = [{k: v for k, v in m.items() if v is not None} if type(m) is dict else m for m in messages]
                if any(type(m) is not dict for m in chat):
                    chat = chat_template.normalize_chat_messages(messages)
            else:
                chat = chat_template.normalize_chat_messages(messages)
            template_kwargs = {**self.special_tokens_map, **kwargs}
            for tool in tools or ():
                if not isinstance(tool, dict):
                    raise ValueError("Tools should either be a JSON schema, or a callable function with type hints")
            if not plain:
                tools = chat_template.plain_template_data(tools)
                template_kwargs = chat_template.plain_template_data(template_kwargs)
                chat = chat_template.plain_template_data(chat)
            chat = chat_template.alias_reasoning_fields(chat)
            if use_native:
                rendered = native.render(chat, tools, template_kwargs, self.special_tokens_map)
                if rendered is not None:
                    self.native_stats["rows"] += 1
                    return rendered
                self.native_stats["declined"] += 1
                # The few rows native declines (the probe's refused rows, an odd type) render with the
                # compile apply_chat_template already made; many pay for the memo's own compile.
                few = self.native_stats["declined"] <= SHARED_DECLINES and source not in self._compiled
                compiled = chat_template.shared_template(source) if few else self._template(source)
            text, spans = chat_template.render_with_assistant_indices(compiled, chat, tools, template_kwargs)
        except Exception as exc:  # a template error is a property of the row: route it to rejects
            raise template_error(exc) from exc
        return text, list(spans)
