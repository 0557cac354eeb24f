"""Datasets by hub id or as a local dataset repository (beam_sft.data.hub), offline.

A hub id goes through ``datasets.load_dataset(..., streaming=True)``; a repository laid out as on
the hub (README.md with ``configs:`` + Parquet/JSONL files) is read file by file by our own readers
(``hub.local_data_files``), so mixed file types and differing columns read as they are.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from beam_sft.data import hub
from beam_sft.data.hub import DatasetRef, dataset_source, parse_data_arg, source_digest
from beam_sft.data.sources import iter_records
from beam_sft.errors import BeamError, ConfigError
from beam_sft.prepare.config import SourceSpec

CARD = """---
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*.{ext}
  - split: test
    path: data/test-*.{ext}
---
# A dataset card
"""


def hubify(row: dict) -> dict:
    """A row as hub datasets store free-form values: tools and arguments as JSON text (Arrow needs
    one type per column; the converters read both forms), reasoning efforts as labels."""
    row = {k: v for k, v in row.items() if k != "meta"}
    if "tools" in row:
        row["tools"] = json.dumps(row["tools"])
    if "chat_template_kwargs" in row:  # one Arrow type per field: efforts as labels
        effort = row["chat_template_kwargs"].get("reasoning_effort")
        row["chat_template_kwargs"] = {"reasoning_effort": effort if isinstance(effort, str) else "high"}
    messages = []
    for message in row["messages"]:
        message = dict(message)
        if "tool_calls" in message:
            message["tool_calls"] = [
                {**c, "function": {**c["function"], "arguments": json.dumps(c["function"]["arguments"])}}
                for c in message["tool_calls"]]
        messages.append(message)
    row["messages"] = messages
    return row


def rows(n: int) -> list[dict]:
    from beam_sft.data.synthetic import synthetic_rows

    return [hubify(r) for r in synthetic_rows(n, scale=0.05)]


def write_repo(root: Path, train: list[dict], test: list[dict] | None = None, *, ext: str = "parquet",
               files: int = 2) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text(CARD.format(ext=ext), encoding="utf-8")
    for split, data in (("train", train), ("test", test or train[:3])):
        size = -(-len(data) // files)
        # One struct type inferred over all rows, shared by every file, as a hub dataset has one schema
        # (Table.from_pylist would read the first row's keys only).
        schema = pa.array(data).type if ext == "parquet" else None
        for k in range(files):
            part = data[k * size:(k + 1) * size]
            if not part:
                continue
            target = root / "data" / f"{split}-{k:05d}.{ext}"
            if ext == "parquet":
                pq.write_table(pa.Table.from_struct_array(pa.array(part, type=schema)), target)
            else:
                target.write_text("".join(json.dumps(r) + "\n" for r in part), encoding="utf-8")
    return root


def write_jsonl(path: Path, data: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")
    return path


# ---------------------------------------------------------------- telling paths and hub ids apart


def test_parse_data_arg_hub_ids_and_local_paths(tmp_path, monkeypatch):
    assert parse_data_arg("org/name") == DatasetRef("org/name")
    assert parse_data_arg("org/name:cfg") == DatasetRef("org/name", name="cfg")
    assert parse_data_arg("org/name@test") == DatasetRef("org/name", split="test")
    assert parse_data_arg("org/name:cfg@validation") == DatasetRef("org/name", name="cfg", split="validation")
    for local in ("data/chat.jsonl", "a/b/c", "./org/name", "/abs/org", "rows.parquet", "plain"):
        assert parse_data_arg(local) == local
    # An existing local path always wins, even when it is shaped like a hub id.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org").mkdir()
    write_jsonl(tmp_path / "org" / "name", [{"x": 1}])
    assert parse_data_arg("org/name") == "org/name"
    assert list(iter_records("org/name")) == [(0, {"x": 1})]
    # A local folder is a dataset repository only when its card declares configs.
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "README.md").write_text("# notes\n", encoding="utf-8")
    assert parse_data_arg(str(plain)) == str(plain)
    repo = write_repo(tmp_path / "repo", [{"x": 1}], ext="jsonl", files=1)
    assert parse_data_arg(str(repo)) == DatasetRef(str(repo))
    assert parse_data_arg(f"{repo}@test") == DatasetRef(str(repo), split="test")


def test_source_spec_fields_and_labels(tmp_path):
    repo = write_repo(tmp_path / "repo", [{"x": 1}], ext="jsonl", files=1)
    spec = SourceSpec(path="org/name", name="cfg", split="test", revision="v1")
    assert dataset_source(spec) == DatasetRef("org/name", name="cfg", split="test", revision="v1")
    assert spec.label == "org/name:cfg@test"
    assert SourceSpec(path=str(repo)).label == f"{repo}@train"
    assert SourceSpec(path="org/name:cfg@test").label == "org/name:cfg@test"
    local = write_jsonl(tmp_path / "a.jsonl", [{"x": 1}])
    assert SourceSpec(path=str(local), name="chat").label == "chat"  # name stays the label of a local file
    with pytest.raises(ConfigError, match="a.jsonl is a file"):
        dataset_source(SourceSpec(path=str(local), split="train"))
    with pytest.raises(ConfigError, match="revision"):
        dataset_source(SourceSpec(path=str(repo), revision="main"))
    with pytest.raises(ConfigError, match="split"):
        dataset_source(SourceSpec(path="org/name@test", split="train"))
    with pytest.raises(ConfigError, match="not a hub id"):
        dataset_source(SourceSpec(path="missing/dir/x", split="train"))


def test_prepare_config_accepts_dataset_keys():
    from beam_sft.config_utils import from_dict
    from beam_sft.prepare.config import PrepareConfig

    cfg = from_dict(PrepareConfig, {"sources": [{"path": "org/name", "name": "cfg", "split": "test",
                                                 "revision": "abc", "data_files": {"test": "x/*.parquet"}}]})
    assert cfg.sources[0].data_files == {"test": "x/*.parquet"}
    with pytest.raises(ConfigError, match=r"data.prepare.sources\[0\].splt"):
        from_dict(PrepareConfig, {"sources": [{"path": "org/name", "splt": "x"}]}, "data.prepare")


# ---------------------------------------------------------------- reading


@pytest.mark.parametrize("ext", ["parquet", "jsonl"])
def test_repository_streams_the_same_records_as_local_jsonl(tmp_path, ext):
    data = rows(40)
    repo = write_repo(tmp_path / "repo", data, data[:5], ext=ext)
    local = write_jsonl(tmp_path / "rows.jsonl", data)
    from beam_sft.data.sources import _drop_nulls

    expected = [(i, _drop_nulls(r)) for i, r in iter_records(local)]
    assert list(iter_records(str(repo))) == expected
    assert [i for i, _ in iter_records(f"{repo}@test")] == list(range(5))


def test_missing_split_or_config_is_a_clear_error(tmp_path):
    repo = write_repo(tmp_path / "repo", rows(3), ext="jsonl", files=1)
    with pytest.raises(BeamError, match=r"split validation.*validation"):
        list(iter_records(f"{repo}@validation"))
    with pytest.raises(BeamError, match=r"config nope"):
        list(iter_records(DatasetRef(str(repo), name="nope")))


def test_offline_hub_id_fails_at_once_naming_id_and_split(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.time()
    with pytest.raises(BeamError, match=r"HuggingFaceH4/ultrachat_200k \(split train_sft.*HF_HUB_OFFLINE"):
        list(iter_records("HuggingFaceH4/ultrachat_200k@train_sft"))
    with pytest.raises(BeamError, match=r"org/missing \(split test.*HF_HUB_OFFLINE"):
        source_digest(SourceSpec(path="org/missing", split="test"))
    assert time.time() - started < 5


def test_offline_hub_id_fails_at_once_in_prepare_cli(tmp_path, fixture_dir):
    """The whole command, in a fresh process where HF_HUB_OFFLINE is read at import as well."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    started = time.time()
    done = subprocess.run([sys.executable, "-m", "beam_sft", "prepare", "--data", "org/absent:cfg@dev",
                           "--tokenizer", str(fixture_dir), "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert done.returncode != 0
    assert "org/absent (split dev, config cfg)" in done.stderr, done.stderr[-2000:]
    assert "HF_HUB_OFFLINE" in done.stderr
    assert time.time() - started < 60
    assert not (tmp_path / "out").exists()


def test_help_says_how_paths_and_hub_ids_differ():
    import argparse

    from beam_sft.prepare import cli

    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    text = parser._subparsers._group_actions[0].choices["prepare"].format_help()  # noqa: SLF001 (test only)
    assert "exists locally always wins" in " ".join(text.split())
    assert "ORG/NAME" in text


# ---------------------------------------------------------------- fingerprint


def test_fingerprint_follows_the_repository_data(tmp_path):
    data = rows(20)
    repo = write_repo(tmp_path / "repo", data, ext="jsonl", files=1)
    spec = SourceSpec(path=str(repo))
    before = source_digest(spec)
    assert source_digest(spec) == before
    assert source_digest(SourceSpec(path=str(repo), split="test")) != before
    changed = repo / "data" / "train-00000.jsonl"
    changed.write_text(changed.read_text(encoding="utf-8").replace("Think", "Thinks", 1) + "\n", encoding="utf-8")
    assert source_digest(spec) != before


def test_hub_revision_is_resolved_to_a_commit(monkeypatch):
    calls = []

    class Info:
        def __init__(self, sha):
            self.sha = sha

    class Api:
        def dataset_info(self, repo_id, revision=None):
            calls.append((repo_id, revision))
            return Info({"main": "a" * 40, "v2": "b" * 40}[revision or "main"])

    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    one = source_digest(SourceSpec(path="org/name"))
    two = source_digest(SourceSpec(path="org/name", revision="v2"))
    assert one != two and calls == [("org/name", None), ("org/name", "v2")]
    assert hub.resolve_revision(DatasetRef("org/name")) == "a" * 40


def test_a_pinned_commit_needs_no_hub(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    sha = "c" * 40
    assert hub.resolve_revision(DatasetRef("org/name", revision=sha)) == sha
    assert source_digest(SourceSpec(path="org/name", revision=sha)) != source_digest(
        SourceSpec(path="org/name", revision="d" * 40))


def test_convert_reads_a_dataset_repository(tmp_path):
    from beam_sft.convert import convert_files

    data = rows(12)
    repo = write_repo(tmp_path / "repo", data, ext="jsonl", files=2)
    report = convert_files([f"{repo}@train"], output=tmp_path / "rows.jsonl", rejects=tmp_path / "rejects.jsonl")
    assert report.read == 12 and report.kept + sum(sum(s.rejected.values()) for s in report.sources) == 12
    kept = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    # one source, named with its split; each row names its own file (as a folder's rows do) and its row there
    assert [s.source for s in report.sources] == [f"{repo}@train"]
    assert {r["meta"]["source"] for r in kept} == {f"{repo}/data/train-00000.jsonl", f"{repo}/data/train-00001.jsonl"}
    assert max(r["meta"]["row"] for r in kept) < 6


def test_convert_names_each_file_of_a_split_folder(tmp_path, monkeypatch, capsys):
    """``beam-sft convert DIR@train`` on a folder named by splits (data/train-* beside data/test-*): the table
    names the split read (DIR@train: the test rows are not in it), and a rejects line names
    its file, as DIR was given joined with the file's path in it, its row there and its index in the
    source (prepare's rejects line, ``placed``); two files' rows are never one running number."""
    from beam_sft.cli import main

    monkeypatch.chdir(tmp_path)
    ok = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a",
                                                             "reasoning_content": "r"}]}
    bad = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    Path("repo/data").mkdir(parents=True)
    for name, data in (("train-00000-of-00002", [ok, bad]), ("train-00001-of-00002", [bad, ok]),
                       ("test-00000-of-00001", [bad])):
        write_jsonl(Path("repo/data") / f"{name}.jsonl", data)
    assert main(["convert", "repo@train", "-o", "rows.jsonl", "--rejects", "rejects.jsonl"]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[1].split()[:3] == ["repo@train", "openai", "4"]
    lines = [json.loads(line) for line in Path("rejects.jsonl").read_text().splitlines()]
    assert [(r["source"], r["file"], r["row"], r["index"]) for r in lines] == [
        ("repo@train", "repo/data/train-00000-of-00002.jsonl", 1, 1),
        ("repo@train", "repo/data/train-00001-of-00002.jsonl", 0, 2)]
    kept = [json.loads(line)["meta"] for line in Path("rows.jsonl").read_text().splitlines()]
    assert kept == [{"source": "repo/data/train-00000-of-00002.jsonl", "row": 0},
                    {"source": "repo/data/train-00001-of-00002.jsonl", "row": 1}]


# ---------------------------------------------------------------- prepare: same rows, same ids and masks


def _prepared_columns(directory: Path) -> list[tuple]:
    from datasets import load_from_disk

    ds = load_from_disk(str(directory))
    out = []
    for r in ds:
        row = json.loads(r["row"])
        row.pop("meta", None)
        out.append((r["row_index"], r["input_ids"], r["assistant_masks"], json.dumps(row, sort_keys=True)))
    return sorted(out, key=lambda x: x[0])


def test_streamed_repository_of_10000_rows_prepares_like_local_jsonl(tmp_path, fixture_dir):
    from beam_sft.prepare import PrepareConfig, prepare

    data = rows(10_000)
    repo = write_repo(tmp_path / "repo", data, ext="parquet", files=4)
    local = write_jsonl(tmp_path / "rows.jsonl", data)
    common = {"tokenizer": str(fixture_dir), "verify": False, "num_proc": 1}
    out_local = prepare(PrepareConfig(sources=[SourceSpec(path=str(local))], output=str(tmp_path / "a"), **common))
    out_repo = prepare(PrepareConfig(sources=[SourceSpec(path=str(repo))], output=str(tmp_path / "b"), **common))
    a, b = _prepared_columns(out_local), _prepared_columns(out_repo)
    assert len(a) == len(b) == 10_000
    assert a == b
    report = json.loads((out_repo / "report.json").read_text(encoding="utf-8"))
    source = report["sources"][f"{repo}@train"]
    assert source["read"] == 10_000
    local_report = json.loads((out_local / "report.json").read_text(encoding="utf-8"))
    assert source["rejected"] == local_report["sources"][str(local)]["rejected"]


def test_changed_data_in_a_repository_is_a_new_fingerprint(tmp_path, fixture_dir):
    """Encoded again, not served from the cache: one row fewer in one of the repository's files."""
    import pyarrow.parquet as pq

    from beam_sft.prepare import PrepareConfig, prepare

    repo = write_repo(tmp_path / "repo", rows(40), ext="parquet", files=4)
    common = {"tokenizer": str(fixture_dir), "verify": False, "num_proc": 1}
    first = prepare(PrepareConfig(sources=[SourceSpec(path=str(repo))], output=str(tmp_path / "a"), **common))
    report = json.loads((first / "report.json").read_text(encoding="utf-8"))
    assert report["sources"][f"{repo}@train"]["read"] == 40
    part = repo / "data" / "train-00003.parquet"
    table = pq.read_table(part)
    pq.write_table(table.slice(0, table.num_rows - 1), part)
    again = prepare(PrepareConfig(sources=[SourceSpec(path=str(repo))], output=str(tmp_path / "b"), **common))
    changed = json.loads((again / "report.json").read_text(encoding="utf-8"))
    assert changed["fingerprint"] != report["fingerprint"]
    assert changed["sources"][f"{repo}@train"]["read"] == 39


def test_a_repository_mixing_parquet_and_jsonl_reads_every_file(tmp_path):
    """``datasets`` streaming fails on this layout; each file is read by its own reader instead."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = rows(12)
    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    (repo / "README.md").write_text(CARD.replace("{ext}", "*"), encoding="utf-8")
    pq.write_table(pa.Table.from_struct_array(pa.array(data[:6])), repo / "data" / "train-00000.parquet")
    write_jsonl(repo / "data" / "train-00001.jsonl", data[6:])
    write_jsonl(repo / "data" / "test-00000.jsonl", data[:2])
    from beam_sft.data.sources import _drop_nulls

    got = list(iter_records(str(repo)))
    assert got == [(i, _drop_nulls(r) if i < 6 else r) for i, r in enumerate(data)]
    assert len(list(iter_records(f"{repo}@test"))) == 2


def test_a_repository_whose_files_have_other_columns_loses_none(tmp_path):
    """Streaming takes its columns from the first file; here the second file's extra column stays."""
    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    (repo / "README.md").write_text(CARD.format(ext="jsonl"), encoding="utf-8")
    first = [{"messages": [{"role": "user", "content": "q"}]}]
    second = [{"messages": [{"role": "user", "content": "q2"}], "tools": "[]", "system": "s"}]
    write_jsonl(repo / "data" / "train-00000.jsonl", first)
    write_jsonl(repo / "data" / "train-00001.jsonl", second)
    write_jsonl(repo / "data" / "test-00000.jsonl", first)
    assert [r for _, r in iter_records(str(repo))] == first + second


def test_a_card_pattern_that_matches_nothing_is_named(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text(CARD.format(ext="jsonl"), encoding="utf-8")
    with pytest.raises(BeamError, match=r"no file matches 'data/train-\*\.jsonl'"):
        list(iter_records(str(repo)))


def _rows(path: Path, n: int, tag: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"tag": tag, "i": i}) + "\n" for i in range(n)))


