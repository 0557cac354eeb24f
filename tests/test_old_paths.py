"""Renamed modules keep their old import paths for one release: each old path warns (FutureWarning)
and gives the very objects of the new one; no module of the project itself imports an old path.

Old -> new: ``beam_sft.reasons`` -> ``beam_sft.reject_codes``; ``beam_sft.prepared`` (and each of its
submodules) -> ``beam_sft.dataset_folder`` (``prepared.report`` -> ``dataset_folder.report_json``);
``beam_sft.train.plan``'s model-config helpers -> ``beam_sft.train.model_shape``."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

OLD_MODULES = {
    "beam_sft.reasons": "beam_sft.reject_codes",
    "beam_sft.prepared": "beam_sft.dataset_folder",
    **{f"beam_sft.prepared.{m}": f"beam_sft.dataset_folder.{m}" for m in (
        "arrow_dataset", "integrity", "layout", "load", "lock", "oserrors", "output", "owner", "rejects", "tokenizer")},
    "beam_sft.prepared.report": "beam_sft.dataset_folder.report_json",
}
# The shims themselves and this test name the old paths on purpose.
SHIMS = {"beam_sft/reasons.py", "beam_sft/prepared/__init__.py", "tests/test_old_paths.py"}


def _fresh_import(name: str):
    """Import ``name`` as a first import would (the old packages' entries dropped from sys.modules),
    putting every dropped entry back afterwards."""
    old_roots = ("beam_sft.reasons", "beam_sft.prepared")
    saved = {k: v for k, v in sys.modules.items() if k.startswith(old_roots)}
    for key in saved:
        del sys.modules[key]
    try:
        return importlib.import_module(name)
    finally:
        for key in [k for k in sys.modules if k.startswith(old_roots)]:
            del sys.modules[key]
        sys.modules.update(saved)


@pytest.mark.parametrize("old", sorted(OLD_MODULES))
def test_an_old_path_warns_and_is_the_new_module(old):
    new = importlib.import_module(OLD_MODULES[old])
    with pytest.warns(FutureWarning, match=r"is now beam_sft\.(reject_codes|dataset_folder)"):
        module = _fresh_import(old)
    if old in ("beam_sft.reasons", "beam_sft.prepared"):  # a shim module: the same names, the same objects
        assert module.__all__ and sorted(module.__all__) == sorted(getattr(new, "__all__", module.__all__))
        for name in module.__all__:
            assert getattr(module, name) is getattr(new, name), name
    else:  # a submodule path: the new module itself
        assert module is new


def test_the_old_reasons_names_are_the_tables_own():
    from beam_sft import reject_codes

    with pytest.warns(FutureWarning):
        reasons = _fresh_import("beam_sft.reasons")
    assert reasons.REASONS is reject_codes.REASONS and reasons.REASON_CODES is reject_codes.REASON_CODES
    assert reasons.codes is reject_codes.codes and reasons.markdown is reject_codes.markdown


def test_the_old_packages_report_module_is_report_json():
    from beam_sft.dataset_folder import report_json

    with pytest.warns(FutureWarning):
        prepared = _fresh_import("beam_sft.prepared")
    assert prepared.report is report_json and prepared.layout.REPORT_FILE == "report.json"


def test_python_m_the_old_reasons_path_still_prints_the_table():
    from beam_sft.reject_codes import markdown

    out = subprocess.run([sys.executable, "-m", "beam_sft.reasons", "--markdown"], capture_output=True,
                         text=True, check=True, cwd=ROOT)
    assert out.stdout == markdown() and "beam_sft.reject_codes" in out.stderr


@pytest.mark.parametrize("name", ["SIZE_KEYS", "check_config"])
def test_the_planners_moved_helpers_warn_at_their_old_path(name):
    from beam_sft.train import model_shape, plan

    with pytest.warns(FutureWarning, match=rf"plan\.{name} is now beam_sft\.train\.model_shape\.{name}"):
        value = getattr(plan, name)
    assert value is getattr(model_shape, name)
    with pytest.raises(AttributeError):
        plan.no_such_name  # noqa: B018 (the module's __getattr__ refuses what never was there)


def test_the_helpers_the_planner_uses_are_the_moved_ones():
    from beam_sft.train import model_shape, plan

    for name in ("load_model_config", "meta_model", "NUM_EXPERTS_KEYS", "TOP_K_KEYS"):
        assert getattr(plan, name) is getattr(model_shape, name), name


def old_path_imports(source: str) -> list[str]:
    """The old module paths ``source`` imports (``import X``, ``from X import``, ``from beam_sft import
    reasons``/``prepared``), each as written."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [f"beam_sft.{alias.name}" for alias in node.names] if node.module == "beam_sft" else [node.module]
        for name in names:
            if any(name == old or name.startswith(old + ".") for old in ("beam_sft.reasons", "beam_sft.prepared")):
                found.append(name)
    return found


def test_no_module_of_the_project_imports_an_old_path():
    offenders = {}
    for folder in ("beam_sft", "tests", "benchmarks", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative in SHIMS:
                continue
            found = old_path_imports(path.read_text(encoding="utf-8"))
            if found:
                offenders[relative] = found
    assert not offenders, f"imports of old module paths (use the new ones): {offenders}"


def test_the_scan_finds_each_form_of_an_old_import():
    source = ("import beam_sft.reasons\nfrom beam_sft.prepared.layout import REPORT_FILE\n"
              "from beam_sft import prepared\nfrom beam_sft import reject_codes, dataset_folder\n"
              "def f():\n    from beam_sft.prepared import report\n")
    assert sorted(set(old_path_imports(source))) == [
        "beam_sft.prepared", "beam_sft.prepared.layout", "beam_sft.reasons"]
