"""No command writes over (or into, or around) what it reads, and no two
outputs of a command are one file. Every writing command goes through ``beam_sft.paths``; each case
checks the exit code, the one error line and that nothing of the user's changed (a digest of the tree)."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from beam_sft.cli import main
from beam_sft.paths import check_paths, relation
from tests.tree import assert_one_line_error, tree_digest

ROW = {"messages": [{"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "hello", "reasoning_content": "greet"}]}


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "work"
    d.mkdir()
    (d / "x.jsonl").write_text(json.dumps(ROW) + "\n" + json.dumps(ROW) + "\n")
    (d / "sub").mkdir()
    (d / "sub" / "y.jsonl").write_text(json.dumps(ROW) + "\n")
    return d


# ------------------------------------------------------------------ the guard itself

def test_relation_sees_through_spellings_links_and_hard_links(tmp_path):
    f = tmp_path / "f.jsonl"
    f.write_text("x")
    os.link(f, tmp_path / "hard")
    os.symlink(f, tmp_path / "soft")
    (tmp_path / "d").mkdir()
    for spelling in (f, tmp_path / "hard", tmp_path / "soft", tmp_path / "d" / ".." / "f.jsonl", f"{f}/"):
        assert relation(spelling, f) == "is", spelling
    assert relation(tmp_path / "d" / "new" / "deeper", tmp_path / "d") == "lies inside"
    assert relation(tmp_path, f) == "contains"
    assert relation(tmp_path / "F.jsonl", f) is None  # another file on a case-sensitive file system
    with pytest.raises(Exception, match="two outputs must be different files"):
        check_paths({}, {"-o": tmp_path / "new.jsonl", "--rejects": tmp_path / "d" / ".." / "new.jsonl"})


# ------------------------------------------------------------------ convert (class 2)

CONVERT_CASES = {
    "-o is the input": lambda d: ["x.jsonl", "-o", "x.jsonl"],
    "--rejects is the input": lambda d: ["x.jsonl", "-o", "rows.jsonl", "--rejects", "x.jsonl"],
    "-o and --rejects one file": lambda d: ["x.jsonl", "-o", "r.jsonl", "--rejects", "r.jsonl"],
    "-o and --rejects one file, spelled apart": lambda d: ["x.jsonl", "-o", "r.jsonl", "--rejects", "sub/../r.jsonl"],
    "-o a hard link of the input": lambda d: (os.link(d / "x.jsonl", d / "h.jsonl"), ["x.jsonl", "-o", "h.jsonl"])[1],
    "-o a symlink to the input": lambda d: (os.symlink("x.jsonl", d / "s.jsonl"), ["x.jsonl", "-o", "s.jsonl"])[1],
    "-o inside an input folder": lambda d: ["sub", "-o", "sub/rows.jsonl"],
    "-o is an input folder's file": lambda d: ["sub", "-o", "sub/y.jsonl"],
    "--summary-json is the config": lambda d: (d.joinpath("c.yaml").write_text("{}\n"),
                                               ["x.jsonl", "-o", "r.jsonl", "--config", "c.yaml",
                                                "--summary-json", "c.yaml"])[1],
    "-o a folder": lambda d: ["x.jsonl", "-o", "sub"],
    "-o under a file": lambda d: ["x.jsonl", "-o", "x.jsonl/rows.jsonl"],
    "-o with a trailing slash": lambda d: ["x.jsonl", "-o", "x.jsonl/"],
}


@pytest.mark.parametrize("case", sorted(CONVERT_CASES))
def test_convert_refuses_before_anything_is_written(data, case, capsys, monkeypatch):
    argv = CONVERT_CASES[case](data)
    monkeypatch.chdir(data)
    before = tree_digest(data)
    assert main(["convert", *argv]) == 2
    assert_one_line_error(capsys.readouterr().err, "convert", "refusing to write to")
    assert tree_digest(data) == before


REASON_CASES = {
    "-o is the input": ["x.jsonl", "-o", "x.jsonl"],
    "--rejects is the input": ["x.jsonl", "-o", "rows.jsonl", "--rejects", "x.jsonl"],
    "-o and --rejects one file": ["x.jsonl", "-o", "r.jsonl", "--rejects", "r.jsonl"],
    "--cache-dir is the input folder": ["sub/y.jsonl", "-o", "r.jsonl", "--cache-dir", "sub"],
    "--cache-dir holds -o": ["x.jsonl", "-o", "cache/r.jsonl", "--cache-dir", "cache"],
    "--cache-dir is a file": ["x.jsonl", "-o", "r.jsonl", "--cache-dir", "x.jsonl"],
}


@pytest.mark.parametrize("case", sorted(REASON_CASES))
def test_reason_refuses_before_anything_is_written_or_asked(data, case, capsys, monkeypatch):
    # The base URL names no server: a refusal must come before any request (or the run would fail
    # on the connection instead, with another message).
    monkeypatch.chdir(data)
    before = tree_digest(data)
    argv = ["reason", *REASON_CASES[case], "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "-q"]
    assert main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "reason", "refusing to write to")
    assert tree_digest(data) == before


def test_convert_into_new_files_still_works(data, capsys, monkeypatch):
    monkeypatch.chdir(data)
    assert main(["convert", "x.jsonl", "-o", "out/rows.jsonl", "--rejects", "out/rejects.jsonl"]) == 0
    assert len((data / "out" / "rows.jsonl").read_text().splitlines()) == 2


# ------------------------------------------------------------------ train (class 1)

def _recipe(tmp_path, fixture_dir, prepared, **sft):
    recipe = {"model": {"path": str(fixture_dir)}, "data": {"prepared": str(prepared)},
              "sft": {"output_dir": str(tmp_path / "run"), "use_cpu": True, **sft}}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


@pytest.fixture
def model_copy(tmp_path, fixture_dir):
    import shutil

    return shutil.copytree(fixture_dir, tmp_path / "model")


TRAIN_CASES = {
    "the model": lambda m, p: m,
    "inside the model": lambda m, p: m / "run",
    "around the model": lambda m, p: m.parent,
    "the model through a link": lambda m, p: (os.symlink(m, m.parent / "link"), m.parent / "link")[1],
    "the model spelled with ..": lambda m, p: m / ".." / "model",
    "the prepared folder": lambda m, p: p,
    "inside the prepared folder": lambda m, p: p / "run",
}


@pytest.mark.parametrize("case", sorted(TRAIN_CASES))
def test_train_refuses_an_output_dir_over_what_it_reads(tmp_path, model_copy, case, capsys):
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    (prepared / "report.json").write_text("{}")
    recipe = _recipe(tmp_path, model_copy, prepared)
    out = TRAIN_CASES[case](model_copy, prepared)
    before = tree_digest(tmp_path)
    assert main(["train", "--config", str(recipe), "--sft.output_dir", str(out)]) == 2
    assert_one_line_error(capsys.readouterr().err, "train", "sft.output_dir")
    assert tree_digest(tmp_path) == before


def test_train_refuses_a_tokenizer_or_source_of_its_prepare(tmp_path, model_copy, capsys):
    recipe = {"model": {"path": str(model_copy)},
              "data": {"prepare": {"tokenizer": str(model_copy), "output": str(tmp_path / "prep"),
                                   "sources": [{"path": str(tmp_path / "src" / "a.jsonl")}]}},
              "sft": {"output_dir": str(tmp_path / "src"), "use_cpu": True}}
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.jsonl").write_text(json.dumps(ROW) + "\n")
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(recipe))
    before = tree_digest(tmp_path)
    assert main(["train", "--config", str(path)]) == 2
    assert_one_line_error(capsys.readouterr().err, "train", "data.prepare.sources")
    assert tree_digest(tmp_path) == before


def test_train_refuses_an_output_dir_inside_the_checkpoint_it_resumes_from(tmp_path, model_copy):
    from beam_sft.errors import OutputRefused
    from beam_sft.train.data import check_output_dir
    from beam_sft.train.recipe import load_recipe

    checkpoint = tmp_path / "other-run" / "checkpoint-2"
    checkpoint.mkdir(parents=True)
    recipe = load_recipe(_recipe(tmp_path, model_copy, tmp_path / "none", resume_from_checkpoint=str(checkpoint),
                                 output_dir=str(checkpoint / "again")))
    with pytest.raises(OutputRefused, match="resumes from"):
        check_output_dir(recipe)
    # the usual case, a checkpoint inside the run's own output_dir, is fine
    fine = load_recipe(_recipe(tmp_path, model_copy, tmp_path / "none", resume_from_checkpoint=str(checkpoint),
                               output_dir=str(tmp_path / "other-run")))
    check_output_dir(fine)


@pytest.mark.parametrize("names", [["README.md"], ["config.json", "notes.txt"], ["sub/"],
                                   # a name a run writes beside a user's files does not make the folder a run's
                                   ["runs/", "README.md", "config.json"], ["eval/", "notes.txt"],
                                   ["checkpoint-3/", "README.md"]])
def test_train_refuses_an_output_dir_holding_a_users_files(tmp_path, model_copy, names, capsys):
    """The final save writes README.md (the card), config.json, the tokenizer and the weights into
    output_dir: a folder with anything a training run does not write is not replaced into."""
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    (prepared / "report.json").write_text("{}")
    out = tmp_path / "mine"
    for name in names:
        (out / name).mkdir(parents=True) if name.endswith("/") else (out.mkdir(exist_ok=True),
                                                                   (out / name).write_text("MY PROJECT\n"))
    recipe = _recipe(tmp_path, model_copy, prepared)
    before = tree_digest(tmp_path)
    assert main(["train", "--config", str(recipe), "--sft.output_dir", str(out)]) == 2
    assert_one_line_error(capsys.readouterr().err, "train", "sft.output_dir holds files no training run wrote")
    assert tree_digest(tmp_path) == before


def test_an_earlier_runs_output_dir_is_its_own(tmp_path, model_copy):
    from beam_sft.train.data import check_output_dir
    from beam_sft.train.recipe import load_recipe

    for marks in (["beam_run.json", "README.md", "config.json"], ["prepared_view"], ["runs", "losses.jsonl"]):
        out = tmp_path / "_".join(marks)
        for name in marks:
            (out / name).mkdir(parents=True) if "." not in name else (out.mkdir(exist_ok=True),
                                                                       (out / name).write_text("{}"))
        check_output_dir(load_recipe(_recipe(tmp_path, model_copy, tmp_path / "none", output_dir=str(out))))


def test_an_earlier_runs_checkpoints_are_refused_unless_the_run_resumes(tmp_path, model_copy):
    """A second run into a finished run's folder rotated its checkpoints away (save_total_limit) or saved its
    own among them, which a later resume_from_checkpoint: true would mix up."""
    from beam_sft.errors import OutputRefused
    from beam_sft.train.data import check_output_dir
    from beam_sft.train.recipe import load_recipe

    out = tmp_path / "run"
    for name in ("checkpoint-2", "checkpoint-4"):
        (out / name).mkdir(parents=True)
        (out / name / "trainer_state.json").write_text('{"global_step": 2}')
    (out / "beam_run.json").write_text("{}")
    with pytest.raises(OutputRefused, match=r"earlier run's checkpoints \(checkpoint-2, checkpoint-4\)"):
        check_output_dir(load_recipe(_recipe(tmp_path, model_copy, tmp_path / "none", output_dir=str(out))))
    check_output_dir(load_recipe(_recipe(tmp_path, model_copy, tmp_path / "none", output_dir=str(out),
                                         resume_from_checkpoint=True)))


def test_the_api_path_checks_too(tmp_path, model_copy):
    """``train(recipe)`` without the CLI: resolve_prepared checks before it prepares or writes."""
    from beam_sft.errors import OutputRefused
    from beam_sft.train.data import resolve_prepared
    from beam_sft.train.recipe import load_recipe

    recipe = load_recipe(_recipe(tmp_path, model_copy, tmp_path, output_dir=str(model_copy)))
    with pytest.raises(OutputRefused, match="model.path"):
        resolve_prepared(recipe)


def test_train_names_a_model_path_that_is_neither_here_nor_a_hub_id(tmp_path, capsys):
    recipe = _recipe(tmp_path, tmp_path / "no" / "such" / "model", tmp_path)
    assert main(["train", "--config", str(recipe)]) == 2
    assert_one_line_error(capsys.readouterr().err, "train", "model.path", "does not exist")


# ------------------------------------------------------------------ export, merge, inspect, fixture

def test_export_refuses_its_checkpoint_and_config(tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    (ckpt / "pytorch_model_fsdp_0").mkdir(parents=True)
    (ckpt / "pytorch_model_fsdp_0" / ".metadata").write_bytes(b"x")
    (ckpt / "config.json").write_text("{}")
    before = tree_digest(tmp_path)
    for out in (ckpt, ckpt / "hf", tmp_path):
        assert main(["export", str(ckpt), "-o", str(out)]) == 2
        assert_one_line_error(capsys.readouterr().err, "export", "refusing to write to")
    assert tree_digest(tmp_path) == before


def test_merge_refuses_its_base_and_adapter_and_a_full_folder(tmp_path, model_copy, capsys):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(model_copy)}))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("x")
    before = tree_digest(tmp_path)
    for out in (model_copy, adapter, adapter / "merged", mine):
        assert main(["merge", str(adapter), "-o", str(out)]) == 2
        assert_one_line_error(capsys.readouterr().err, "merge", "refusing to write to")
    assert tree_digest(tmp_path) == before


def test_inspect_html_is_never_into_the_folder_nor_a_folder(tmp_path, capsys):
    d = tmp_path / "prep"
    d.mkdir()
    (d / "report.json").write_text("{}")
    before = tree_digest(tmp_path)
    for html in (d / "report.json", d / "row.html", tmp_path):
        assert main(["inspect", str(d), "--row", "0", "--html", str(html)]) == 2
        assert_one_line_error(capsys.readouterr().err, "inspect", "refusing to write to")
    assert tree_digest(tmp_path) == before


def test_fixture_out_that_is_a_file_is_one_line(tmp_path, capsys):
    f = tmp_path / "f"
    f.write_text("mine")
    for out in (f, f / "under"):
        assert main(["fixture", "--out", str(out)]) == 2
        assert_one_line_error(capsys.readouterr().err, "fixture", "refusing to write to")
    assert f.read_text() == "mine"


def test_fixture_never_overwrites_a_users_model(tmp_path, capsys):
    mine = tmp_path / "mymodel"
    mine.mkdir()
    (mine / "config.json").write_text("{\"my\": \"model\"}")
    before = tree_digest(mine)
    assert main(["fixture", "--out", str(mine), "--no-model"]) == 2
    assert_one_line_error(capsys.readouterr().err, "fixture", "did not write")
    assert tree_digest(mine) == before
    # a folder of ours (marked), or one an older version built (the same bytes), is built again
    assert main(["fixture", "--out", str(tmp_path / "fx"), "--no-model"]) == 0
    assert main(["fixture", "--out", str(tmp_path / "fx"), "--no-model"]) == 0
    from beam_sft.dataset_folder import owner

    (tmp_path / "fx" / owner.MARKER).unlink()
    assert main(["fixture", "--out", str(tmp_path / "fx"), "--no-model"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fx", "mymodel"]  # no check folder left


# ------------------------------------------------------------------ prepare and merge-shards vs their inputs

PREPARE_CASES = {
    "the source folder": lambda d, t: d,
    "inside the source folder": lambda d, t: d / "prep",
    "around the source": lambda d, t: d.parent,
    "the tokenizer": lambda d, t: t,
    "inside the tokenizer": lambda d, t: t / "prep",
}


@pytest.mark.parametrize("case", sorted(PREPARE_CASES))
def test_prepare_output_is_apart_from_its_sources_and_tokenizer(tmp_path, fixture_dir, case, capsys):
    import shutil

    data = tmp_path / "ws" / "data"
    data.mkdir(parents=True)
    (data / "rows.jsonl").write_text(json.dumps(ROW) + "\n")
    tok = shutil.copytree(fixture_dir, tmp_path / "ws" / "tok", ignore=shutil.ignore_patterns("*.safetensors"))
    out = PREPARE_CASES[case](data, tok)
    before = tree_digest(tmp_path)
    assert main(["prepare", "--data", str(data), "--tokenizer", str(tok), "--output", str(out), "--quiet"]) == 2
    assert_one_line_error(capsys.readouterr().err, "prepare", "refusing to write to")
    assert tree_digest(tmp_path) == before


# ------------------------------------------------------------------ every command declares what it writes

def _subcommands() -> dict:
    from beam_sft.cli import build_parser

    parser = build_parser()
    return next(a for a in parser._actions if a.dest == "command").choices


# Commands declared to write nothing, each with a real run that proves it (the tree it ran in and the
# model it read are unchanged). A new writes_nothing command needs its run here.
NOTHING_RUNS = {
    "plan": lambda fx: ["plan", "--model", str(fx), "--gpus", "1", "--json"],
    "check-tokenizer": lambda fx: ["check-tokenizer", str(fx)],
}


def test_every_subcommand_declares_its_outputs():
    """A subcommand without a declaration (beam_sft.paths.writes / writes_nothing / rewrites_own_files)
    fails here by name; cli.main would not run it either."""
    from beam_sft.paths import DECLARATION, Declaration

    kinds = {}
    for name, parser in _subcommands().items():
        declaration = parser.get_default(DECLARATION)
        assert isinstance(declaration, Declaration), f"{name} declares no outputs (beam_sft.paths.writes)"
        assert declaration.kind in ("writes", "nothing", "own"), name
        assert declaration.kind != "writes" or callable(declaration.outputs), name
        assert declaration.kind == "writes" or declaration.why, name
        kinds[name] = declaration.kind
    assert {n for n, k in kinds.items() if k == "nothing"} == set(NOTHING_RUNS)
    assert {n for n, k in kinds.items() if k == "own"} == {"verify"}
    assert {"convert", "reason", "prepare", "merge-shards", "inspect", "report", "train", "merge", "export",
            "fixture"} <= {n for n, k in kinds.items() if k == "writes"}


@pytest.mark.parametrize("name", sorted(NOTHING_RUNS))
def test_a_command_declared_to_write_nothing_writes_nothing(name, tmp_path, fixture_dir, monkeypatch, capsys):
    import shutil

    fx = shutil.copytree(fixture_dir, tmp_path / "model")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    before = tree_digest(tmp_path)
    assert main(NOTHING_RUNS[name](fx)) in (0, 1)
    assert tree_digest(tmp_path) == before


def test_main_runs_the_declared_guard_before_the_command_and_refuses_an_undeclared_one(tmp_path, capsys, monkeypatch):
    """The mechanism: cli.main checks a writing command's declared outputs before calling it, and runs
    no command that declares nothing."""

    from beam_sft import cli
    from beam_sft.paths import Outputs, writes

    ran = []
    src = tmp_path / "mine.jsonl"
    src.write_text("keep\n")

    def fake_parser():
        parser = cli.OneLineParser(prog="beam-sft")
        sub = parser.add_subparsers(dest="command", required=True)
        good = sub.add_parser("good")
        good.add_argument("-o")
        good.add_argument("src")
        good.set_defaults(func=lambda a: ran.append("good") or open(a.o, "w").close())
        writes(good, lambda a: Outputs(inputs={"SRC": a.src}, files={"-o": a.o}))
        bare = sub.add_parser("bare")
        bare.set_defaults(func=lambda a: ran.append("bare"))
        return parser

    monkeypatch.setattr(cli, "build_parser", fake_parser)
    assert cli.main(["good", str(src), "-o", str(src)]) == 2
    assert_one_line_error(capsys.readouterr().err, "good", "refusing to write to", "(-o) is the input")
    assert src.read_text() == "keep\n" and ran == []
    assert cli.main(["bare"]) == 2
    assert_one_line_error(capsys.readouterr().err, "bare", "declares no outputs")
    assert ran == []
    assert cli.main(["good", str(src), "-o", str(tmp_path / "new")]) == 0 and ran == ["good"]