def _tags(source) -> list[str]:
    return sorted(f"{r['tag']}{r['i']}" for _, r in iter_records(source))


# Folders with no card whose files are named by split, as datasets infers a repository's splits: each
# layout, the splits the refusal names (with an example file), and the split FOLDER@SPLIT reads.
SPLIT_LAYOUTS = {
    "files": (["train.jsonl", "test.jsonl", "extra.jsonl"], "train: train.jsonl; test: test.jsonl", "train"),
    "folders": (["train/a.jsonl", "train/b.json", "test/a.jsonl", "train.jsonl"],  # split folders: train.jsonl in none
                "train: train/a.jsonl; test: test/a.jsonl", "train"),
    "data folders": (["data/train/a.jsonl", "data/validation/a.jsonl"],
                     "train: data/train/a.jsonl; validation: data/validation/a.jsonl", "train"),
    "shards": (["data/train-00000-of-00002.jsonl", "data/train-00001-of-00002.jsonl", "data/test-00000-of-00001.jsonl"],
               "train: data/train-00000-of-00002.jsonl; test: data/test-00000-of-00001.jsonl", "train"),
    "test only": (["test.jsonl"], "test: test.jsonl", "test"),
    "dev beside chat": (["dev.jsonl.gz", "chat.jsonl"], "validation: dev.jsonl.gz", "validation"),
    "words only": (["sft_train.jsonl", "sft_test.jsonl"], "train: sft_train.jsonl; test: sft_test.jsonl", "train"),
}


