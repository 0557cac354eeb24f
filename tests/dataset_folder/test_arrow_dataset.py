"""The adapter that writes and reads ``datasets``' saved-dataset layout (``dataset_folder.arrow_dataset``)
against ``datasets`` itself: what it writes loads with ``load_from_disk`` exactly as a
``save_to_disk`` folder of the same rows does, and its files are what ``save_to_disk`` writes. Any
change in ``datasets``' layout (a state.json or dataset_info.json key, the schema metadata, the
file format) fails here, not in a user's training run."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from beam_sft.dataset_folder import arrow_dataset as ad
from beam_sft.dataset_folder.layout import features


def _table(n: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 40, n)
    ids = [rng.integers(0, 1000, k).astype(np.int32) for k in lengths]
    masks = [rng.integers(0, 2, k).astype(np.int8) for k in lengths]
    return pa.table({
        "input_ids": pa.array(ids, pa.list_(pa.int32())),
        "assistant_masks": pa.array(masks, pa.list_(pa.int8())),
        "row": pa.array([json.dumps({"i": i, "t": "é" * (i % 5)}) for i in range(n)], pa.string()),
        "source": pa.array([f"s{i % 3}" for i in range(n)], pa.string()),
        "row_index": pa.array(range(n), pa.int64()),
        "num_tokens": pa.array(lengths.astype(np.int32)),
        "num_trained": pa.array([int(m.sum()) for m in masks], pa.int32()),
    })


def _reference(directory, table: pa.Table) -> None:
    """What prepare wrote before: the map output's parts concatenated, the status column removed."""
    from datasets import Dataset, concatenate_datasets

    feats = features()
    with_status = table.append_column("status", pa.array(["kept"] * table.num_rows))
    half = table.num_rows // 2
    parts = [Dataset(_in_memory(with_status.slice(0, half))), Dataset(_in_memory(with_status.slice(half)))]
    dataset = concatenate_datasets(parts).remove_columns(["status"]).cast(feats)
    dataset.save_to_disk(str(directory))


def _in_memory(table):
    from datasets.table import InMemoryTable

    return InMemoryTable(table)


