"""The streaming pipeline and `beam-sft convert`: accounting, files written, exit codes, memory."""

from __future__ import annotations

import argparse
import json
import tracemalloc
from importlib import resources
from pathlib import Path

import pytest

from beam_sft.convert import CONVERTERS, ConvertOptions, Rejection, convert_files, iter_source
from beam_sft.convert import cli as convert_cli
from beam_sft.data import sources
from beam_sft.errors import BeamError, ConfigError

SAMPLES = Path(str(resources.files("beam_sft.data").joinpath("samples")))


def run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="beam-sft")
    convert_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["convert", *argv])
    return args.func(args)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_samples_convert_and_every_row_is_accounted_for(tmp_path):
    files = sorted(SAMPLES.iterdir())
    report = convert_files(files, output=tmp_path / "rows.jsonl", rejects=tmp_path / "rejects.jsonl")
    kept, rejected = _lines(tmp_path / "rows.jsonl"), _lines(tmp_path / "rejects.jsonl")
    assert [s.format for s in report.sources] == ["openai", "sharegpt", "hermes"]
    assert report.read == len(kept) + len(rejected) >= 36
    assert sorted(r["code"] for r in rejected) == [
        "harmony_marker_in_text",
        "missing_reasoning",
        "param_delimiter_in_argument",
    ]
    for record in rejected:
        assert set(record) == {"source", "row", "code", "message", "raw"}
        assert record["raw"] is not None and record["message"]
    sources = {r["meta"]["source"] for r in kept}
    assert sources == {str(f) for f in files}
    # the same rows come back from the streaming API, in order
    first = list(iter_source(files[0]))
    assert [r["meta"]["row"] for r in first if not isinstance(r, Rejection)] == [
        r["meta"]["row"] for r in kept if r["meta"]["source"] == str(files[0])
    ]


def test_cli_prints_the_table_and_detected_formats(tmp_path, capsys):
    assert (
        run_cli(
            str(SAMPLES / "chat_openai.jsonl"),
            "-o",
            str(tmp_path / "rows.jsonl"),
            "--rejects",
            str(tmp_path / "rej.jsonl"),
            "--summary-json",
            str(tmp_path / "s.json"),
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert "chat_openai.jsonl: format openai: 22 of 22 sampled rows" in err
    assert out.splitlines()[0].split() == ["source", "format", "read", "kept", "rejected", "reasons"]
    assert "harmony_marker_in_text=1" in out
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["sources"][0]["by_code"] == {"harmony_marker_in_text": 1, "param_delimiter_in_argument": 1}


def test_cli_fails_when_the_reject_rate_is_exceeded(tmp_path, capsys):
    out = str(tmp_path / "rows.jsonl")
    assert run_cli(str(SAMPLES / "chat_openai.jsonl"), "-o", out, "--max-reject-rate", "0.2") == 0
    assert run_cli(str(SAMPLES / "chat_openai.jsonl"), "-o", out, "--max-reject-rate", "0.05") == 1
    assert "rejected 9.1% of its rows" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["convert", "reason"])
def test_without_rejects_the_rejected_rows_are_written_beside_the_output(tmp_path, command, capsys):
    """Every input row ends in the output or in a rejects file: not giving --rejects must not drop them."""
    from beam_sft.cli import main

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"messages": [{"role": "user", "content": "q"},
                                            {"role": "assistant", "reasoning_content": "r", "content": "a"}]}) + "\n"
                   + json.dumps({"messages": [{"role": "wizard", "content": "q"}]}) + "\n", encoding="utf-8")
    out = tmp_path / "rows.jsonl"
    argv = [command, str(src), "-o", str(out)]
    if command == "reason":
        argv += ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]  # nothing to ask: every kept row has reasoning
    assert main(argv) == 0
    rejected = _lines(tmp_path / "rows.rejects.jsonl")
    assert [(r["row"], r["code"]) for r in rejected] == [(1, "unknown_role")] and len(_lines(out)) == 1
    if command == "convert":
        assert "1 rejected row(s) written to" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["convert", "reason"])