@pytest.mark.parametrize("layout", list(SPLIT_LAYOUTS))
def test_a_folder_named_by_splits_is_refused_without_a_split_and_read_as_datasets_reads_it(tmp_path, layout):
    """`train.jsonl` beside `test.jsonl` (and `extra.jsonl`), `train/` beside `test/`, `test.jsonl` alone:
    read as a plain folder, every split's rows were trained on (datasets reads the train split only, or
    has none); now refused in one line naming the folder, its splits and what to do, by convert and by a
    recipe alike. FOLDER@SPLIT reads what `datasets.load_dataset(FOLDER, split=SPLIT)` reads."""
    import gzip

    datasets = pytest.importorskip("datasets")
    names, said, split = SPLIT_LAYOUTS[layout]
    repo = tmp_path / "repo"
    for k, name in enumerate(names):
        _rows(repo / name.removesuffix(".gz"), 2, f"f{k}_")
        if name.endswith(".gz"):
            plain = repo / name.removesuffix(".gz")
            (repo / name).write_bytes(gzip.compress(plain.read_bytes()))
            plain.unlink()
    message = _refused(str(repo), re.escape(f"{repo}: its files are named by split, as datasets reads a "
                                            f"repository's splits ({said}); read as a plain folder"))
    assert f"give {repo}@{split} (in a recipe, split: {split})" in message and "name the files themselves" in message
    with pytest.raises(BeamError, match="named by split"):  # a recipe's source, and prepare's duplicate check
        dataset_source(SourceSpec(path=str(repo)))
    from beam_sft.data.sources import files_read

    with pytest.raises(BeamError, match="named by split"):
        files_read(str(repo))
    want = datasets.load_dataset(str(repo), split=split, cache_dir=str(tmp_path / "cache"))
    got = _tags(f"{repo}@{split}")
    assert got == sorted(f"{r['tag']}{r['i']}" for r in want) and got
    assert _tags(dataset_source(SourceSpec(path=str(repo), split=split))) == got
    assert sorted(files_read(f"{repo}@{split}")) == sorted(
        Path(p) for p in datasets.load_dataset_builder(str(repo)).config.data_files[split])


