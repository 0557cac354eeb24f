"""Bounds on every config we read: an alias bomb (9 anchors, each naming the one before 9 times:
9^10 values) under ``sources[].data_files`` in a prepare config and a recipe, a 30 MB config, an alias
that holds itself, an override flag that is a bomb: each refused in one line, well under a second,
before any value is built; and no error message formats an unbounded value."""

from __future__ import annotations

import json
import time

import pytest

from beam_sft.cli import main
from beam_sft.config_utils import MAX_CONFIG_BYTES, MAX_CONFIG_NODES, load_yaml, parse_overrides, shown
from beam_sft.errors import ConfigError
from tests.tree import assert_one_line_error


def bomb(levels: int = 10, width: int = 9) -> str:
    """YAML whose anchors expand to ``width ** levels`` strings: a few hundred bytes."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def prepare_bomb() -> str:
    return ("anchors:\n" + "".join(f"  {line}\n" for line in bomb().splitlines())
            + "sources:\n  - path: a.jsonl\n    data_files: *a9\ntokenizer: t\noutput: out\n")


def recipe_bomb() -> str:
    return ("x-anchors:\n" + "".join(f"  {line}\n" for line in bomb().splitlines())
            + "data:\n  prepare:\n    sources:\n      - path: a.jsonl\n        data_files: *a9\n"
            + "sft:\n  output_dir: out\n  use_cpu: true\n")


CASES = {
    "prepare": (prepare_bomb, lambda p: ["prepare", "--config", str(p)]),
    "train": (recipe_bomb, lambda p: ["train", "--config", str(p)]),
    "convert": (bomb, lambda p: ["convert", "x.jsonl", "-o", str(p.parent / "o.jsonl"), "--config", str(p)]),
}


@pytest.mark.parametrize("command", sorted(CASES))
def test_an_alias_bomb_is_refused_in_one_line_in_well_under_a_second(tmp_path, command, capsys, monkeypatch):
    text, argv = CASES[command]
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "bomb.yaml"
    path.write_text(text())
    assert len(path.read_bytes()) < 2000
    assert main(argv(path)) == 2  # (the first call also imports the command's modules: not timed)
    err = capsys.readouterr().err
    assert_one_line_error(err, command, "aliases make more than", f"{MAX_CONFIG_NODES:,}")
    assert len(err) < 1000
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="aliases make more than"):
        load_yaml(path)
    assert time.perf_counter() - start < 0.2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.yaml"]


@pytest.mark.parametrize("command", ["prepare", "train", "convert"])
def test_a_30_mb_config_is_refused_by_its_size_before_it_is_read(tmp_path, command, capsys):
    path = tmp_path / "big.yaml"
    with path.open("w") as fh:
        fh.write("sources:\n")
        line = "  - {path: a.jsonl, format: openai}\n"
        fh.write(line * (30 * 1024 * 1024 // len(line)))
    extra = ["x.jsonl", "-o", str(tmp_path / "o.jsonl")] if command == "convert" else []
    assert main([command, *extra, "--config", str(path)]) == 2
    assert_one_line_error(capsys.readouterr().err, command, "big.yaml", f"at most {MAX_CONFIG_BYTES:,} bytes")
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="at most"):
        load_yaml(path)
    assert time.perf_counter() - start < 0.05


def test_the_bounds_are_on_the_expansion_not_on_anchors():
    """Anchors a real config uses (a shared mapping, a merge key) still load; the count is of the
    document written out, so a bomb just under the bound loads and just over it does not."""
    assert load_yaml_text("base: &b {lr: 1}\nrun: {<<: *b, steps: 2}\n") == {"base": {"lr": 1}, "run": {"lr": 1, "steps": 2}}
    load_yaml_text(bomb(levels=5, width=9))  # 9^5 = 59,049 values: fine
    with pytest.raises(ConfigError, match="aliases make more than"):
        load_yaml_text(bomb(levels=7, width=9))  # 9^7 = 4.8 million


def test_an_alias_that_holds_itself_is_refused():
    with pytest.raises(ConfigError, match="holds itself"):
        load_yaml_text("a: &a [1, *a]\n")


def test_an_override_flag_is_bounded_like_a_file():
    flow = "[" + ", ".join(["x"] * 9) + "]"
    text = "&a0 " + flow  # one anchor only: an alias needs its anchor inside the one flag
    assert parse_overrides(["--sft.x", text]) == {"sft": {"x": ["x"] * 9}}
    nested = "[&a [x, x, x], " + ", ".join(["*a"] * 3) + "]"
    assert parse_overrides(["--sft.x", nested])["sft"]["x"][1] == ["x", "x", "x"]
    big = "&a [" + ", ".join(["x"] * 1000) + "]"
    flag = "[" + big + ", " + ", ".join(["[" + ", ".join(["*a"] * 1000) + "]"] * 2) + "]"
    with pytest.raises(ConfigError, match="aliases make more than"):
        parse_overrides(["--sft.x", flag])


def test_an_error_never_formats_an_unbounded_value(tmp_path, capsys):
    """A wrong-typed value of 59,049 strings (aliases under the bound) or 300,000 numbers is named in a
    bounded message (it was formatted whole)."""
    path = tmp_path / "r.yaml"
    path.write_text(f"sft:\n  output_dir: o\n  learning_rate: {inline_bomb(5)}\n")
    assert main(["train", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert_one_line_error(err, "train", "sft.learning_rate", "expected a number, got [[[[")
    assert len(err) < 600
    path.write_text(json.dumps({"sft": {"output_dir": "o", "learning_rate": list(range(300_000))}}))
    assert main(["train", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert_one_line_error(err, "train", "sft.learning_rate", "[0, 1, 2, 3, 4, 5, ...]")
    assert len(err) < 600
    assert len(shown("x" * 10**7)) <= 200 and len(shown({i: [i] * 100 for i in range(10**5)})) <= 200


def inline_bomb(levels: int, width: int = 9) -> str:
    """One flow value whose anchors, defined inside it, expand to ``width ** levels`` strings."""
    text = "&a0 [" + ", ".join(["x"] * width) + "]"
    for i in range(1, levels):
        text = f"&a{i} [{text}, " + ", ".join([f"*a{i - 1}"] * (width - 1)) + "]"
    return text


def load_yaml_text(text: str):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "c.yaml"
        path.write_text(text)
        return load_yaml(path)
