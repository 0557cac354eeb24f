"""The one table of reason codes: every emitted code is in it, verify's rules are in it, and the
README's list is generated from it."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from beam_sft import errors
from beam_sft.errors import Rejection, RowError
from beam_sft.reasons import REASONS, STAGES, codes, markdown

ROOT = Path(__file__).resolve().parents[2]
# A code literal passed to the one rejection type (or its encoder name), or returned as a
# (code, message) problem by validate.py's rules.
_CODE_RE = re.compile(r"""(?:Rejection|RowError|Reject)\(\s*["']([a-z_]+)["']""")
_PROBLEM_RE = re.compile(r"""return\s+\(?\s*["']([a-z_]+)["']\s*,""")


def _emitted_codes() -> set[str]:
    found = set()
    for path in (ROOT / "beam_sft").rglob("*.py"):
        # Docstring examples (">>>" lines) show unknown codes on purpose.
        text = "\n".join(line for line in path.read_text(encoding="utf-8").splitlines()
                         if not line.lstrip().startswith(">>>"))
        found |= set(_CODE_RE.findall(text))
        if path.name == "validate.py":
            found |= set(_PROBLEM_RE.findall(text))
    return found


def test_every_code_the_package_emits_is_in_the_table():
    emitted = _emitted_codes()
    assert {"too_long", "template_error", "no_trained_tokens", "missing_reasoning"} <= emitted  # the scan works
    assert emitted - set(REASONS) == set()


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
    assert section == markdown(), "regenerate it: python -m beam_sft.reasons --markdown"


def test_the_module_prints_the_table():
    out = subprocess.run([sys.executable, "-m", "beam_sft.reasons", "--markdown"], capture_output=True,
                         text=True, check=True, cwd=ROOT)
    assert out.stdout == markdown()


def test_one_rejection_type_for_every_stage():
    assert RowError is Rejection
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