def test_a_folder_with_only_train_named_is_plain_only_when_datasets_reads_it_whole(tmp_path):
    """No split but train named: read whole where datasets' train split is every file (shards of train
    only, names of no split); `train.jsonl` beside `extra.jsonl` was read whole too, where datasets
    reads `train.jsonl` alone: now refused, naming what datasets leaves out, and FOLDER@train reads
    what datasets reads."""
    for layout in (["data/train-00000-of-00002.jsonl", "data/train-00001-of-00002.jsonl"], ["train.jsonl"],
                   ["part-0.jsonl", "part-1.jsonl"]):
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        for name in layout:
            _rows(folder / name, 1, name)
        assert parse_data_arg(str(folder)) == str(folder)
        assert len(_tags(str(folder))) == len(layout)
    folder = tmp_path / "extra"
    _rows(folder / "train.jsonl", 1, "train")
    _rows(folder / "extra.jsonl", 1, "extra")
    said = _refused(str(folder), re.escape(f"{folder}: its files are named by split, as datasets reads a repository's "
                                           "splits (train: train.jsonl); read as a plain folder, its other files "
                                           "would be read where datasets leaves out extra.jsonl (in no split)"))
    assert f"give {folder}@train" in said and "name the files themselves" in said
    assert _tags(f"{folder}@train") == ["train0"]


