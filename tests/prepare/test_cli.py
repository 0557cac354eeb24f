"""``beam-sft prepare`` / ``merge-shards``: flags, recipes, and the command end to end."""

from __future__ import annotations

import argparse

import pytest
import yaml

from beam_sft.cli import main
from beam_sft.errors import ConfigError
from beam_sft.prepare import cli
from tests.encode.conftest import simple_row, write_jsonl


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["prepare", *argv])


def test_flags_only(monkeypatch):
    monkeypatch.delenv("BEAM_MODEL_ID", raising=False)
    config = cli.build_config(parse("--data", "a.jsonl", "--data", "b.json", "--weight", "1", "--weight", "0.5",
                                    "--format", "sharegpt", "--tokenizer", "tok", "--max-length", "128",
                                    "--length-policy", "trim_turns", "--num-shards", "4", "--shard-index", "3"))
    assert [(s.path, s.format, s.weight) for s in config.sources] == [("a.jsonl", "sharegpt", 1.0),
                                                                      ("b.json", "sharegpt", 0.5)]
    assert (config.tokenizer, config.max_length, config.length_policy) == ("tok", 128, "trim_turns")
    assert (config.num_shards, config.shard_index) == (4, 3)


def test_recipe_section_with_overrides_and_model_fallback(tmp_path, monkeypatch):
    monkeypatch.setenv("BEAM_MODEL_ID", "from-env")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({
        "model": {"path": "model-dir"},
        "data": {"prepare": {"sources": [{"path": "x.jsonl", "weight": 2}], "max_length": 64}},
        "sft": {"learning_rate": 1e-4},
    }))
    config = cli.build_config(parse("--config", str(recipe), "--max-length", "32", "--no-verify"))
    assert config.tokenizer == "model-dir" and config.max_length == 32 and config.verify is False
    assert config.sources[0].weight == 2.0


def test_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="weight"):
        cli.build_config(parse("--data", "a", "--weight", "1", "--weight", "2"))
    with pytest.raises(ConfigError, match="--config or at least one --data"):
        cli.build_config(parse())
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"data": {"prepare": {"sources": [], "max_lenght": 3}}}))
    with pytest.raises(ConfigError, match=r"data\.prepare\.max_lenght: unknown key"):
        cli.build_config(parse("--config", str(bad)))


def test_prepare_command_end_to_end(tmp_path, tokenizer_dir, capsys, caplog):
    data = write_jsonl(tmp_path / "rows.jsonl", [simple_row(i) for i in range(5)])
    out = tmp_path / "out"
    argv = ["prepare", "--data", str(data), "--tokenizer", str(tokenizer_dir), "--output", str(out),
            "--num-proc", "1"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "rows 5" in printed and f"prepared dataset: {out}" in printed
    before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.glob("data-*.arrow")}
    report = (out / "report.json").read_text()
    caplog.clear()
    with caplog.at_level("INFO", logger="beam_sft.prepare"):
        assert main(argv) == 0  # cached: reused as it is, not written again
    assert any(r.getMessage() == f"cache hit: {out}" for r in caplog.records)
    assert {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.glob("data-*.arrow")} == before
    assert (out / "report.json").read_text() == report
    printed = capsys.readouterr().out
    assert "rows 5" in printed and f"prepared dataset: {out}" in printed


def test_merge_command_reports_a_bad_set(tmp_path, capsys):
    (tmp_path / "shard").mkdir()  # beside the output: an output inside a shard is refused first (the guard)
    assert main(["merge-shards", str(tmp_path / "shard"), "--output", str(tmp_path / "merged")]) == 2
    assert "not a prepared dataset" in capsys.readouterr().err


def test_num_shards_without_a_shard_index_is_refused(capsys):
    """It prepared shard 0 alone, and its summary read like the whole source's."""
    assert main(["prepare", "--data", "a.jsonl", "--tokenizer", "t", "--output", "o", "--num-shards", "2"]) == 2
    assert "--num-shards 2 needs --shard-index I" in capsys.readouterr().err


def test_a_bad_value_a_flag_gave_is_not_blamed_on_the_config_file(tmp_path):
    """`--config prep.yaml --shard-index 1` (the file sets no shard) said `prep.yaml: shard_index: ...`,
    sending the user to a file that does not hold the value; a bad value the file holds still names it."""
    config = tmp_path / "prep.yaml"
    config.write_text(yaml.safe_dump({"sources": [{"path": "a.jsonl", "weight": -1}], "tokenizer": "t"}))
    with pytest.raises(ConfigError) as info:
        cli.build_config(parse("--config", str(config), "--data", "a.jsonl", "--shard-index", "1"))
    assert str(info.value).startswith("shard_index: must be in [0, 1), got 1"), str(info.value)
    with pytest.raises(ConfigError, match=r"prep\.yaml: sources\[0\]\.weight: must be from 0"):
        cli.build_config(parse("--config", str(config), "--max-length", "8"))
