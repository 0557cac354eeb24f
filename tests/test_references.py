"""Every reference in the code's prose resolves: the comments and docstrings of beam_sft, tests,
scripts and benchmarks cite no tracker numbers (there is no tracker in the repository: say the behaviour
instead; an upstream issue is cited by its full address), and every repository file they name exists.

Only prose is read (comments via ``tokenize``, docstrings via ``ast``): string data in tests (paths of
other projects in a corpus excerpt, hostile file names) is not a citation."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("beam_sft", "tests", "scripts", "benchmarks")

# the word "issue" then a number (with or without "#"); a full address (".../issues/1234") does not match
ISSUE_NUMBER = re.compile(r"\bissue ?#?\d+", re.IGNORECASE)
# a file of this repository named by its path from the root, or a top-level document (an upper-case .md)
REPO_PATH = re.compile(r"\b(?:beam_sft|tests|scripts|benchmarks|configs|recipes|docs)/[\w./-]*\w\.(?:py|md|ya?ml|txt|jinja|json|sh|sbatch|toml)\b")
DOCUMENT = re.compile(r"\b[A-Z][A-Z_-]+\.md\b")


def prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring of a module."""
    out = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
           if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                out.append((node.body[0].lineno, doc))
    return out


def problems(name: str, source: str, root: Path = ROOT) -> list[str]:
    documents = {p.name for p in root.glob("*.md")}
    out = []
    for line, text in prose(source):
        out += [f"{name}:{line}: {m.group(0)!r}: say the behaviour instead" for m in ISSUE_NUMBER.finditer(text)]
        out += [f"{name}:{line}: {m.group(0)} is not in the repository" for m in REPO_PATH.finditer(text)
                if not (root / m.group(0)).exists()]
        out += [f"{name}:{line}: {m.group(0)} is not in the repository" for m in DOCUMENT.finditer(text)
                if m.group(0) not in documents]
    return out


def test_every_reference_in_the_code_resolves():
    found = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            found += problems(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"))
    assert not found, "\n".join(found)


def test_the_check_finds_planted_bad_references():
    issue, design = "iss" + "ue", "DES" + "IGN.md"  # split so that this file's own text stays clean
    source = (f'"""See {design} and {issue} 23."""\n'
              f"# the rule of tests/data/test_gone.py ({issue} #9.2)\n"
              f"x = 'tests/data/not_prose.py {issue} 4'  # upstream: https://github.com/huggingface/transformers/issues/1234\n"
              "# README.md and beam_sft/cli.py exist\n")
    assert problems("m.py", source) == [
        f"m.py:2: '{issue} #9': say the behaviour instead",
        "m.py:2: tests/data/test_gone.py is not in the repository",
        f"m.py:1: '{issue} 23': say the behaviour instead",
        f"m.py:1: {design} is not in the repository",
    ]