def test_split_folders_name_the_split_not_the_file_names_in_them(tmp_path):
    """datasets takes a split folder's name over its files' (`data/train/test.parquet` is train,
    `test/train.json` is test): the first was refused as a test split datasets does not have, the
    second read whole as train, where datasets finds no train split."""
    first = tmp_path / "first"
    _rows(first / "data" / "train" / "test.jsonl", 1, "t")
    assert parse_data_arg(str(first)) == str(first)  # datasets reads it whole as train: the same rows
    assert _tags(f"{first}@train") == ["t0"]
    second = tmp_path / "second"
    _rows(second / "test" / "train.jsonl", 1, "t")
    _refused(str(second), re.escape("splits (test: test/train.jsonl)") + ".*datasets finds no train split in it")
    _refused(f"{second}@train", r"no split 'train' in the repository \(splits: test\)")


def test_splits_of_two_types_are_refused_as_datasets_refuses_them(tmp_path):
    """`train.jsonl` beside `test.parquet` (or `sub/validation.txt` beside `drone_training.parquet`):
    datasets infers one module for every split and refuses the folder; FOLDER@train read
    `train.jsonl` alone. A card's JSON and Parquet splits are read file by file, as before."""
    repo = tmp_path / "repo"
    _rows(repo / "train.jsonl", 1, "train")
    _rows(repo / "test.jsonl", 1, "test")
    (repo / "test.jsonl").rename(repo / "test.parquet")  # the name is what datasets types it by
    for source in (f"{repo}@train", str(repo)):
        _refused(source, r"datasets refuses the (repository|folder): it reads every split with one module and its "
                         r"splits differ \(test: \.parquet \(parquet\), train: \.jsonl \(json\)\)")


def test_a_card_split_datasets_cannot_resolve_refuses_every_split(tmp_path):
    """datasets resolves every split of the config, whichever is asked: a file a card names outright
    that is missing, or a split whose globs match nothing, fails `load_dataset(FOLDER, split="train")`
    too; the train split was read as if the other did not matter."""
    repo = _card(tmp_path / "repo", "configs:\n- config_name: default\n  data_files:\n  - split: train\n"
                                    "    path: a/*.jsonl\n  - split: test\n    path: c/*.jsonl")
    _rows(repo / "a" / "x.jsonl", 2, "a")
    _refused(str(repo), r"\(split train\): its split test: no file matches 'c/\*.jsonl'")


