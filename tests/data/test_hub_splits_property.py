"""Differential property: the files a local folder's split reads are the files ``datasets`` reads.

Hypothesis draws small folder layouts (split-named files, shards, split folders, nested folders, six
file types, with or without a ``configs:`` card), writes them, and compares for each split the files
``files_read("FOLDER@SPLIT")`` lists with ``datasets.load_dataset_builder(FOLDER).config.data_files``
(what ``load_dataset(FOLDER, split=SPLIT)`` reads; ``datasets`` itself is the oracle, never our code),
and what the bare ``FOLDER`` reads with datasets' ``train`` split. Where the two differ, ours must be a
refusal, or one of the deliberate differences below, each with its reason.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from beam_sft.data.file_kinds import DATA_SUFFIXES
from beam_sft.data.hub import DatasetRef, parse_data_arg
from beam_sft.data.sources import files_read
from beam_sft.errors import BeamError

datasets = pytest.importorskip("datasets")

SPLIT_WORDS = {"train": "train", "training": "train", "test": "test", "testing": "test", "eval": "test",
               "evaluation": "test", "validation": "validation", "valid": "validation", "dev": "validation",
               "val": "validation"}
STEMS = ["train", "test", "validation", "valid", "dev", "eval", "val", "testing", "sft_train", "sft_test", "train_sft",
         "chat", "extra", "test_case", "drone_training", "train-00000-of-00002", "train-00001-of-00002",
         "test-00000-of-00001", "sft-00000-of-00001"]
FOLDERS = ["", "", "", "data/", "train/", "test/", "data/train/", "data/test/", "sub/", "sub/deep/", "validation/",
           ".hidden/"]
EXTENSIONS = [".jsonl", ".jsonl", ".json", ".parquet", ".csv", ".txt", ".md", ".jsonl.gz"]
CARD_PATTERNS = ["train*", "test*", "data/*", "**/*.jsonl", "*.jsonl", "data/train-*", "sub/**"]

files_st = st.lists(st.tuples(st.sampled_from(FOLDERS), st.sampled_from(STEMS), st.sampled_from(EXTENSIONS))
                    .map("".join), min_size=1, max_size=5, unique=True)
card_st = st.none() | st.just({"data_dir": "data"}) | st.dictionaries(
    st.sampled_from(["train", "test"]), st.sampled_from(CARD_PATTERNS), min_size=1, max_size=2)


def _write(root: Path, names: list[str], card: dict | None) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".gz"):
            path.write_bytes(gzip.compress((json.dumps({"tag": name}) + "\n").encode()))
        elif name.endswith(".parquet"):
            pq.write_table(pa.table({"tag": [name]}), path)
        elif name.endswith(".csv"):
            path.write_text(f"tag\n{name}\n")
        elif name.endswith((".txt", ".md")):
            path.write_text(f"{name}\n")
        elif name.endswith(".json"):
            path.write_text(json.dumps([{"tag": name}]))
        else:
            path.write_text(json.dumps({"tag": name}) + "\n")
    if card == {"data_dir": "data"}:  # a config with no data_files: its splits inferred under data_dir
        (root / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_dir: data\n---\n")
    elif card is not None:
        entries = "".join(f"  - split: {split}\n    path: \"{pattern}\"\n" for split, pattern in card.items())
        (root / "README.md").write_text(f"---\nconfigs:\n- config_name: default\n  data_files:\n{entries}---\n")


def _theirs(root: Path, cache: str) -> tuple[dict[str, set[str]] | None, str]:
    """split -> the files ``load_dataset(root, split=...)`` reads (None when datasets refuses the
    folder), and why it refuses."""
    try:
        builder = datasets.load_dataset_builder(str(root), cache_dir=cache)
        return {str(s): {_rel(root, f) for f in files} for s, files in builder.config.data_files.items()}, ""
    except Exception as exc:  # noqa: BLE001 (any refusal: module mismatch, no data files, a bad card)
        return None, str(exc)


def _own_types_refused(card: bool, why: str, ours: set[str]) -> bool:
    """Deliberate: a card's splits of JSON, JSON Lines and Parquet are read here file by file, each by
    its own reader; datasets needs one module for every split (inferred from the first config's
    files, or the names at the folder's top when it lists none) and refuses a JSON split beside a
    Parquet one, or beside files outside the config read by another module."""
    if not (card and why.startswith("Couldn't infer the same data file format")):
        return False
    return all(name.lower().endswith(DATA_SUFFIXES) for name in ours)


def _ours(root: Path, source: str) -> set[str] | BeamError:
    try:
        return {_rel(root, f) for f in files_read(source)}
    except BeamError as exc:
        return exc


def _rel(root: Path, path) -> str:
    return Path(os.path.realpath(path)).relative_to(os.path.realpath(root)).as_posix()


def _strongly_named(name: str) -> bool:
    """Our policy of a file named by split (README): its stem is a split word (or a shard of one), or
    a top-level or ``data/`` folder is; a hub shard in ``data/`` names its split whatever the word."""
    parts = name.split("/")
    stem = parts[-1].split(".")[0]
    shard = stem.split("-")[0] if "-of-" in stem else None
    folders = parts[:-1]
    tops = folders[:1] + (folders[1:2] if folders[:1] == ["data"] else [])
    return (stem in SPLIT_WORDS or (shard is not None and (shard in SPLIT_WORDS or folders == ["data"]))
            or any(f in SPLIT_WORDS for f in tops))


# Deliberate refusals where datasets reads something: the message says which.
DELIBERATE_REFUSALS = (
    # split by names, datasets reads one type per split and drops the other type's files, unsaid
    "datasets reads one type per split",
    # a card pattern over a file of another type: datasets reads it as the others' type and fails
    "is not a data file that pattern should match",
    # a file two patterns of one split match: datasets reads its rows twice
    "so datasets reads its rows twice",
)


def check(root: Path, cache: str) -> None:
    theirs, why = _theirs(root, cache)
    card = (root / "README.md").is_file()
    for split in ("train", "test", "validation"):
        ours = _ours(root, f"{root}@{split}")
        if isinstance(ours, BeamError):
            said = str(ours)
            assert "\n" not in said
            assert theirs is None or split not in theirs or any(d in said for d in DELIBERATE_REFUSALS), (
                f"@{split}: refused ({said}) where datasets reads {theirs}")
        else:
            if theirs is None and _own_types_refused(card, why, ours):
                continue
            assert theirs is not None and split in theirs, f"@{split}: read {ours} where datasets refuses ({why})"
            assert ours == theirs[split], f"@{split}: read {sorted(ours)}, datasets reads {sorted(theirs[split])}"
    _check_bare(root, theirs, card, why)


def _check_bare(root: Path, theirs: dict[str, set[str]] | None, card: bool, why: str) -> None:
    try:
        parsed = parse_data_arg(str(root))
    except BeamError as exc:
        # Deliberate: a folder whose bare reading is not datasets' train split (its test rows would be
        # trained on, or its files that name no split read where datasets drops them) is refused,
        # naming its splits; never a folder datasets reads exactly as we would read it whole.
        plain = _plain(root)
        assert theirs != {"train": plain}, f"bare: refused ({exc}) though datasets reads every file as train"
        return
    ours = _ours(root, str(root))
    if isinstance(parsed, DatasetRef):  # a card: its train split, as FOLDER@train
        assert isinstance(ours, BeamError) or (theirs is not None and ours == theirs.get("train")) or (
            theirs is None and _own_types_refused(card, why, ours)), (
            f"bare card folder: read {ours}, datasets reads {theirs}")
        return
    if isinstance(ours, BeamError) or theirs == {"train": ours}:
        return
    names = sorted(ours)
    # Deliberate: a plain folder reads every data file by its own reader. Where datasets splits
    # nothing by name it reads one type of them as train; where no name is a split's name (words
    # that only hold one: `drone_training.jsonl` beside `chat.jsonl`), the folder is not a
    # repository's splits and is read whole, never losing the files datasets would drop.
    from datasets.data_files import get_data_patterns

    unsplit = get_data_patterns(str(root)) == {"train": ["**"]}
    assert unsplit or not any(_strongly_named(n) for n in names), (
        f"bare: read whole {names} though files are named by split; datasets reads {theirs}")
    if theirs is not None and not unsplit:
        covered = set().union(*theirs.values())
        assert len(theirs) < 2 or not set(names) <= covered, f"bare: read whole {names}; datasets splits {theirs}"


def _plain(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.name.lower().endswith(
        DATA_SUFFIXES) and not any(s.startswith(".") for s in p.relative_to(root).parts)}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=files_st, card=card_st)
@example(names=["train.jsonl", "extra.jsonl"], card=None)  # (a) datasets reads train.jsonl only
@example(names=["train.jsonl", "test.parquet"], card=None)  # (b) datasets refuses: two types across splits
def test_a_folders_splits_read_the_files_datasets_reads(names, card):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        _write(root, names, card)
        check(root, str(Path(tmp) / "cache"))
