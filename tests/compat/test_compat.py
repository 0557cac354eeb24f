"""``beam_sft.compat``: every library internal beam_sft relies on is where it was, with the
parameters we pass; a library upgrade that moves one fails here, by name; at run time its user takes
the slow path and says so in a warning; ``beam-sft check-tokenizer`` prints the audit; and no module
outside ``beam_sft/compat/`` touches a library's private names."""

from __future__ import annotations

import ast
import inspect
import logging
from pathlib import Path

import pytest

import beam_sft.compat
from beam_sft.compat import chat_template as api
from beam_sft.compat import jinja_sandbox

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "beam_sft"
LIBRARIES = ("transformers", "jinja2", "accelerate", "torch", "deepspeed", "trl", "datasets", "tokenizers", "peft")


@pytest.mark.parametrize("name", sorted({**api.ENCODER_PRIVATE, **api.ENCODER_PUBLIC, **api.VERIFY_PRIVATE}))
def test_each_internal_is_there_with_its_parameters(name):
    import transformers.utils.chat_template_utils as module

    func = getattr(module, name, None)
    assert func is not None, f"transformers.utils.chat_template_utils.{name} is gone"
    expected = {**api.ENCODER_PRIVATE, **api.ENCODER_PUBLIC, **api.VERIFY_PRIVATE}[name]
    assert api._shape(inspect.unwrap(func)) == expected, f"{name} changed its parameters"


def test_the_one_audit_finds_nothing_here():
    found = beam_sft.compat.problems()
    assert found and all(problems == [] for problems in found.values()), found


def test_a_changed_internal_is_named(monkeypatch):
    import transformers.utils.chat_template_utils as module

    def reshaped(chat, extra):  # a new parameter
        return chat

    monkeypatch.setattr(module, "_alias_reasoning_fields", reshaped)
    monkeypatch.delattr(module, "_plain_template_data")
    found = api.encoder_problems()
    assert any(p.startswith("transformers.utils.chat_template_utils._alias_reasoning_fields: parameters")
               for p in found), found
    assert "transformers.utils.chat_template_utils._plain_template_data: missing" in found
    audit = beam_sft.compat.problems()
    assert audit["fast encoder (beam_sft.encode.fast)"] == found
    assert any("_alias_reasoning_fields" in p for p in audit["verify's direct render (verify/template.py)"])


def test_a_changed_internal_makes_auto_fall_back_loudly(monkeypatch, tokenizer, caplog):
    from beam_sft.encode.select import choose_encoder

    monkeypatch.setattr(api, "encoder_problems", lambda: ["transformers.utils.chat_template_utils._x: missing"])
    with caplog.at_level(logging.WARNING):
        kind, _, section = choose_encoder("auto", tokenizer, [])
    assert kind == "template" and "_x: missing" in section["fallback_reason"]
    assert any("falling back to the template encoder" in r.getMessage() and "_x: missing" in r.getMessage()
               for r in caplog.records)


def test_switched_off_warns_once_naming_what_and_why(caplog):
    with caplog.at_level(logging.WARNING, logger="beam_sft.compat"):
        beam_sft.compat.switched_off("the test's fast path (tests.compat)", ["lib.f: source differs"])
        beam_sft.compat.switched_off("the test's fast path (tests.compat)", ["lib.f: source differs"])
        beam_sft.compat.switched_off("the test's fast path (tests.compat)", [])
    said = [r.getMessage() for r in caplog.records if "tests.compat" in r.getMessage()]
    assert said == ["the test's fast path (tests.compat) is off, its slow path runs instead: lib.f: source differs"]


def test_a_changed_jinja_turns_the_render_shortcuts_off_loudly(monkeypatch, tokenizer, caplog):
    from beam_sft.encode.fast.render import FastRenderer

    monkeypatch.setitem(jinja_sandbox.AUDITED_SOURCES, "jinja2.runtime.Context.call", "1" * 16)
    with caplog.at_level(logging.WARNING, logger="beam_sft.compat"):
        renderer = FastRenderer(tokenizer, native=False)
        environment = renderer._template(tokenizer.chat_template).environment
    assert not environment._shortcuts
    assert any("beam_sft.encode.fast.render" in r.getMessage() and "Context.call: source differs" in r.getMessage()
               for r in caplog.records)


def test_a_moved_internal_sends_verify_through_apply_chat_template_loudly(monkeypatch, tokenizer, caplog):
    from beam_sft.verify.template import Renderer

    monkeypatch.delattr(api._module(), "_compile_jinja_template")
    with caplog.at_level(logging.WARNING, logger="beam_sft.compat"):
        renderer = Renderer(tokenizer)
    assert not renderer.direct
    assert any("beam_sft.verify.template.Renderer" in r.getMessage() and "_compile_jinja_template: missing"
               in r.getMessage() for r in caplog.records)


def test_check_tokenizer_prints_the_audit(fixture_dir, capsys, monkeypatch):
    from beam_sft.cli import main

    main(["check-tokenizer", str(fixture_dir)])
    out = capsys.readouterr().out
    assert "library internals: all as audited" in out
    monkeypatch.setitem(jinja_sandbox.AUDITED_SOURCES, "jinja2.runtime.Context.call", "2" * 16)
    main(["check-tokenizer", str(fixture_dir)])
    out = capsys.readouterr().out
    assert "warning: render shortcuts (encode/fast/render.py) off: jinja2.runtime.Context.call: source differs" in out


def test_jinja_internals_hold():
    assert jinja_sandbox.render_memo_problems() == []


