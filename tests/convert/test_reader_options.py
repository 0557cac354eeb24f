"""Options of every reader: ``--columns`` with several pairs after one flag (as ``--help`` shows
it) as well as repeated, in convert, reason and prepare alike; schema type names public sets write
outside JSON Schema (``"type": "dict"``, ``str``, Gemini's ``OBJECT``) rendered as JSON Schema's."""

from __future__ import annotations

import json

import pytest

from beam_sft.cli import build_parser, main
from beam_sft.convert.cli import build_options
from beam_sft.convert.tools import normalize_tools

COT = {"Question": "q", "Complex_CoT": "c", "Response": "a"}


@pytest.mark.parametrize("flags", [
    ["--columns", "prompt=Question", "reasoning=Complex_CoT", "answer=Response"],
    ["--columns", "prompt=Question", "--columns", "reasoning=Complex_CoT", "--columns", "answer=Response"],
    ["--columns", "prompt=Question", "reasoning=Complex_CoT", "--columns", "answer=Response"],
])
def test_columns_one_flag_or_repeated(tmp_path, flags):
    path = tmp_path / "cot.jsonl"
    path.write_text(json.dumps(COT) + "\n")
    out = tmp_path / "o.jsonl"
    assert main(["convert", str(path), "-o", str(out), *flags]) == 0
    (row,) = map(json.loads, out.read_text().splitlines())
    assert row["messages"][1] == {"role": "assistant", "reasoning_content": "c", "content": "a"}


@pytest.mark.parametrize("command", [
    ["convert", "x.jsonl", "-o", "o.jsonl"],
    ["reason", "x.jsonl", "-o", "o.jsonl", "--base-url", "http://127.0.0.1:1/v1", "--model", "m"],
])
def test_every_command_reads_several_pairs(command):
    args = build_parser().parse_args([*command, "--columns", "prompt=Question", "answer=Response",
                                      "--pythonic-tool-calls", "--infer-tools"])
    options = build_options(args)
    assert (options.columns.prompt, options.columns.answer) == ("Question", "Response")
    assert options.pythonic_tool_calls and options.infer_tools


def test_prepare_reads_several_pairs():
    from beam_sft.prepare import cli

    parser = build_parser()
    args = parser.parse_args(["prepare", "--data", "a.jsonl", "--tokenizer", "t", "--columns", "prompt=Question",
                              "answer=Response"])
    config = cli.build_config(args)
    assert config.sources[0].convert["columns"] == {"prompt": "Question", "answer": "Response"}


@pytest.mark.parametrize("command", [["convert", "a.jsonl", "-o", "o.jsonl"],
                                     ["prepare", "--data", "a.jsonl", "--tokenizer", "t", "--output", "o"]])
def test_a_column_given_twice_with_two_names_is_refused(command, capsys):
    """The last pair would win unsaid; the same pair twice is harmless."""
    assert main([*command, "--columns", "messages=a", "--columns", "messages=b"]) == 2
    assert "--columns names messages twice (a and b)" in capsys.readouterr().err
    args = build_parser().parse_args(["convert", "x.jsonl", "-o", "o.jsonl", "--columns", "messages=a", "messages=a"])
    assert build_options(args).columns.messages == "a"


def test_a_non_pair_after_columns_is_refused_with_a_hint(tmp_path, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["convert", "-o", "o.jsonl", "--columns", "prompt=Question", "data.jsonl"])
    assert "INPUT goes before --columns" in capsys.readouterr().err


def test_python_and_gemini_type_names_render_as_json_schema(render_beam):
    """BFCL/ToolACE write "type": "dict" (and "str", "int"): the template knows JSON Schema's names
    only and would show the model ``any`` with no members."""
    tools = normalize_tools([{"name": "get_weather", "parameters": {"type": "dict", "properties": {
        "city": {"type": "str"}, "days": {"type": "int"}, "hourly": {"type": "BOOLEAN"},
        "spots": {"type": "list", "items": {"type": "float"}}}, "required": ["city"]}}], "tools")
    params = tools[0]["function"]["parameters"]
    assert params["type"] == "object" and params["properties"]["spots"] == {"type": "array", "items": {"type": "number"}}
    text = render_beam([{"role": "user", "content": "hi"}], tools=tools)
    assert "city: string" in text and "days?: number" in text and "hourly?: boolean" in text
    assert "spots?: number[]" in text