def test_card_patterns_resolve_as_datasets_resolves_them(tmp_path):
    """``**`` reaches files at any depth (Path.glob gave folders only), a hidden file is not data, and a
    card after a byte-order mark is still the card."""
    repo = tmp_path / "repo"
    _rows(repo / "data" / "a.jsonl", 1, "a")
    _rows(repo / "data" / "deep" / "b.jsonl", 1, "b")
    _rows(repo / "data" / ".hidden-train.jsonl", 1, "hidden")
    _rows(repo / "other" / "c.jsonl", 1, "c")
    card = "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/**\n---\n"
    (repo / "README.md").write_bytes(b"\xef\xbb\xbf" + card.encode())
    ref = parse_data_arg(str(repo))
    assert isinstance(ref, DatasetRef)
    assert _tags(ref) == ["a0", "b0"]


def test_a_plain_folder_whose_names_hold_split_words_reads_every_file(tmp_path):
    """`drone_training.jsonl` beside `test_case.jsonl` and `chat.jsonl` (../shared/corpus/openai's names):
    read by split, `chat.jsonl` and the test file were lost unsaid. Only a folder every data file of
    which is in a split is read split by split."""
    folder = tmp_path / "plain"
    for name in ("drone_training.jsonl", "test_case.jsonl", "chat.jsonl", "more.jsonl"):
        _rows(folder / name, 1, name.split(".")[0])
    assert parse_data_arg(str(folder)) == str(folder)
    assert len(_tags(str(folder))) == 4


# ---------------------------------------------------------------- cards datasets reads another way, or not at all


def _card(repo: Path, yaml: str) -> Path:
    repo.mkdir(parents=True, exist_ok=True)
    (repo / "README.md").write_text(f"---\n{yaml.strip()}\n---\n# card\n", encoding="utf-8")
    return repo


def _refused(source, pattern: str) -> str:
    with pytest.raises(BeamError, match=pattern) as err:
        list(iter_records(source))
    assert "\n" not in str(err.value)
    return str(err.value)


def test_the_config_read_with_no_name_is_the_one_datasets_reads_or_refused(tmp_path):
    """With no config named, datasets reads the only config, the one named `default` or the one marked
    `default: true`; several and none marked is "Config name is missing", two marked is refused. The
    first config was read in their place, unsaid."""
    one_two = "- config_name: one\n  data_files: one/*.jsonl\n- config_name: {second}\n{mark}  data_files: two/*.jsonl"
    cases = {"marked": ("two", "  default: true\n"), "named": ("default", ""), "none": ("two", ""),
             "both": ("default", "  default: true\n")}
    repos = {}
    for key, (second, mark) in cases.items():
        repos[key] = _card(tmp_path / key, "configs:\n" + one_two.format(second=second, mark=mark))
        _rows(repos[key] / "one" / "a.jsonl", 1, "one")
        _rows(repos[key] / "two" / "a.jsonl", 1, "two")
    (repos["both"] / "README.md").write_text((repos["both"] / "README.md").read_text().replace(
        "- config_name: one\n", "- config_name: one\n  default: true\n"))
    assert _tags(str(repos["marked"])) == ["two0"]
    assert _tags(str(repos["named"])) == ["two0"]
    assert _tags(f"{repos['none']}:one") == ["one0"]
    said = _refused(str(repos["none"]), r"declares configs one, two and none is the default")
    assert f"{repos['none']}:CONFIG" in said
    _refused(str(repos["both"]), r"marks 2 configs as the default \(one, default\)")


def test_a_card_datasets_refuses_is_refused_not_read(tmp_path):
    """A config without config_name, two configs of one name (datasets reads the last, unsaid), a split
    given in two entries, entries of two shapes, a split name datasets does not accept (it fails to
    load every split of that card), front matter that is not YAML: each one line naming the folder."""
    cards = {
        "unnamed": ("configs:\n- data_files: a.jsonl", r"a config has no config_name"),
        "twice": ("configs:\n- config_name: default\n  data_files: a.jsonl\n- config_name: default\n"
                  "  data_files: b.jsonl", r"two configs are named 'default'"),
        "split_twice": ("configs:\n- config_name: default\n  data_files:\n  - split: train\n    path: a.jsonl\n"
                        "  - split: train\n    path: b.jsonl", r"names split 'train' in two entries"),
        "mixed": ("configs:\n- config_name: default\n  data_files:\n  - a.jsonl\n  - split: test\n    path: b.jsonl",
                  r"a data_files entry is not \{split: NAME"),
        "dash": ("configs:\n- config_name: default\n  data_files:\n  - split: train\n    path: a.jsonl\n"
                 "  - split: train-00\n    path: b.jsonl", r"split name 'train-00' is not one datasets accepts"),
        "yaml": ("configs: [unclosed", r"README.md: line \d.*not valid YAML.*move README.md out"),
    }
    for key, (yaml, pattern) in cards.items():
        repo = _card(tmp_path / key, yaml)
        _rows(repo / "a.jsonl", 1, "a")
        _rows(repo / "b.jsonl", 1, "b")
        assert str(repo) in _refused(str(repo), pattern), key


