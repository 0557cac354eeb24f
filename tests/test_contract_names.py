"""Every read and write of a prepared folder's files goes through ``beam_sft/dataset_folder/``: no module
outside it spells a contract file name (``dataset_folder.layout``) as a string literal. Docstrings and
comments may name them (prose); a file name in a message is prose too (only a literal that *is* the
name, or a path ending in it, counts). ``"tokenizer"`` is also a config key, so it counts only where
it is a path: an operand of ``/``, or an argument of ``Path``/``os.path.join``/``joinpath``."""

from __future__ import annotations

import ast
from pathlib import Path

from beam_sft.dataset_folder import layout

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "beam_sft"
FILE_NAMES = (layout.REPORT_FILE, layout.REJECTS_FILE, layout.VIOLATIONS_FILE, layout.HISTOGRAM_FILE,
              layout.DATASET_INFO_FILE, layout.STATE_FILE)
DIR_NAMES = (layout.TOKENIZER_DIR,)

# Files allowed to spell a contract name (each entry must still be needed: see below). Empty: every
# read goes through beam_sft/dataset_folder/; the table stays for a move in flight.
ALLOWED: dict[str, set[str]] = {}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)):
            out.add(id(body[0].value))
    return out


def _is_path_use(node: ast.Constant, parents: dict[int, ast.AST]) -> bool:
    parent = parents.get(id(node))
    if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Div):
        return True
    if isinstance(parent, ast.Call):
        func = parent.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in ("Path", "join", "joinpath", "PurePath")
    return False


def contract_literals(source: str) -> list[str]:
    """The contract names ``source`` spells as literals (see the module docstring)."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docstrings:
            continue
        for name in FILE_NAMES:
            if node.value == name or node.value.endswith("/" + name):
                found.append(name)
        if node.value in DIR_NAMES and _is_path_use(node, parents):
            found.append(node.value)
    return found


def test_no_contract_file_name_outside_prepared():
    offenders, used = {}, {}
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        relative = path.relative_to(PACKAGE_ROOT).as_posix()
        if relative.startswith("dataset_folder/"):
            continue
        names = set(contract_literals(path.read_text(encoding="utf-8")))
        used[relative] = names
        if names - ALLOWED.get(relative, set()):
            offenders[relative] = sorted(names - ALLOWED.get(relative, set()))
    assert not offenders, f"contract file names outside beam_sft/dataset_folder/ (use dataset_folder.layout): {offenders}"
    stale = {name: sorted(allowed - used.get(name, set())) for name, allowed in ALLOWED.items()
             if allowed - used.get(name, set())}
    assert not stale, f"no longer needed in ALLOWED: {stale}"


def test_the_scan_finds_each_kind_and_spares_prose():
    source = '''"""Reads report.json (prose)."""
import os
from pathlib import Path
a = Path(d) / "report.json"
b = os.path.join(d, "rejects.jsonl")
c = d / "tokenizer"
e = Path(d, "tokenizer")
f = "out/state.json"
spec = {"tokenizer": 1}  # a config key, not a path
g = f"see report.json in {d}"  # a message
h = "see dataset_info.json"  # a message
'''
    assert sorted(contract_literals(source)) == sorted(["report.json", "rejects.jsonl", "tokenizer", "tokenizer",
                                                        "state.json"])
