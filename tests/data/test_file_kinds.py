"""data/file_kinds.py is the one suffix table: the readers dispatch on it, a directory lists by it,
hub.py reads by it, and no other module spells a data suffix list."""

from __future__ import annotations

import ast
import gzip
import json
from pathlib import Path

from beam_sft.data import file_kinds, hub, sources

PACKAGE = Path(file_kinds.__file__).parents[1]


def test_each_suffix_once_and_every_reader_is_known():
    suffixes = [k.suffix for k in file_kinds.FILE_KINDS]
    assert len(set(suffixes)) == len(suffixes)
    assert {k.reader for k in file_kinds.FILE_KINDS} | {file_kinds.DEFAULT_READER} == {
        "lines", "json", "parquet", "transcript"}


def test_hub_and_sources_ask_the_table():
    assert hub._OWN_READER is file_kinds.DATA_SUFFIXES
    assert sources.DATA_SUFFIXES is file_kinds.DATA_SUFFIXES and sources.LINE_KINDS is file_kinds.LINE_KINDS


def test_no_other_module_lists_data_suffixes():
    """A literal holding two or more of the table's suffixes outside file_kinds.py is a second table
    (hub.py's _FILE_SUFFIXES, the names that make a --data argument a path not a hub id, is a different
    question and is allowed)."""
    known = {k.suffix for k in file_kinds.FILE_KINDS}
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "file_kinds.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        allowed = {id(a.value) for a in ast.walk(tree) if isinstance(a, ast.Assign)
                   and any(getattr(t, "id", "") == "_FILE_SUFFIXES" for t in a.targets)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and id(node) not in allowed:
                listed = {e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in known}
                if len(listed) >= 2:
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not offenders


def test_every_kind_reads_by_its_reader(tmp_path):
    """A file of each kind, and a gzip one named as plain (gzip is told by content), reads as its row."""
    row = {"messages": [{"role": "user", "content": "q"}]}
    (tmp_path / "a.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "a.ndjson").write_bytes(gzip.compress((json.dumps(row) + "\n").encode()))
    (tmp_path / "a.json").write_text(json.dumps([row]))
    (tmp_path / "a.txt").write_text("<|start|>user<|message|>q<|end|>\n")
    for name in ("a.jsonl", "a.ndjson", "a.json"):
        assert [r for _, r in sources.iter_records(tmp_path / name)] == [row], name
    assert [r for _, r in sources.iter_records(tmp_path / "a.txt")] == ["<|start|>user<|message|>q<|end|>"]
    files, skipped = sources.expand_source(tmp_path)
    assert [f.name for f in files] == ["a.json", "a.jsonl", "a.ndjson"]
    assert [s.path.name for s in skipped] == ["a.txt"]
