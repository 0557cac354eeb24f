"""The README's layout block and its newcomer's path match the tree: every module of beam_sft is
named in the layout, every ``*.py`` the layout names exists, and the path from ``prepare`` to
``train`` is at most ten steps, each naming files that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _layout() -> str:
    start = README.index("```\nbeam_sft/")
    return README[start:README.index("```", start + 4)]


def test_every_module_is_in_the_layout_and_every_named_file_exists():
    block = _layout()
    missing = [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "beam_sft").rglob("*.py"))
               if p.name != "__init__.py" and p.name not in block]
    assert not missing, f"modules the README layout does not name: {missing}"
    existing = {p.name for d in ("beam_sft", "benchmarks", "scripts", "tests") for p in (ROOT / d).rglob("*.py")}
    stale = sorted(set(re.findall(r"\b([a-z_]+\.py)\b", block)) - existing)
    assert not stale, f"files the README layout names that are gone: {stale}"


def test_the_newcomers_path_is_ten_steps_of_real_files():
    section = README[README.index("### A newcomer's path"):]
    section = section[:section.index("\n## ")]
    steps = re.findall(r"^(\d+)\. (.*)$", section, re.MULTILINE)
    assert 1 <= len(steps) <= 10 and [int(n) for n, _ in steps] == list(range(1, len(steps) + 1))
    for _, text in steps:
        for path in re.findall(r"`([a-z_/]+\.py)`", text):
            assert (ROOT / "beam_sft" / path).is_file(), path