@pytest.mark.parametrize("theirs", ["notes\n", '{"source": "x"}\n', "\xff\n", "link"])
def test_the_unnamed_rejects_path_replaces_only_an_earlier_runs_rejects(tmp_path, command, theirs, capsys):
    """``-o rows.jsonl`` without ``--rejects`` writes rows.rejects.jsonl: over an earlier run's rejects (a
    rerun), never over a file of the user's there (text, a JSON line that is not a rejects record,
    bytes that are not UTF-8, a link), which is refused before anything is read; naming it replaces it."""
    from beam_sft.cli import main

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"messages": [{"role": "wizard", "content": "q"}]}) + "\n"
                   + json.dumps({"messages": [{"role": "user", "content": "q"},
                                              {"role": "assistant", "reasoning_content": "r", "content": "a"}]}) + "\n",
                   encoding="utf-8")
    out, default = tmp_path / "rows.jsonl", tmp_path / "rows.rejects.jsonl"
    argv = [command, str(src), "-o", str(out)]
    if command == "reason":
        argv += ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    assert main(argv) == 0 and main(argv) == 0  # a rerun replaces its own rejects
    assert [r["code"] for r in _lines(default)] == ["unknown_role"]
    out.unlink()
    default.unlink()
    target = tmp_path / "precious.txt"
    if theirs == "link":
        target.write_text("mine\n", encoding="utf-8")
        default.symlink_to(target)
    else:
        default.write_bytes(theirs.encode("latin-1"))
    before = default.read_bytes()
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "rows.rejects.jsonl" in err and "--rejects" in err and len(err.strip().splitlines()) == 1
    assert default.read_bytes() == before and not out.exists()
    assert default.is_symlink() == (theirs == "link")
    assert main([*argv, "--rejects", str(default)]) == 0  # named: the user's say
    assert [r["code"] for r in _lines(default)] == ["unknown_role"]


def test_a_failed_convert_leaves_the_earlier_outputs_as_they_were(tmp_path, capsys):
    """Outputs are staged and renamed at the end (dataset_folder/staged_files.py): a run that fails half
    way (a gzip cut short) publishes nothing, and the earlier output and rejects stay whole."""
    import gzip

    good = tmp_path / "good.jsonl"
    good.write_text((SAMPLES / "chat_openai.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    out, rej = tmp_path / "rows.jsonl", tmp_path / "rej.jsonl"
    assert run_cli(str(good), "-o", str(out), "--rejects", str(rej)) == 0
    before = (out.read_bytes(), rej.read_bytes())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(good.read_bytes() * 200)[:-200])
    from beam_sft.cli import main

    assert main(["convert", str(cut), "-o", str(out), "--rejects", str(rej)]) == 2
    assert (out.read_bytes(), rej.read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.jsonl.gz", "good.jsonl", "rej.jsonl", "rows.jsonl"]


def test_a_link_given_as_an_output_is_replaced_not_written_through(tmp_path):
    (tmp_path / "victim").mkdir()
    names = ("link.jsonl", "rej-link.jsonl", "sum-link.json")
    for name in names:
        (tmp_path / "victim" / name).write_text("MINE\n")
        (tmp_path / name).symlink_to(tmp_path / "victim" / name)
    assert run_cli(str(SAMPLES / "chat_openai.jsonl"), "-o", str(tmp_path / "link.jsonl"), "--rejects",
                   str(tmp_path / "rej-link.jsonl"), "--summary-json", str(tmp_path / "sum-link.json")) == 0
    assert all((tmp_path / "victim" / name).read_text() == "MINE\n" for name in names)
    assert not any((tmp_path / name).is_symlink() for name in names) and _lines(tmp_path / "link.jsonl")


def test_ctrl_c_is_one_line_exit_130(tmp_path, monkeypatch, capsys):
    from beam_sft.cli import main
    from beam_sft.convert import pipeline

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "convert_files", interrupted)
    out = tmp_path / "rows.jsonl"
    out.write_text("EARLIER\n")
    assert main(["convert", str(SAMPLES / "chat_openai.jsonl"), "-o", str(out)]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "interrupted" in err and out.read_text() == "EARLIER\n"


def test_cli_options_and_config(tmp_path):
    src = tmp_path / "d.jsonl"
    src.write_text(
        json.dumps({"dialog": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]}) + "\n"
    )
    config = tmp_path / "c.yaml"
    config.write_text("columns:\n  conversations: dialog\n")
    out = tmp_path / "rows.jsonl"
    assert (
        run_cli(
            str(src),
            "-o",
            str(out),
            "--config",
            str(config),
            "--format",
            "sharegpt",
            "--missing-reasoning",
            "unmask",
            "--max-reject-rate",
            "0",
        )
        == 1
    )  # no trained turn left
    config.write_text("columns:\n  convo: dialog\n")
    with pytest.raises(ConfigError, match="convert.columns.convo: unknown key"):
        run_cli(str(src), "-o", str(out), "--config", str(config))


def test_a_converter_bug_is_one_rejected_row_not_a_crash(tmp_path, monkeypatch):
    src = tmp_path / "a.jsonl"
    src.write_text('{"messages": []}\n{"messages": []}\n')

    def broken(raw, *, options):
        raise KeyError("boom")

    monkeypatch.setitem(CONVERTERS, "convert_openai", broken)
    results = list(iter_source(src, format="openai"))
    assert [r.code for r in results] == ["converter_error", "converter_error"]
    assert "KeyError" in results[0].message


def test_invalid_json_lines_are_rejected_in_place(tmp_path):
    src = tmp_path / "a.jsonl"
    good = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "reasoning_content": "r", "content": "a"},
        ]
    }
    src.write_text(json.dumps(good) + "\n{broken\n\n" + json.dumps(good) + "\n")
    results = list(iter_source(src))
    assert [r.code if isinstance(r, Rejection) else r["meta"]["row"] for r in results] == [
        0,
        "invalid_json",
        2,
    ]
    assert results[1].raw == "{broken"


