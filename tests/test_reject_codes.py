"""The one table of reason codes: every emitted code is in it, verify's rules are in it, and the
README's list is generated from it."""

from __future__ import annotations

import ast
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from beam_sft import errors
from beam_sft.errors import Rejection
from beam_sft.reject_codes import REASONS, STAGES, codes, markdown

ROOT = Path(__file__).resolve().parents[1]
_CODE_SHAPE = re.compile(r"[a-z][a-z_]*[a-z]\Z")
# Calls that take a reason code, and the position of the code among their arguments.
_CODE_CALLS = {"Rejection": 0, "Reject": 0, "Violation": 0, "_violation": 2, "reject_line": 2,
               "Done": 2}


def _literals(node: ast.AST):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.IfExp):  # code = "unreadable_rest" if rest else "invalid_json"
        yield from _literals(node.body)
        yield from _literals(node.orelse)


def scan_codes(root: Path) -> dict[str, set[str]]:
    """Every code literal in the modules under ``root``, with where it is: passed to a rejection or
    violation (``Rejection``, ``_violation``, ``reject_line``, prepare's ``Done``, a
    ``code=`` keyword), a ``{"code": ...}`` value, assigned to ``code``/``status``/``*_CODE``, or
    returned as a ``(code, message)`` problem (validate's rules, ``check_record``)."""
    from beam_sft.convert.options import FORMATS

    found: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            values: list[str] = []
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if name in _CODE_CALLS and len(node.args) > _CODE_CALLS[name]:
                    values += _literals(node.args[_CODE_CALLS[name]])
                values += [v for kw in node.keywords if kw.arg in ("code", "status") for v in _literals(kw.value)]
            elif isinstance(node, ast.Dict):
                values += [v for k, item in zip(node.keys, node.values, strict=True)
                           if isinstance(k, ast.Constant) and k.value == "code" for v in _literals(item)]
            elif isinstance(node, ast.Assign):
                if any(isinstance(t, ast.Name) and (t.id in ("code", "status", "CODE") or t.id.endswith("_CODE"))
                       for t in node.targets):
                    values += _literals(node.value)
            elif isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) and len(node.value.elts) == 2:
                first, second = node.value.elts
                if isinstance(second, (ast.JoinedStr, ast.Constant)):
                    # detect_format returns (format, why): format names are not codes
                    values += [v for v in _literals(first) if _CODE_SHAPE.match(v) and v not in FORMATS]
            for value in values:
                found.setdefault(value, set()).add(f"{path.relative_to(root)}:{node.lineno}")
    return found


def _emitted_codes() -> set[str]:
    return set(scan_codes(ROOT / "beam_sft"))


def test_every_code_the_package_emits_is_in_the_table():
    found = scan_codes(ROOT / "beam_sft")
    unknown = {code: sorted(where) for code, where in found.items() if code not in REASONS}
    assert unknown == {}
    # The scan reaches every stage's modules, prepare/ and dataset_folder/ included, in every form.
    where = {place.split(":")[0] for places in found.values() for place in places}
    for module in ("prepare/batch.py", "convert/pipeline.py", "convert/validate.py", "encode/template_encode.py",
                   "encode/length.py", "verify/invariants.py", "verify/counts.py"):
        assert module in where, module
    assert {"too_long", "template_error", "no_trained_tokens", "missing_reasoning", "unreadable_rest",
            "invalid_json", "invalid_text", "row_json", "rejects_count"} <= set(found)


def test_the_scan_finds_a_code_missing_from_the_table(tmp_path):
    """Mutation: each form the scan knows, with a code the table lacks, is found."""
    (tmp_path / "m.py").write_text(
        'def a():\n    raise Rejection("no_such_a", "x")\n'
        'def b(ctx, env):\n    return [_violation(ctx, env, "no_such_b", "x")]\n'
        'def c():\n    return "no_such_c", f"x"\n'
        'def d(rest):\n    code = "no_such_d" if rest else "invalid_json"\n'
        'def e():\n    return {"code": "no_such_e"}\n'
        'def f(s, i, exc, row):\n    return Done(s, i, "no_such_f", reject_line(s, i, "no_such_g", "m", row))\n'
        'CODE = "no_such_h"\n')
    assert {c for c in scan_codes(tmp_path) if c not in REASONS} == {f"no_such_{x}" for x in "abcdefgh"}


def test_verify_rule_codes_are_in_the_table_with_their_stage():
    from beam_sft.verify.invariants import RULE_CODES

    for code in RULE_CODES:
        assert code in REASONS, code
        assert "verify" in REASONS[code].stages, code
    assert set(codes("verify")) == set(RULE_CODES) | {"unreadable_reject_line"}


def test_every_reason_has_a_known_stage_and_a_one_line_meaning():
    for reason in REASONS.values():
        assert reason.stages and set(reason.stages) <= set(STAGES)
        assert reason.meaning and "\n" not in reason.meaning


def test_the_readme_section_is_the_generated_table():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    begin, end = "<!-- reason-codes:begin -->\n", "<!-- reason-codes:end -->"
    assert begin in text and end in text, "README.md has no generated reason-code section"
    section = text[text.index(begin) + len(begin) : text.index(end)]
    assert section == markdown(), "regenerate it: python -m beam_sft.reject_codes --markdown"


def test_the_module_prints_the_table():
    out = subprocess.run([sys.executable, "-m", "beam_sft.reject_codes", "--markdown"], capture_output=True,
                         text=True, check=True, cwd=ROOT)
    assert out.stdout == markdown()


def test_one_rejection_type_for_every_stage():
    assert not hasattr(errors, "RowError")
    assert not hasattr(errors, "Reject")
    with pytest.raises(ValueError, match="unknown reason code"):
        Rejection("no_such_code", "x")
    r = Rejection("too_long", "9 tokens", {"a": 1}, source="s.jsonl", row=3)
    assert r.detail == r.message and r.stage == "encode, verify"
    assert pickle.loads(pickle.dumps(r)) == r  # crosses worker processes intact
    assert str(r) == "s.jsonl:3: [too_long] 9 tokens"


def test_dead_helpers_are_gone():
    from beam_sft.convert import rows

    assert not hasattr(rows, "to_error") and not hasattr(rows, "is_rejection") and not hasattr(rows, "Reject")
    assert not (ROOT / "beam_sft" / "convert" / "export.py").exists()
