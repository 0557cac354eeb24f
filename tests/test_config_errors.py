"""Hostile configs (and the recipe half of duplicate keys): a config that cannot be meant is refused with
exit 2 and one line holding the key path or the file, never a traceback and never the last of two
values: non-finite numbers (NaN, inf, 1e400), a key given twice, a tag (``!!python/object``: never
constructed), a missing, binary or unparsable file, a model path that is neither here nor a hub id."""

from __future__ import annotations

import pytest

from beam_sft.cli import main
from beam_sft.config_utils import load_yaml, parse_overrides
from beam_sft.errors import ConfigError
from tests.tree import assert_one_line_error

RECIPE_TAIL = "sft:\n  output_dir: {out}\n  use_cpu: true\n"

BAD_RECIPES = {
    "weight NaN": ("data:\n  prepare:\n    sources:\n      - {path: a.jsonl, weight: .nan}\n",
                   "data.prepare.sources[0].weight"),
    "weight inf": ("data:\n  prepare:\n    sources:\n      - {path: a.jsonl, weight: .inf}\n",
                   "data.prepare.sources[0].weight"),
    "weight 1e400": ("data:\n  prepare:\n    sources:\n      - {path: a.jsonl, weight: 1e400}\n",
                     "data.prepare.sources[0].weight"),
    "learning_rate twice": ("sft:\n  learning_rate: 1e-4\n  output_dir: o\n  learning_rate: 2e-4\n",
                            "sft.learning_rate: given twice"),
    "nested key twice": ("data:\n  prepare:\n    sources:\n      - {path: a.jsonl, path: b.jsonl}\n",
                         "data.prepare.sources[0].path: given twice"),
    "learning_rate NaN": ("sft:\n  learning_rate: .nan\n", "sft.learning_rate"),
    "python tag": ("model: !!python/object/apply:os.system ['echo pwned > PWNED']\n", "python/object"),
    "not yaml": ("sft: [unclosed\n", "not valid YAML"),
    "model path nowhere": ("model:\n  path: /no/such/model/here\ndata:\n  prepared: .\n", "model.path"),
}