def test_every_private_call_is_in_the_checked_table():
    module_calls = {node.attr for node in ast.walk(ast.parse(inspect.getsource(api)))
                    if isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Call, ast.Name))
                    and (getattr(node.value, "func", None) is not None and getattr(node.value.func, "id", None) == "_module"
                         or getattr(node.value, "id", None) == "module")}
    listed = set(api.ENCODER_PRIVATE) | set(api.ENCODER_PUBLIC) | set(api.VERIFY_PRIVATE)
    assert module_calls <= listed, module_calls - listed
    assert set(api.ENCODER_PRIVATE) | set(api.VERIFY_PRIVATE) <= module_calls  # and nothing listed is unused


def test_sandbox_shortcuts_hold_on_the_audited_jinja():
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    assert jinja_sandbox.shortcut_problems(ImmutableSandboxedEnvironment) == []


def test_a_changed_sandbox_turns_the_shortcuts_off(monkeypatch):
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Overriding(ImmutableSandboxedEnvironment):
        def getattr(self, obj, attribute):
            return super().getattr(obj, attribute)

    assert any("getattr overrides" in p for p in jinja_sandbox.shortcut_problems(Overriding))
    monkeypatch.setitem(jinja_sandbox.AUDITED_SOURCES, "jinja2.runtime.Context.call", "0" * 16)
    problems = jinja_sandbox.shortcut_problems(ImmutableSandboxedEnvironment)
    assert any("Context.call: source differs" in p for p in problems)


def _private_uses(path: Path) -> list[str]:
    """Private names imported from a library, ``__class__`` assignments, and ``getattr``-family
    calls with a private name literal."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in LIBRARIES:
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
        if isinstance(node, ast.Attribute) and node.attr == "__class__" and isinstance(node.ctx, ast.Store):
            found.append("__class__ assignment")
        if (isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "hasattr", "setattr")
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
                and str(node.args[1].value).startswith("_") and not str(node.args[1].value).startswith("__")):
            found.append(f"{node.func.id}(..., {node.args[1].value!r})")
        if (isinstance(node, ast.Attribute) and node.attr in ("_attn_implementation", "_func", "_shared_state",
                                                             "_indices", "_set_pg_timeout")):
            found.append(f".{node.attr}")
    return found


# Private names of beam_sft's own objects, and reads the lead fences after merging.
ALLOWED = {
    "train/packing.py": ["getattr(..., '_beam_packed_mask_hook')"],  # beam_sft's own hook attribute
}


def test_only_compat_touches_library_internals():
    offenders = {}
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        relative = path.relative_to(PACKAGE_ROOT).as_posix()
        if relative.startswith("compat/"):
            continue
        uses = _private_uses(path)
        if uses and uses != ALLOWED.get(relative):
            offenders[relative] = uses
    assert not offenders, offenders


def test_only_compat_imports_transformers_weight_conversion():
    """``revert_weight_conversion`` and the conversion mapping are transformers' internals: one adapter
    (``compat/weight_conversion.py``) uses them, with its audit."""
    internal = ("transformers.core_model_loading", "transformers.conversion_mapping")
    offenders = {}
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        relative = path.relative_to(PACKAGE_ROOT).as_posix()
        if relative == "compat/weight_conversion.py":
            continue
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            names += [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) else []
            if any(n.startswith(internal) or n.endswith(("revert_weight_conversion", "get_model_conversion_mapping"))
                   for n in names):
                offenders.setdefault(relative, []).extend(names)
    assert not offenders, offenders


def test_the_scan_sees_each_kind_of_private_use(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text("from jinja2.utils import _PassArg\ndef f(e, m, c):\n    e.__class__ = int\n"
                      "    return getattr(m, '_func'), c._attn_implementation\n")
    assert sorted(_private_uses(sample)) == sorted(
        ["jinja2.utils._PassArg", "__class__ assignment", "getattr(..., '_func')", "._attn_implementation"])


def test_compat_is_a_leaf():
    """The encoder and verify both import it, so it imports nothing else of beam_sft (verify stays
    independent of the encoder through it)."""
    for path in sorted((PACKAGE_ROOT / "compat").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert not name.startswith("beam_sft") or name.startswith("beam_sft.compat"), (path.name, name)


def test_a_patched_library_function_changes_the_prepare_fingerprint(monkeypatch, tokenizer):
    """The fingerprint holds the source of the library functions the fast paths rely on, not only
    the library's version: a locally patched transformers misses the cache."""
    import transformers.utils.chat_template_utils as module

    from beam_sft.prepare import PrepareConfig, SourceSpec
    from beam_sft.prepare.resolved import resolve

    config = PrepareConfig(sources=[SourceSpec(path="a.jsonl")])
    before, plan = beam_sft.compat.library_code_digest(), resolve(config, tokenizer)
    assert beam_sft.compat.library_code_digest() == before

    def patched(chat):
        return list(chat)

    monkeypatch.setattr(module, "_alias_reasoning_fields", patched)
    assert beam_sft.compat.library_code_digest() != before
    assert resolve(config, tokenizer).code_digest != plan.code_digest


def test_datasets_file_listing_holds_and_a_change_is_named(monkeypatch):
    """data/hub.py lists and types a local repository's files as load_dataset does, through
    compat/datasets_files.py: holds on the pinned datasets, and a change is named, not read past."""
    import datasets.load

    from beam_sft.compat import datasets_files

    assert datasets_files.problems() == []
    assert datasets_files.split_module(["a.jsonl", "b.jsonl", "c.csv"]) == "json"
    monkeypatch.setattr(datasets.load, "infer_module_for_data_files_list", lambda files: ("csv", {}))
    assert any("infer_module_for_data_files_list" in p for p in datasets_files.problems())
    monkeypatch.delattr(datasets.load, "infer_module_for_data_files_list")
    assert any("datasets' data-file listing" in p for p in datasets_files.problems())