def test_unknown_format_and_missing_file():
    with pytest.raises(BeamError, match="unknown format"):
        list(iter_source(SAMPLES / "chat_openai.jsonl", format="yaml"))
    with pytest.raises(BeamError, match="no such file"):
        list(iter_source("/nonexistent/x.jsonl"))


def _peak(path: Path, tmp_path: Path) -> int:
    tracemalloc.start()
    convert_files(
        [path],
        output=tmp_path / "out.jsonl",
        rejects=tmp_path / "rej.jsonl",
        options=ConvertOptions(missing_reasoning="unmask"),
    )
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_memory_stays_flat_as_input_grows(tmp_path, suffix, monkeypatch):
    monkeypatch.setattr(sources, "CHUNK", 16384)  # both inputs span many reads
    row = {
        "messages": [
            {"role": "user", "content": "x" * 200},
            {"role": "assistant", "reasoning_content": "r" * 200, "content": "y" * 200},
        ]
    }
    sizes = {}
    for n in (300, 3000):
        path = tmp_path / f"rows{n}{suffix}"
        text = "\n".join(json.dumps(row) for _ in range(n)) if suffix == ".jsonl" else json.dumps([row] * n)
        path.write_text(text)
        sizes[n] = _peak(path, tmp_path)
    # ten times the rows (about 2 MB of input) must not cost ten times the memory
    assert sizes[3000] < 2 * sizes[300] + 200_000, sizes


def test_the_format_registry_and_the_cli_choices_come_from_one_list():
    from beam_sft.convert import FORMAT_CONVERTERS, FORMATS

    assert tuple(FORMAT_CONVERTERS) == FORMATS
    assert convert_cli.FORMAT_CHOICES == ("auto", *FORMATS)


@pytest.mark.parametrize(("raw", "asked", "shown"), [
    ({"conversation": [{"input": "q", "output": "a"}]}, "openai", "pairs"),
    ({"text": "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\na<|im_end|>"}, "openai", "hermes"),
    ({"query": "q", "answers": "[]", "tools": "[]"}, "sharegpt", "xlam"),
])
def test_a_row_the_asked_format_cannot_read_says_whose_shape_it_has(raw, asked, shown):
    """Under an explicit --format, such a row was told only "no 'messages' list" (the mapping hint),
    with nothing saying that another reader, or auto, reads it."""
    from beam_sft.convert import ConvertOptions, Rejection, convert_row

    found = convert_row(raw, format=asked, options=ConvertOptions())
    assert isinstance(found, Rejection) and found.code == "malformed_row"
    assert found.message.endswith(f"(the row's shape is format {shown}'s: try format auto or {shown})")
    assert "shape is" not in convert_row({"x": 1}, format=asked, options=ConvertOptions()).message
