"""``beam-sft train`` / ``beam-sft merge`` argument handling (through this package's ``register``)."""

from __future__ import annotations

import argparse

import pytest
import yaml

from beam_sft.errors import ConfigError
from beam_sft.train import cli

from .conftest import recipe_dict


def _parser():
    parser = argparse.ArgumentParser(prog="beam-sft")
    cli.register(parser.add_subparsers(dest="command", required=True))
    return parser


def test_overrides_are_kept_in_order():
    args = _parser().parse_args(["train", "--config", "r.yaml", "--sft.max_steps", "3", "--lora.r=8"])
    assert args.config == "r.yaml"
    assert args.overrides == ["--sft.max_steps", "3", "--lora.r=8"]
    with pytest.raises(SystemExit):  # other subcommands still reject unknown flags
        _parser().parse_args(["merge", "a", "-o", "b", "--nope"])


def test_train_command_runs_and_rejects_unknown_keys(fixture_dir, prepared_dir, tmp_path, capsys):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(recipe_dict(fixture_dir, prepared_dir, tmp_path / "unused")))
    out = tmp_path / "out"
    args = _parser().parse_args(["train", "--config", str(recipe), "--sft.max_steps", "2",
                                 "--sft.output_dir", str(out)])
    assert args.func(args) == 0
    assert (out / "model.safetensors").is_file()
    assert f"saved to {out}" in capsys.readouterr().out

    args = _parser().parse_args(["train", "--config", str(recipe), "--sft.max_stepz", "2"])
    with pytest.raises(ConfigError) as info:
        args.func(args)
    assert info.value.path == "sft.max_stepz"


def test_model_path_falls_back_to_beam_model_id(fixture_dir, prepared_dir, tmp_path, monkeypatch):
    data = recipe_dict(fixture_dir, prepared_dir, tmp_path / "out", sft={"max_steps": 1})
    data["model"]["path"] = ""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("BEAM_MODEL_ID", str(fixture_dir))
    args = _parser().parse_args(["train", "--config", str(recipe)])
    assert args.func(args) == 0
    monkeypatch.delenv("BEAM_MODEL_ID")
    with pytest.raises(ConfigError) as info:
        args.func(args)
    assert info.value.path == "model.path"


def test_no_private_argparse_api():
    import inspect
    import re

    source = inspect.getsource(cli)
    assert not re.search(r"\._[a-z]\w*", source.replace("._keep_overrides", "").replace("._train", "")
                         .replace("._merge", "")), "train/cli.py must not reach into argparse's private state"


def test_a_model_path_holding_only_a_tokenizer_is_one_line(fixture_dir, prepared_dir, tmp_path, capsys):
    """Found in a review: AutoConfig's ValueError reached the user as a traceback."""
    import shutil

    from beam_sft.cli import main

    tokenizer_only = tmp_path / "tok"
    shutil.copytree(fixture_dir, tokenizer_only)
    for name in ("config.json", "model.safetensors", "generation_config.json"):
        (tokenizer_only / name).unlink(missing_ok=True)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(recipe_dict(tokenizer_only, prepared_dir, tmp_path / "out")))
    assert main(["train", "--config", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "a folder without config.json" in err and err.strip().count("\n") == 0 and "Traceback" not in err
