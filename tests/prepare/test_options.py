"""``prepare`` accepts every conversion option ``convert`` accepts, with the same choices (from the
option types), in recipes and on the command line, under one name for the column mapping."""

from __future__ import annotations

import argparse
import json

import pytest
import yaml

from beam_sft.cli import build_parser
from beam_sft.convert.options import MissingReasoning, TextAfterToolCall, ToolCallContent, choices
from beam_sft.prepare import PrepareConfig, SourceSpec, cli
from beam_sft.prepare.resolved import convert_options


def _actions(command: str) -> dict[str, argparse.Action]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return {opt: a for a in sub._actions for opt in a.option_strings}


def test_prepare_has_every_conversion_flag_of_convert_with_the_same_choices():
    convert, prepare_ = _actions("convert"), _actions("prepare")
    for flag, tp in (("--missing-reasoning", MissingReasoning), ("--tool-call-content", ToolCallContent),
                     ("--text-after-tool-call", TextAfterToolCall)):
        assert tuple(convert[flag].choices) == tuple(prepare_[flag].choices) == choices(tp), flag
    for flag in ("--allow-undeclared-tools", "--columns"):
        assert flag in convert and flag in prepare_


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["prepare", *argv])


def test_conversion_flags_reach_every_source(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({"sources": [{"path": "a.jsonl", "convert": {"columns": {"tools": "fns"}}},
                                                  {"path": "b.jsonl"}], "tokenizer": "t"}))
    config = cli.build_config(_parse("--config", str(recipe), "--allow-undeclared-tools", "--text-after-tool-call",
                                     "drop", "--tool-call-content", "reject", "--columns", "messages=dialog"))
    for i, spec in enumerate(config.sources):
        options = convert_options(spec, config, i)
        assert (options.require_declared_tools, options.text_after_tool_call, options.tool_call_content) == (
            False, "drop", "reject")
        assert options.columns.messages == "dialog"
    assert convert_options(config.sources[0], config, 0).columns.tools == "fns"  # merged, not replaced


def test_a_bad_column_key_names_its_path(tmp_path):
    from beam_sft.errors import ConfigError

    # Refused as the config is built (not first when the run converts the source), under the key given.
    with pytest.raises(ConfigError, match=r"sources\[0\]\.convert\.columns\.mesages: unknown key"):
        cli.build_config(_parse("--data", "a.jsonl", "--tokenizer", "t", "--columns", "mesages=dialog"))
    with pytest.raises(SystemExit):
        _parse("--data", "a.jsonl", "--columns", "no-equals-sign")


def test_columns_is_the_one_name_and_column_map_is_deprecated(capsys):
    config = PrepareConfig(sources=[SourceSpec(path="a.jsonl", columns={"messages": "dialog"})])
    assert convert_options(config.sources[0], config, 0).columns.messages == "dialog"
    assert "deprecated" not in capsys.readouterr().err
    config = PrepareConfig(sources=[SourceSpec(path="a.jsonl", column_map={"messages": "dialog"})])
    assert convert_options(config.sources[0], config, 0).columns.messages == "dialog"
    assert "column_map is deprecated" in capsys.readouterr().err


def test_the_fingerprint_holds_the_resolved_options(tokenizer):
    from beam_sft.prepare import cache
    from beam_sft.prepare.resolved import resolve

    a = PrepareConfig(sources=[SourceSpec(path="a.jsonl", columns={"messages": "dialog"})])
    b = PrepareConfig(sources=[SourceSpec(path="a.jsonl", convert={"columns": {"messages": "dialog"}})])
    c = PrepareConfig(sources=[SourceSpec(path="a.jsonl", convert={"require_declared_tools": False})])
    options = [cache.fingerprint_parts(resolve(x, tokenizer), tokenizer)["sources"][0]["options"] for x in (a, b, c)]
    assert options[0] == options[1] != options[2]


def test_the_flags_change_what_prepare_keeps(tmp_path, tokenizer_dir):
    """End to end: an undeclared tool call and text after a call, kept only under the flags."""
    from beam_sft.cli import main

    rows = [{"dialog": [{"role": "user", "content": "go"}, {"role": "assistant", "reasoning_content": "call",
             "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {}}}]},
            {"role": "tool", "content": "ok"}, {"role": "assistant", "reasoning_content": "r", "content": "done"}]}]
    data = tmp_path / "a.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = ["prepare", "--data", str(data), "--tokenizer", str(tokenizer_dir), "--num-proc", "1", "--no-verify", "-q"]
    assert main([*base, "--output", str(tmp_path / "o1")]) != 0  # no `messages` column: nothing kept
    assert main([*base, "--output", str(tmp_path / "o2"), "--columns", "messages=dialog"]) != 0  # undeclared f
    assert main([*base, "--output", str(tmp_path / "o3"), "--columns", "messages=dialog",
                 "--allow-undeclared-tools"]) == 0
    report = json.loads((tmp_path / "o3" / "report.json").read_text())
    assert next(iter(report["sources"].values()))["kept"] == 1


def test_convert_reads_the_same_flags_into_its_options(tmp_path):
    from beam_sft.convert import cli as convert_cli

    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"columns": {"tools": "fns"}, "column_map": {"system": "sys"}}))
    parser = argparse.ArgumentParser()
    convert_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["convert", "x.jsonl", "-o", "o.jsonl", "--config", str(config), "--columns",
                              "messages=dialog", "--allow-undeclared-tools", "--text-after-tool-call", "drop"])
    options = convert_cli.build_options(args)
    assert (options.columns.messages, options.columns.tools, options.columns.system) == ("dialog", "fns", "sys")
    assert not options.require_declared_tools and options.text_after_tool_call == "drop"


def test_format_choices_have_one_home():
    from beam_sft.convert import cli as convert_cli
    from beam_sft.convert import options
    from beam_sft.prepare import config

    assert convert_cli.FORMAT_CHOICES is config.FORMAT_CHOICES is options.FORMAT_CHOICES
    assert tuple(_actions("convert")["--format"].choices) == tuple(_actions("prepare")["--format"].choices)
