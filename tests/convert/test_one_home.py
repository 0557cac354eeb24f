"""Rules shared by convert and encode have one copy each."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "beam_sft"


def test_reserved_template_kwargs_has_one_copy():
    import importlib

    validate, template_encode, template = (importlib.import_module(f"beam_sft.{m}") for m in (
        "convert.validate", "encode.template_encode", "harmony.template"))

    assert validate.RESERVED_TEMPLATE_KWARGS is template_encode.RESERVED_TEMPLATE_KWARGS is template.RESERVED_TEMPLATE_KWARGS
    defined = [path for path in ROOT.rglob("*.py") for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.Assign)
               and any(isinstance(t, ast.Name) and t.id == "RESERVED_TEMPLATE_KWARGS" for t in node.targets)]
    assert [p.relative_to(ROOT).as_posix() for p in defined] == ["harmony/template.py"]


def test_one_special_token_rule():
    """The special-token check lives in convert's validation only (prepare passes the tokens in)."""
    hits = [path.relative_to(ROOT).as_posix() for path in ROOT.rglob("*.py")
            if '"special_token_in_text"' in path.read_text(encoding="utf-8")]
    assert sorted(hits) == ["convert/validate.py", "reject_codes.py"]