@pytest.mark.parametrize("case", sorted(BAD_RECIPES))
def test_train_refuses_a_bad_recipe_in_one_line(tmp_path, case, capsys, monkeypatch):
    text, needle = BAD_RECIPES[case]
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    assert main(["train", "--config", str(path)]) == 2
    assert_one_line_error(capsys.readouterr().err, "train", needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recipe.yaml"]  # nothing ran: no file written


@pytest.mark.parametrize("command", ["train", "prepare", "convert"])
def test_a_missing_or_binary_config_file_is_one_line(tmp_path, command, capsys):
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe")
    nul = tmp_path / "n.yaml"
    nul.write_bytes(b"a: 1\x00\n")
    folder = tmp_path / "configs"
    folder.mkdir()
    extra = ["x.jsonl", "-o", str(tmp_path / "o.jsonl")] if command == "convert" else []
    for path, needle in ((tmp_path / "missing.yaml", "No such file"), (binary, "not a YAML text file"),
                         (nul, "not a YAML text file"), (folder, "cannot read the config")):
        assert main([command, *extra, "--config", str(path)]) == 2
        assert_one_line_error(capsys.readouterr().err, command, needle)


@pytest.mark.parametrize("weight", ["nan", "inf", "-inf", "1e400"])
def test_prepare_weight_flag_must_be_finite(tmp_path, weight, capsys):
    # refused by the flag's own type (beam_sft.cli_args), before any config is built: one line, exit 2
    with pytest.raises(SystemExit) as exc:
        main(["prepare", "--data", "a.jsonl", f"--weight={weight}", "--tokenizer", "t", "--output", str(tmp_path / "o")])
    assert exc.value.code == 2
    assert_one_line_error(capsys.readouterr().err, "prepare", "--weight", "finite")


def test_a_tag_is_never_constructed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "r.yaml"
    path.write_text("x: !!python/object/apply:os.system ['touch PWNED']\n")
    with pytest.raises(ConfigError):
        load_yaml(path)
    assert not (tmp_path / "PWNED").exists()


def test_anchors_and_merge_keys_are_not_duplicates(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("base: &b {lr: 1}\nsft:\n  <<: *b\n  other: 2\nagain: *b\n")
    assert load_yaml(path) == {"base": {"lr": 1}, "sft": {"lr": 1, "other": 2}, "again": {"lr": 1}}


def test_an_override_given_twice_is_refused():
    with pytest.raises(ConfigError, match="sft.learning_rate: given twice"):
        parse_overrides(["--sft.learning_rate", "1e-4", "--sft.learning_rate=2e-4"])


@pytest.mark.parametrize(("command", "text", "key"), [
    ("train", "model: {path: m}\ndata: {prepared: p}\nsft: {learnig_rate: 1}\n", "sft.learnig_rate"),
    ("prepare", "tokenizer: t\noutput: o\nsources: [{path: a.jsonl, wieght: 2}]\n", "sources[0].wieght"),
    ("convert", "missing_reasonin: drop\n", "convert.missing_reasonin"),
    # A source's converter options are checked at load, under their own key (not first at run time,
    # without the data.prepare prefix).
    ("prepare", "data:\n  prepare:\n    tokenizer: t\n    output: o\n    sources: [{path: a.jsonl, convert: "
     "{missing_reasonig: drop}}]\n", "data.prepare.sources[0].convert.missing_reasonig"),
    ("prepare", "tokenizer: t\noutput: o\nsources: [{path: a.jsonl, columns: {mesages: dialog}}]\n",
     "sources[0].columns.mesages"),
    ("prepare", "tokenizer: t\noutput: o\nsources: [{path: a.jsonl, convert: {max_row_chars: 0}}]\n",
     "sources[0].convert.max_row_chars"),
    ("prepare", "tokenizer: t\noutput: o\nsources: [{path: a.jsonl, convert: [infer_tools]}]\n",
     "sources[0].convert"),
    # The same column named twice with two values: one side would win unsaid.
    ("prepare", "tokenizer: t\noutput: o\nsources: [{path: a.jsonl, columns: {messages: dialog}, "
     "convert: {columns: {messages: chat}}}]\n", "sources[0].convert.columns.messages"),
    ("prepare", "tokenizer: t\noutput: o\nsources: [{path: a.jsonl, columns: {messages: dialog}, "
     "column_map: {messages: chat}}]\n", "sources[0].column_map.messages"),
])
def test_a_bad_key_is_said_with_the_file_it_is_in(tmp_path, command, text, key, capsys):
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    extra = ["x.jsonl", "-o", str(tmp_path / "o.jsonl")] if command == "convert" else []
    assert main([command, *extra, "--config", str(path)]) == 2
    assert_one_line_error(capsys.readouterr().err, command, f"{path}: ", key)


def test_a_bad_key_a_flag_set_is_not_blamed_on_the_file(tmp_path, capsys):
    path = tmp_path / "cfg.yaml"
    path.write_text("model: {path: m}\ndata: {prepared: p}\nsft: {learning_rate: 1.0e-4}\n")
    assert main(["train", "--config", str(path), "--sft.learnig_rate", "1"]) == 2
    err = capsys.readouterr().err
    assert_one_line_error(err, "train", "sft.learnig_rate")
    assert str(path) not in err


def test_no_sources_in_a_recipes_prepare_names_the_recipes_key(tmp_path, capsys):
    path = tmp_path / "cfg.yaml"
    path.write_text("model: {path: m}\ndata: {prepare: {sources: []}}\nsft: {use_cpu: true, output_dir: " + str(tmp_path / "o") + "}\n")
    assert main(["train", "--config", str(path)]) == 2
    assert_one_line_error(capsys.readouterr().err, "train", "data.prepare.sources: no data sources given")