def test_a_file_two_patterns_of_a_split_match_is_refused_not_read_once_or_twice(tmp_path):
    """datasets reads such a file once per pattern (its rows twice); it was read once here, unsaid."""
    repo = _card(tmp_path / "card", "configs:\n- config_name: default\n  data_files:\n  - split: train\n"
                                    "    path:\n    - data/*.jsonl\n    - data/a.jsonl")
    _rows(repo / "data" / "a.jsonl", 1, "a")
    _rows(repo / "data" / "b.jsonl", 1, "b")
    _refused(str(repo), r"data/a.jsonl is matched by both 'data/\*.jsonl' and 'data/a.jsonl'.*rows twice")
    plain = tmp_path / "given"
    _rows(plain / "x" / "a.jsonl", 1, "a")
    _refused(DatasetRef(str(plain), data_files=["x/*.jsonl", "x/a.jsonl"]), r"x/a.jsonl is matched by both")
    inferred = tmp_path / "inferred"  # datasets' own split patterns overlap: train/ and train-0/
    _rows(inferred / "train" / "train-0" / "a.jsonl", 1, "a")
    _rows(inferred / "test" / "b.jsonl", 1, "b")
    _refused(f"{inferred}@train", r"train/train-0/a.jsonl is matched by two of the patterns datasets infers for the "
                                  r"split, so datasets reads its rows twice.*configs: card")


def test_a_glob_that_matches_nothing_is_skipped_as_datasets_skips_it(tmp_path):
    repo = _card(tmp_path / "repo", "configs:\n- config_name: default\n  data_files:\n  - split: train\n"
                                    "    path:\n    - a/*.jsonl\n    - b/*.jsonl\n  - split: test\n    path: c/x.jsonl")
    _rows(repo / "a" / "x.jsonl", 2, "a")
    _refused(f"{repo}@test", r"no file matches 'c/x.jsonl'")  # a file named outright must be there
    _rows(repo / "c" / "x.jsonl", 1, "c")
    assert _tags(str(repo)) == ["a0", "a1"]


def test_a_folder_datasets_finds_no_data_in_is_refused_naming_it(tmp_path):
    """`.hidden/test.jsonl` alone (datasets skips hidden folders), or a card config whose data_dir
    holds nothing: datasets finds no data file; FOLDER@train was handed to datasets as a whole folder
    (and prepare's duplicate check listed the folder itself) instead of being refused here."""
    hidden = tmp_path / "hidden"
    _rows(hidden / ".hidden" / "test.jsonl", 1, "h")
    _refused(f"{hidden}@train", r"datasets finds no data file in the folder \(hidden files")
    empty = _card(tmp_path / "empty", "configs:\n- config_name: default\n  data_dir: data")
    _rows(empty / "other" / "a.jsonl", 1, "a")
    _refused(str(empty), r"datasets finds no data file under data/, the config 'default''s data_dir")


def test_a_card_config_with_no_data_files_reads_every_file_its_names_put_in_a_split(tmp_path):
    """A config with data_dir and no data_files: datasets puts the split-named files under it in
    splits and reads them all (no type filter, unlike a folder with no card); `data/train.md` beside
    `data/train.jsonl` was dropped here unsaid, where datasets reads it as JSON and stops. Now refused
    naming it, as a card pattern over a note is."""
    repo = _card(tmp_path / "repo", "configs:\n- config_name: default\n  data_dir: data")
    _rows(repo / "data" / "train.jsonl", 1, "t")
    (repo / "data" / "train.md").write_text("# notes\n")
    _refused(str(repo), r"train.md is in the split datasets infers from the names under the card config's data_dir "
                        r"but is not a data file")
    (repo / "data" / "train.md").unlink()
    assert _tags(str(repo)) == ["t0"]


def test_a_config_data_dir_is_read_file_by_file(tmp_path):
    """`data_dir`: the config's files are under it (its data_files resolve from it; with none, its
    split-named files); read here file by file, so files whose columns differ lose nothing (read through
    datasets streaming, the second file stopped the run)."""
    repo = _card(tmp_path / "repo", "configs:\n- config_name: en\n  data_dir: en\n- config_name: fr\n"
                                    "  data_dir: fr\n  data_files:\n  - split: train\n    path: part/*.jsonl")
    _rows(repo / "en" / "train-a.jsonl", 1, "en_a")
    (repo / "en" / "train-b.jsonl").write_text(json.dumps({"tag": "en_b", "i": 0, "system": "s"}) + "\n")
    _rows(repo / "en" / "test.jsonl", 1, "en_test")
    _rows(repo / "fr" / "part" / "a.jsonl", 1, "fr")
    _rows(repo / "part" / "a.jsonl", 1, "root")
    assert _tags(f"{repo}:en") == ["en_a0", "en_b0"]
    assert hub.local_data_files(DatasetRef(str(repo), name="en")) is not None
    assert _tags(f"{repo}:en@test") == ["en_test0"]
    assert _tags(f"{repo}:fr") == ["fr0"]