def _write(directory, table: pa.Table, *, pieces: int = 7, **kwargs) -> ad.DatasetWriter:
    directory.mkdir()
    writer = ad.DatasetWriter(directory, fingerprint="0123456789abcdef", **kwargs)
    step = max(1, table.num_rows // pieces)
    for start in range(0, table.num_rows, step):  # odd-sized pieces: the writer re-batches them
        writer.write(table.slice(start, step))
    writer.close()
    return writer


def test_one_shard_is_what_save_to_disk_writes(tmp_path):
    from datasets import load_from_disk

    table = _table(600)
    _reference(tmp_path / "ref", table)
    _write(tmp_path / "ours", table)
    ref, ours = tmp_path / "ref", tmp_path / "ours"
    assert sorted(p.name for p in ref.iterdir()) == sorted(p.name for p in ours.iterdir())
    # the file list a view links to is every file save_to_disk wrote, data files in row order
    assert sorted(ad.dataset_file_names(ref)) == sorted(p.name for p in ref.iterdir())
    assert ad.dataset_file_names(ours)[2:] == [p.name for p in ad.data_files(ours)]
    # the data file byte for byte (same batches, same schema metadata), dataset_info.json too
    assert (ref / "data-00000-of-00001.arrow").read_bytes() == (ours / "data-00000-of-00001.arrow").read_bytes()
    assert (ref / ad.INFO_FILE).read_bytes() == (ours / ad.INFO_FILE).read_bytes()
    ref_state, our_state = (json.loads((d / ad.STATE_FILE).read_text()) for d in (ref, ours))
    assert ref_state.pop("_fingerprint") and our_state.pop("_fingerprint") == "0123456789abcdef"
    assert ref_state == our_state
    a, b = load_from_disk(str(ref)), load_from_disk(str(ours))
    assert a.features == b.features == features() and a.column_names == b.column_names
    assert a.format == b.format
    assert a.data.table.equals(b.data.table)


def test_many_shards_load_as_one_dataset_in_order(tmp_path):
    from datasets import load_from_disk

    table = _table(2500, seed=1)
    writer = _write(tmp_path / "ours", table, pieces=13, max_shard_bytes=20_000)
    files = ad.data_files(tmp_path / "ours")
    assert len(files) > 2 and [f.name for f in files] == [f"data-{i:05d}-of-{len(files):05d}.arrow"
                                                           for i in range(len(files))]
    assert writer.rows == 2500
    loaded = load_from_disk(str(tmp_path / "ours"))
    assert loaded.features == features()
    assert loaded.data.table.equals(table.cast(features().arrow_schema))
    assert not list((tmp_path / "ours").glob(".shard-*"))  # every shard renamed


def test_batches_read_back_without_a_map(tmp_path):
    table = _table(1500, seed=2)
    _write(tmp_path / "ours", table, max_shard_bytes=30_000)
    batches = list(ad.iter_batches(tmp_path / "ours"))
    assert pa.Table.from_batches(batches).equals(table.cast(features().arrow_schema))
    small = pa.Table.from_batches(list(ad.iter_batches(tmp_path / "ours", ["source", "row_index"])))
    assert small.column_names == ["source", "row_index"] and small.num_rows == 1500
    assert ad.features_of(tmp_path / "ours") == features()
    _reference(tmp_path / "ref", table)  # reads save_to_disk's folders too
    assert pa.Table.from_batches(list(ad.iter_batches(tmp_path / "ref"))).equals(table.cast(features().arrow_schema))


def test_a_table_with_other_types_is_cast_and_a_missing_column_refused(tmp_path):
    from datasets import load_from_disk

    table = _table(10)
    wide = table.set_column(4, "row_index", pa.array(range(10), pa.int32()))
    _write(tmp_path / "ours", wide)
    assert load_from_disk(str(tmp_path / "ours")).features == features()
    writer = ad.DatasetWriter(tmp_path, fingerprint="f")
    with pytest.raises(KeyError):
        writer.write(table.drop_columns(["row"]))


def test_long_rows_make_smaller_batches(tmp_path, monkeypatch):
    # (save_to_disk too keeps batches near 100 MB when rows are long)
    from datasets import load_from_disk

    monkeypatch.setattr(ad, "MAX_BATCH_BYTES", 5_000)
    table = _table(700, seed=3)
    _write(tmp_path / "ours", table, pieces=70)
    batches = list(ad.iter_batches(tmp_path / "ours"))
    assert len(batches) > 5 and max(b.num_rows for b in batches) < ad.BATCH_ROWS
    assert load_from_disk(str(tmp_path / "ours")).data.table.equals(table.cast(features().arrow_schema))


def test_rows_by_position_across_batches_and_shards(tmp_path):
    table = _table(2600, seed=4).cast(features().arrow_schema)
    _write(tmp_path / "ours", table, pieces=11, max_shard_bytes=40_000)
    assert len(ad.data_files(tmp_path / "ours")) > 2
    reader = ad.RowReader(tmp_path / "ours")
    assert reader.num_rows == 2600
    for start, stop in ((0, 2600), (999, 1001), (1000, 1000), (2599, 2600), (1500, 9999)):
        assert reader.slice(start, stop).equals(table.slice(start, max(0, min(stop, 2600) - start)))
    picks = [2599, 0, 1000, 999, 1000, 1733]
    assert reader.take(picks).to_pylist() == table.take(picks).to_pylist()
    with pytest.raises(IndexError):
        reader.take([2600])
    reader.close()


def test_the_schema_and_features_built_without_datasets_are_datasets_own():
    # prepare writes and verify reads without importing datasets: what it builds must be what
    # datasets itself builds, metadata included (load_from_disk reads the features from it)
    from datasets import Features, List, Value

    from beam_sft.dataset_folder.layout import COLUMNS, arrow_schema, features_dict
    from beam_sft.prepare.batch import OUTPUT_COLUMNS, STATUS_COLUMNS, output_schema

    assert arrow_schema().equals(features().arrow_schema, check_metadata=True)
    assert features_dict() == features().to_dict()
    theirs = Features({name: List(Value(kind[5:])) if kind.startswith("list:") else Value(kind)
                       for name, kind in OUTPUT_COLUMNS.items()})
    assert output_schema().equals(theirs.arrow_schema, check_metadata=True)
    assert list(OUTPUT_COLUMNS) == list(COLUMNS) + list(STATUS_COLUMNS)
    assert theirs["reject"].dtype == "large_string" and output_schema().field("reject").type == pa.large_string()


def test_prepare_and_verify_do_not_import_datasets_or_pandas(tmp_path, tokenizer_dir):
    # half a second of every CLI start; the folder must still load with datasets (the tests above).
    # pandas: 0.23 s that pyarrow.array's first call spends importing it (beam_sft.arrow_arrays builds without it)
    import subprocess
    import sys

    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                             {"role": "assistant", "content": "hello",
                                              "reasoning_content": "greet"}]}) + "\n")
    code = ("import sys, runpy; sys.argv = ['beam-sft', 'prepare', '--data', sys.argv[1], '--format', 'openai', "
            "'--tokenizer', sys.argv[2], '--output', sys.argv[3], '--no-cache', '--quiet']\n"
            "from beam_sft.cli import main\nrc = main()\n"
            "print('IMPORTED', sorted(m for m in ('datasets', 'pandas') if m in sys.modules))\nraise SystemExit(rc)")
    done = subprocess.run([sys.executable, "-c", code, str(data), str(tokenizer_dir), str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "IMPORTED []" in done.stdout, done.stdout
    assert (tmp_path / "out" / "report.json").is_file()


def test_open_saved_refuses_what_load_from_disk_refuses(tmp_path):
    from datasets import Dataset, DatasetDict

    table = _table(30, seed=5)
    _write(tmp_path / "ours", table)
    saved = ad.open_saved(tmp_path / "ours")
    assert len(saved) == 30 and saved.column_names == list(features())
    assert saved.rows(3, 5, ["row_index"]).column("row_index").to_pylist() == [3, 4]
    with pytest.raises(FileNotFoundError):
        ad.open_saved(tmp_path / "nothing")
    DatasetDict({"train": Dataset.from_dict({"a": [1]})}).save_to_disk(str(tmp_path / "dict"))
    with pytest.raises(ValueError, match="dataset dictionary"):
        ad.open_saved(tmp_path / "dict")
    (tmp_path / "ours" / "data-00000-of-00001.arrow").unlink()
    with pytest.raises(FileNotFoundError, match="data file"):
        ad.open_saved(tmp_path / "ours")
    (tmp_path / "ours" / ad.STATE_FILE).write_text(json.dumps({"_data_files": []}))
    with pytest.raises(IndexError):
        ad.open_saved(tmp_path / "ours")
    (tmp_path / "ours" / ad.STATE_FILE).write_text("{")
    with pytest.raises(ValueError):
        ad.open_saved(tmp_path / "ours")
