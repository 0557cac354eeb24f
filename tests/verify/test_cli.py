"""`beam-sft verify` and `beam-sft inspect` through their argparse handlers."""

from __future__ import annotations

import argparse
import shutil

import pytest

from beam_sft.verify.cli import register
from tests.verify.test_invariants import untrain_one_assistant_turn


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="beam-sft")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_registered_in_the_top_level_cli():
    try:
        from beam_sft.cli import build_parser

        parser = build_parser()
    except ModuleNotFoundError as exc:  # another stage's CLI module is not written yet
        pytest.skip(f"top-level CLI incomplete: {exc}")
    args = parser.parse_args(["verify", "d", "--sample", "3"])
    assert args.sample == 3 and args.func.__module__ == "beam_sft.verify.cli"
    assert parser.parse_args(["inspect", "d", "--row", "2"]).row == 2


def test_verify_clean_exits_zero(clean_dir, tmp_path, capsys):
    directory = tmp_path / "copy"
    shutil.copytree(clean_dir, directory)
    assert run(["verify", str(directory), "--no-histogram"]) == 0
    out = capsys.readouterr().out
    assert "violations 0 — OK" in out and "trained by channel" in out
    assert not (directory / "report_lengths.png").exists()


def test_verify_violation_exits_one_and_lists_it(make_prepared, tokenizer, capsys):
    directory = make_prepared(mutate=lambda records: untrain_one_assistant_turn(records, tokenizer))
    assert run(["verify", str(directory), "--num-proc", "1"]) == 1
    err = capsys.readouterr().err
    assert "row 1 (alpha.jsonl:1) [span_count]" in err
    assert "1 trained spans for 2 trained assistant turns" in err
    assert "⟦" in err  # the decoded excerpt
    assert str(directory / "verify_violations.jsonl") in err


def test_verify_caps_printed_violations(make_prepared, capsys):
    def untrain_all(records):
        for r in records:
            r["assistant_masks"] = [0] * len(r["assistant_masks"])
            r["num_trained"] = 0

    assert run(["verify", str(make_prepared(mutate=untrain_all)), "--max-violations", "2"]) == 1
    err = capsys.readouterr().err
    assert err.count("[no_trained]") + err.count("[span_count]") == 2 and "... 10 more" in err


def test_inspect_prints_and_writes_html(clean_dir, tmp_path, capsys):
    assert run(["inspect", str(clean_dir), "--row", "0", "--no-color"]) == 0
    out = capsys.readouterr().out
    assert "[user] <|start|>user<|message|>What is 2 + 2?<|end|>" in out
    assert "⟪<|channel|>analysis<|message|>Simple arithmetic.<|end|>⟫" in out
    page = tmp_path / "html" / "row0.html"
    assert run(["inspect", str(clean_dir), "--row", "0", "--html", str(page)]) == 0
    assert page.read_text().startswith("<!DOCTYPE html>")
    # a link named as --html is replaced by the page, the file it points to left as it was
    precious = tmp_path / "precious.txt"
    precious.write_text("MINE\n")
    link = tmp_path / "link.html"
    link.symlink_to(precious)
    assert run(["inspect", str(clean_dir), "--row", "0", "--html", str(link)]) == 0
    assert precious.read_text() == "MINE\n" and not link.is_symlink() and sorted(
        p.name for p in tmp_path.iterdir()) == ["html", "link.html", "precious.txt"]


def test_inspect_color_flag(clean_dir, capsys):
    assert run(["inspect", str(clean_dir), "--row", "0", "--color"]) == 0
    assert "\x1b[" in capsys.readouterr().out


def test_parity_sample_flag(clean_dir, tmp_path):
    import json

    directory = tmp_path / "copy"
    shutil.copytree(clean_dir, directory)
    assert run(["verify", str(directory), "--no-histogram", "--parity-sample", "2"]) == 0
    coverage = json.loads((directory / "report.json").read_text())["verify"]["coverage"]
    assert coverage["sampled"]["rows"] == 2 and coverage["sampled"]["of"] == 6
