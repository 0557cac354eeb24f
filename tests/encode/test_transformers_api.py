"""Every library internal the fast path relies on is where it was, with the parameters we pass: a
transformers (or jinja2) upgrade that moves one fails here, by name, and at run time the encoder
choice falls back to the template encoder."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from beam_sft.encode.fast import transformers_api as api

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "beam_sft"


@pytest.mark.parametrize("name", sorted({**api.PRIVATE, **api.PUBLIC}))
def test_each_internal_is_there_with_its_parameters(name):
    import transformers.utils.chat_template_utils as module

    func = getattr(module, name, None)
    assert func is not None, f"transformers.utils.chat_template_utils.{name} is gone"
    expected = {**api.PRIVATE, **api.PUBLIC}[name]
    assert api._shape(inspect.unwrap(func)) == expected, f"{name} changed its parameters"


def test_jinja_internals_hold():
    assert api._jinja_problems() == []


def test_no_problems_here():
    assert api.problems() == []


def test_a_changed_internal_is_named(monkeypatch):
    import transformers.utils.chat_template_utils as module

    def reshaped(chat, extra):  # a new parameter
        return chat

    monkeypatch.setattr(module, "_alias_reasoning_fields", reshaped)
    monkeypatch.delattr(module, "_plain_template_data")
    found = api.problems()
    assert any(p.startswith("transformers.utils.chat_template_utils._alias_reasoning_fields: parameters")
               for p in found), found
    assert "transformers.utils.chat_template_utils._plain_template_data: missing" in found


def test_a_changed_internal_makes_auto_fall_back(monkeypatch, tokenizer):
    from beam_sft.encode.select import choose_encoder

    monkeypatch.setattr(api, "problems", lambda: ["transformers.utils.chat_template_utils._x: missing"])
    kind, _, section = choose_encoder("auto", tokenizer, [])
    assert kind == "template" and "_x: missing" in section["fallback_reason"]


def _private_uses(path: Path) -> list[str]:
    """Names starting with ``_`` imported from, or read as attributes of, transformers / jinja2."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("transformers", "jinja2"):
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
        if isinstance(node, ast.Attribute) and node.attr == "__class__" and isinstance(node.ctx, ast.Store):
            found.append("__class__ assignment")
    return found


def test_only_the_adapter_touches_internals():
    offenders = {}
    for path in PACKAGE_ROOT.rglob("*.py"):
        if path.name == "transformers_api.py":
            continue
        uses = _private_uses(path)
        if uses:
            offenders[str(path.relative_to(PACKAGE_ROOT))] = uses
    # train/cli.py's argparse swap belongs to the train side (issue 10); nothing in encode/ or prepare/
    assert not {k: v for k, v in offenders.items() if k.startswith(("encode", "prepare"))}, offenders


def test_every_private_call_is_in_the_checked_table():
    module_calls = {node.attr for node in ast.walk(ast.parse(inspect.getsource(api)))
                    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Call)
                    and getattr(node.value.func, "id", None) == "_module"}
    assert module_calls <= set(api.PRIVATE) | set(api.PUBLIC), module_calls - set(api.PRIVATE) - set(api.PUBLIC)
    assert set(api.PRIVATE) <= module_calls  # and nothing listed is unused


def test_sandbox_shortcuts_hold_on_the_audited_jinja():
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    assert api.shortcut_problems(ImmutableSandboxedEnvironment) == []


def test_a_changed_sandbox_turns_the_shortcuts_off(monkeypatch):
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Overriding(ImmutableSandboxedEnvironment):
        def getattr(self, obj, attribute):
            return super().getattr(obj, attribute)

    assert any("getattr overrides" in p for p in api.shortcut_problems(Overriding))
    monkeypatch.setitem(api.AUDITED_SOURCES, "jinja2.runtime.Context.call", "0" * 16)
    problems = api.shortcut_problems(ImmutableSandboxedEnvironment)
    assert any("Context.call: source differs" in p for p in problems)
    assert not api.sandbox_shortcuts_hold(ImmutableSandboxedEnvironment)
