"""Sharded prepare + merge gives the same rows as one unsharded run; the merge refuses a bad set."""

from __future__ import annotations

import dataclasses
import json
import logging

import pytest

from beam_sft.errors import ConfigError
from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
from beam_sft.prepare.shards import merge_shards
from tests.encode.conftest import simple_row, write_jsonl
from tests.prepare.same_folder import assert_same_folder


@pytest.fixture(scope="module")
def sharded(tmp_path_factory, tokenizer_dir):
    root = tmp_path_factory.mktemp("shards")
    a = write_jsonl(root / "a.jsonl", [simple_row(i) for i in range(20)] + [simple_row(99, reasoning="")])
    b = write_jsonl(root / "b.jsonl", [simple_row(i, answer="x " * i) for i in range(15)])
    base = PrepareConfig(sources=[SourceSpec(path=str(a), weight=1.5), SourceSpec(path=str(b))],
                         tokenizer=str(tokenizer_dir), num_proc=1, verify=False)
    whole = prepare(dataclasses.replace(base, output=str(root / "whole")))
    shards = [prepare(dataclasses.replace(base, num_shards=3, shard_index=i, output=str(root / f"shard-{i}")))
              for i in (2, 0, 1)]
    return root, whole, shards


def records(directory) -> list[tuple]:
    from datasets import load_from_disk

    dataset = load_from_disk(str(directory))
    return sorted(zip(dataset["source"], dataset["row_index"], map(tuple, dataset["input_ids"]),
                      map(tuple, dataset["assistant_masks"]), dataset["row"], strict=True))


def test_merge_equals_unsharded(sharded):
    """The same folder as one unsharded run: rows in the same order (contiguous shard ranges, then
    concatenation), the same rejects, the same report and fingerprint but for timing and the
    engine section (a shard this small probes its own head: the probe is compared in the Ray tier)."""
    root, whole, shards = sharded
    merged = merge_shards(shards, root / "merged", verify=False)
    assert_same_folder(merged, whole, probe=False)
    report = json.loads((merged / "report.json").read_text())
    assert report["engine"]["name"] == "merge-shards"
    assert [s["index"] for s in report["engine"]["shards"]] == [0, 1, 2]
    assert report["encoder"]["name"] == "fast"
    assert report["encoder"]["native_rows"] == report["tokens"]["rows"] > 0  # summed over the shards


def test_merged_folder_is_the_unsharded_runs_cache_hit(sharded, tmp_path):
    """It carries the unsharded run's fingerprint, so prepare (and train) reuse it as their own."""
    root, whole, shards = sharded
    merged = merge_shards(shards, tmp_path / "merged", verify=True)
    config = json.loads((whole / "report.json").read_text())["config"]
    base = PrepareConfig(sources=[SourceSpec(**s) for s in config["sources"]], tokenizer=config["tokenizer"],
                         num_proc=1, verify=True, output=str(merged))
    before = (merged / "report.json").read_bytes()
    assert prepare(base) == merged
    assert (merged / "report.json").read_bytes() == before  # reused, not prepared again


def test_each_shard_has_a_third(sharded):
    _, whole, shards = sharded
    sizes = [len(records(s)) for s in shards]
    assert sum(sizes) == len(records(whole)) and min(sizes) > 0


def test_merge_refuses_missing_or_foreign_shards(sharded, tmp_path, tokenizer_dir):
    root, whole, shards = sharded
    with pytest.raises(ConfigError, match="missing"):
        merge_shards(shards[:2], tmp_path / "m1", verify=False)
    with pytest.raises(ConfigError, match="given twice"):
        merge_shards([*shards, shards[0]], tmp_path / "m2", verify=False)
    with pytest.raises(ConfigError, match=rf"different runs .*: {whole} differs from {shards[0]} in "):
        merge_shards([*shards[:2], whole], tmp_path / "m3", verify=False)


def test_only_the_merge_calls_a_source_empty(tmp_path, tokenizer_dir, caplog):
    """A shard's range may hold no record of a source: that shard does not call the source empty; the
    merge does, once, for a source that has no record at all."""
    a = write_jsonl(tmp_path / "a.jsonl", [simple_row(i) for i in range(4)])
    b = write_jsonl(tmp_path / "b.jsonl", [simple_row(i) for i in range(4)])
    empty = write_jsonl(tmp_path / "empty.jsonl", [])
    base = PrepareConfig(sources=[SourceSpec(path=str(a)), SourceSpec(path=str(b)), SourceSpec(path=str(empty))],
                         tokenizer=str(tokenizer_dir), num_proc=1, verify=False, num_shards=2)
    caplog.set_level("WARNING", logger="beam_sft.prepare")
    shards = [prepare(dataclasses.replace(base, shard_index=i, output=str(tmp_path / f"s{i}"))) for i in (0, 1)]
    assert not [r for r in caplog.records if "is empty" in r.getMessage()]
    merge_shards(shards, tmp_path / "merged", verify=False)
    assert [r.getMessage() for r in caplog.records if "is empty" in r.getMessage()] == [
        f"source {empty} is empty: no records in it"]


def test_a_shard_that_keeps_no_row_merges_into_the_unsharded_folder(tmp_path, tokenizer_dir, caplog):
    """Shards 1 and 2 hold only rows that convert rejects: they keep none, are sealed without a
    verification (nothing to verify) and without a warning, are their own cache hits, and merge into
    the unsharded folder; a merge where no shard kept a row is refused as prepare refuses it."""
    from beam_sft.errors import NothingKept

    a = write_jsonl(tmp_path / "a.jsonl", [simple_row(i) for i in range(10)])
    b = write_jsonl(tmp_path / "b.jsonl", [{"messages": "not a list"}] * 20)
    base = PrepareConfig(sources=[SourceSpec(path=str(a)), SourceSpec(path=str(b))], tokenizer=str(tokenizer_dir),
                         num_proc=1)
    whole = prepare(dataclasses.replace(base, output=str(tmp_path / "whole")))
    caplog.set_level("WARNING", logger="beam_sft")
    configs = [dataclasses.replace(base, num_shards=3, shard_index=i, output=str(tmp_path / f"s{i}")) for i in range(3)]
    shards = [prepare(c) for c in configs]
    # warnings only: an earlier test may have left a child logger at INFO (its phase timings)
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not warned, warned
    empty = json.loads((shards[2] / "report.json").read_text())
    assert empty["tokens"]["rows"] == 0 and "verify" not in empty
    before = (shards[2] / "report.json").read_bytes()
    assert prepare(configs[2]) == shards[2] and (shards[2] / "report.json").read_bytes() == before  # its cache hit
    merged = merge_shards(shards, tmp_path / "merged")
    assert_same_folder(merged, whole, probe=False, verify_tokenizer=False)
    only_b = PrepareConfig(sources=[SourceSpec(path=str(b))], tokenizer=str(tokenizer_dir), num_proc=1, num_shards=2)
    none = [prepare(dataclasses.replace(only_b, shard_index=i, output=str(tmp_path / f"b{i}"))) for i in range(2)]
    with pytest.raises(NothingKept, match="no shard kept a row"):
        merge_shards(none, tmp_path / "none")
    assert not (tmp_path / "none").exists()