def test_configs_in_huggingface_yaml_are_the_card(tmp_path):
    """datasets reads a repository's configs from `.huggingface.yaml` too; the folder was read whole."""
    repo = tmp_path / "repo"
    _rows(repo / "keep" / "a.jsonl", 1, "keep")
    _rows(repo / "notes" / "b.jsonl", 1, "other")
    (repo / ".huggingface.yaml").write_text("configs:\n- config_name: default\n  data_files: keep/*.jsonl\n")
    assert isinstance(parse_data_arg(str(repo)), DatasetRef)
    assert _tags(str(repo)) == ["keep0"]


def test_a_card_pattern_matching_a_file_that_is_not_data_names_it(tmp_path):
    """`data/*` matching `notes.md` beside the JSON Lines: datasets reads it as JSON and stops; it was
    refused as "reading stopped at row 2: ArrowInvalid", naming no file. The same for a .csv a card's
    `train.*` matches beside `train.jsonl`, and for a source's own data_files."""
    repo = _card(tmp_path / "md", "configs:\n- config_name: default\n  data_files: data/*")
    _rows(repo / "data" / "a.jsonl", 2, "a")
    (repo / "data" / "notes.md").write_text("# how these rows were made\n")
    said = _refused(str(repo), r"data/notes.md is matched by the card's pattern 'data/\*' but is not a data file "
                               r"that pattern should match \(a \.md file in a split of \.jsonl and \.md files")
    assert str(repo) in said
    csv = _card(tmp_path / "csv", "configs:\n- config_name: default\n  data_files: train.*")
    _rows(csv / "train.jsonl", 1, "a")
    (csv / "train.csv").write_text("tag,i\ncsv,0\n")
    _refused(str(csv), r"train.csv is matched by the card's pattern 'train\.\*' but is not a data file")
    _refused(DatasetRef(str(csv), data_files="train.*"), r"train.csv is matched by the source's data_files pattern")


def test_a_split_of_two_file_types_datasets_reads_one_of_is_refused(tmp_path):
    """`train.csv` beside `train.jsonl` (and `test.jsonl`): datasets reads one type per split and dropped
    the CSV's rows unsaid; refused naming the types and the files dropped. A note (`.md`) in a split
    folder is dropped by datasets too and holds no rows: the split is read without it."""
    repo = tmp_path / "repo"
    _rows(repo / "train.jsonl", 2, "tr")
    _rows(repo / "test.jsonl", 1, "te")
    (repo / "train.csv").write_text("tag,i\ncsv,0\n")
    said = _refused(f"{repo}@train", r"split train\): the split holds \.csv and \.jsonl files and datasets reads "
                                     r"one type per split: it reads the \.jsonl files and drops train\.csv")
    assert str(repo) in said
    notes = tmp_path / "notes"
    _rows(notes / "train" / "a.jsonl", 2, "tr")
    (notes / "train" / "NOTES.md").write_text("# made by hand\n")
    _rows(notes / "test" / "a.jsonl", 1, "te")
    assert _tags(f"{notes}@train") == ["tr0", "tr1"]
    from beam_sft.data.sources import files_read

    assert [p.name for p in files_read(f"{notes}@train")] == ["a.jsonl"]


def test_a_shard_named_for_a_split_datasets_refuses_is_refused_as_datasets_refuses_it(tmp_path):
    """`data/train-part-00000-of-00001.parquet`: datasets takes `train-part` for the split and refuses
    the folder; it was read as a plain folder (with no split named) or handed to datasets."""
    repo = tmp_path / "repo"
    _rows(repo / "data" / "train-part-00000-of-00001.jsonl", 1, "a")
    for source in (str(repo), f"{repo}@train"):
        said = _refused(source, r"data/train-part-00000-of-00001.jsonl is named as a shard of split 'train-part', "
                                r"a split name datasets refuses")
        assert f"{repo}: " in said and "rename it data/train_part-00000-of-00001.jsonl" in said
        assert "name the files themselves" in said
    assert _tags(str(repo / "data" / "train-part-00000-of-00001.jsonl")) == ["a0"]


def test_a_card_refusal_names_the_file_the_configs_come_from(tmp_path):
    """configs in `.huggingface.yaml`: its refusals said README.md, a file the folder may not have."""
    repo = tmp_path / "repo"
    _rows(repo / "a.jsonl", 1, "a")
    (repo / ".huggingface.yaml").write_text("configs:\n- config_name: one\n  data_files: a.jsonl\n"
                                            "- config_name: two\n  data_files: a.jsonl\n")
    _refused(str(repo), re.escape(f"{repo}: .huggingface.yaml declares configs one, two and none is the default"))
    _refused(f"{repo}:three", r"\.huggingface\.yaml declares no config 'three'")
    (repo / ".huggingface.yaml").write_text("configs:\n- config_name: default\n  data_files:\n"
                                            "  - split: a-b\n    path: a.jsonl\n")
    _refused(str(repo), re.escape(f"{repo}: .huggingface.yaml, config 'default': split name 'a-b'"))
