"""convert/formats.py is the one table of source formats: every reader module's converter is in it
once, nothing else lists formats, ``--format`` choices are its names, and ``--format auto`` asks the
own-key detectors in its order."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from beam_sft.convert import detect, formats, pipeline
from beam_sft.convert.options import FORMAT_CHOICES, FORMATS, ColumnMap

CONVERT = Path(formats.__file__).parent


def _defined(prefix: str) -> dict[str, str]:
    """``function -> module`` for top-level ``prefix*`` functions whose first parameter is ``raw``."""
    found = {}
    for path in sorted(CONVERT.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (isinstance(node, ast.FunctionDef) and node.name.startswith(prefix) and node.args.args
                    and node.args.args[0].arg == "raw"):
                found[node.name] = f"beam_sft.convert.{path.stem}"
    return found


def test_every_reader_module_converter_is_in_the_table_once():
    converters = {name: module for name, module in _defined("convert_").items() if name != "convert_row"}
    table = [f.reader for f in formats.FORMAT_TABLE]
    assert sorted(table) == sorted(f"{m}:{n}" for n, m in converters.items())
    names = [f.name for f in formats.FORMAT_TABLE]
    assert len(set(names)) == len(names) and len(set(table)) == len(table)


def test_every_own_key_detector_is_in_the_table_once_with_a_distinct_rank():
    in_table = [f.detector for f in formats.FORMAT_TABLE if f.detector]
    ranks = [f.detect_rank for f in formats.FORMAT_TABLE if f.detector]
    assert len(set(in_table)) == len(in_table) and len(set(ranks)) == len(ranks) and None not in ranks
    # is_flat is one of classify's shape checks (after the messages/conversations lists), not an own key.
    own = {n: m for n, m in _defined("is_").items() if n != "is_flat"}
    assert sorted(in_table) == sorted(f"{m}:{n}" for n, m in own.items())
    for f in formats.FORMAT_TABLE:
        if f.detector:
            params = list(inspect.signature(formats.resolve(f.detector)).parameters)
            assert (len(params) == 2) == f.detector_takes_columns, f.name


def test_everyone_reads_the_table():
    assert FORMATS == formats.FORMAT_NAMES and FORMAT_CHOICES == ("auto", *formats.FORMAT_NAMES)
    assert tuple(pipeline.FORMAT_CONVERTERS) == formats.FORMAT_NAMES
    for name in formats.FORMAT_NAMES:
        assert pipeline.CONVERTERS[pipeline.FORMAT_CONVERTERS[name]] is formats.reader(name)


def test_no_other_module_lists_the_format_names():
    """A tuple/list/set literal holding three or more format names outside formats.py is a second registry."""
    names = set(formats.FORMAT_NAMES)
    offenders = []
    for path in sorted(Path(formats.__file__).parents[1].rglob("*.py")):
        if path.name == "formats.py" and path.parent == CONVERT:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                listed = {e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names}
                if len(listed) >= 3:
                    offenders.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Dict):
                listed = {k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in names}
                if len(listed) >= 3:
                    offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders


def test_format_choices_of_every_command_are_the_table():
    from beam_sft.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")  # argparse has no public subparser lookup
    for command in ("convert", "reason", "prepare"):
        action = next(a for a in sub.choices[command]._actions if a.dest == "format")
        assert tuple(action.choices) == ("auto", *formats.FORMAT_NAMES), command


def test_auto_detection_asks_own_key_detectors_in_table_order(monkeypatch):
    """A row every own-key detector claims goes to the lowest detect_rank; reordering the table reorders it."""
    ranked = [name for name, _, _ in formats.detectors()]
    # the order classify has always used; responses, anthropic, then pairs and xlam, added last, ask after them;
    # langchain first: its message items are no other format's, and a row of them beside Anthropic tools is its
    assert ranked == ["langchain", "chat_log", "gemini", "glaive", "bedrock", "responses", "anthropic", "pairs", "xlam"]
    always = [(name, lambda *a: True, takes) for name, _, takes in formats.detectors()]
    monkeypatch.setattr(detect, "_OWN_KEYS", tuple(always))
    assert detect.classify({"x": 1}, ColumnMap()) == ranked[0]
    monkeypatch.setattr(detect, "_OWN_KEYS", tuple(reversed(always)))
    assert detect.classify({"x": 1}, ColumnMap()) == ranked[-1]


@pytest.mark.parametrize("row, name", [
    ({"request": {"messages": [{"role": "user", "content": "q"}]}, "response": {"choices": []}}, "chat_log"),
    ({"contents": [{"role": "user", "parts": [{"text": "q"}]}]}, "gemini"),
    ({"chat": "USER: q\nASSISTANT: a"}, "glaive"),
    ({"input": "q", "output": [{"type": "message", "role": "assistant", "content": "a"}]}, "responses"),
    ({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]},
     "anthropic"),
    ({"conversation": [{"input": "q", "output": "a"}]}, "pairs"),
    ({"query": "q", "answers": "[]", "tools": "[]"}, "xlam"),
    ({"messages": [{"type": "human", "data": {"content": "q"}}]}, "langchain"),
    ([{"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "HumanMessage"], "kwargs": {}}],
     "langchain"),
])
def test_detect_module_order_matches_the_table(row, name):
    assert detect.classify(row, ColumnMap()) == name
