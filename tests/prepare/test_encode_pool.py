"""The encode pool (``prepare.encode_pool``): forked workers over the records file's batches give
the same dataset, rejects and counts as the in-process path, with the head split inside a batch,
several sources and rejects; every record is encoded once; the work files are gone afterwards."""

from __future__ import annotations

import json

import pytest

from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
from tests.encode.conftest import write_jsonl
from tests.prepare.test_pipeline import load, small_rows


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("pool")
    first = write_jsonl(root / "a.jsonl", small_rows(230, seed=1))
    with open(first, "a", encoding="utf-8") as fh:
        fh.write("{not json\n")
        fh.write(json.dumps({"messages": [{"role": "user", "content": "no answer"}]}) + "\n")
    second = write_jsonl(root / "b.jsonl", small_rows(90, seed=2))
    return [SourceSpec(path=str(first)), SourceSpec(path=str(second), weight=1.5)]


def _run(tmp_path, tokenizer_dir, sources, num_proc: int):
    # batch_size 50: the 128 head records end inside the third record batch
    out = prepare(PrepareConfig(sources=sources, tokenizer=str(tokenizer_dir), output=str(tmp_path / "out"),
                                num_proc=num_proc, batch_size=50, verify=False))
    return out, json.loads((out / "report.json").read_text())


def test_the_pool_gives_what_one_process_gives(tmp_path, tokenizer_dir, sources):
    one, report_one = _run(tmp_path / "one", tokenizer_dir, sources, 1)
    two, report_two = _run(tmp_path / "two", tokenizer_dir, sources, 2)
    assert report_two["timing"]["num_proc"] == 2
    a, b = load(one), load(two)
    assert a.features == b.features and a.to_dict() == b.to_dict()
    assert (one / "rejects.jsonl").read_text() == (two / "rejects.jsonl").read_text()
    for section in ("sources", "tokens", "mix", "totals"):
        assert report_one.get(section) == report_two.get(section), section
    read = sum(entry["read"] for entry in report_two["sources"].values())
    rejected = sum(sum(entry["rejected"].values()) for entry in report_two["sources"].values())
    assert read == 232 + 90 and rejected == 2 == len((two / "rejects.jsonl").read_text().splitlines())
    # source b's weight 1.5 gives some rows two copies; rows come in record order, copies together
    keys = list(zip(b["source"], b["row_index"], strict=True))
    assert len(keys) > 230 + 90 and keys == sorted(keys, key=lambda k: (k[0] != sources[0].path, k[1]))
    for out in (one, two):
        assert not (out / ".work").exists()
        assert sorted(p.name for p in out.glob("data-*.arrow")) == ["data-00000-of-00001.arrow"]


def test_every_record_is_in_exactly_one_task(tmp_path):
    import pyarrow as pa

    from beam_sft.prepare.encode_pool import tasks_after
    from beam_sft.prepare.records import RecordsFile

    schema = pa.schema([("raw", pa.large_string())])
    path = tmp_path / "records.arrow"
    sizes = [50, 50, 50, 7, 50, 3]  # a source's last batch is short
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        start = 0
        for size in sizes:
            writer.write_batch(pa.record_batch([pa.array([str(i) for i in range(start, start + size)],
                                                         pa.large_string())], schema=schema))
            start += size
    records = RecordsFile(path)
    for head in (0, 1, 50, 128, 157, 160, 210):
        table, index, skip = records.head(head)
        seen = table.column("raw").to_pylist()
        for task in tasks_after(index, skip, records.num_batches):
            seen += records.batch(task.batch).slice(task.skip).column("raw").to_pylist()
        assert seen == [str(i) for i in range(sum(sizes))], head
    records.close()


def test_a_worker_error_reaches_the_caller_and_leaves_nothing(tmp_path, tokenizer_dir, sources, monkeypatch):
    from beam_sft.prepare import batch

    real = batch.process_batch

    def broken(records, *, job, **where):
        if records.num_rows and records.column("row_index")[0].as_py() >= 200:
            raise RuntimeError("encoder bug")
        return real(records, job=job, **where)

    monkeypatch.setattr(batch, "process_batch", broken)  # inherited by the forked workers
    with pytest.raises(RuntimeError, match="encoder bug"):
        _run(tmp_path, tokenizer_dir, sources, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no staging, no lock, no output
    import multiprocessing

    assert multiprocessing.active_children() == []  # the pool was ended, not left to the collector
