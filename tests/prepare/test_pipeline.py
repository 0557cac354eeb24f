"""``prepare`` end to end on small data: the prepared-dataset contract, rejects, report, policies, mix."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from beam_sft.data.synthetic import synthetic_rows
from beam_sft.encode import encode_row
from beam_sft.errors import BeamError, ConfigError, NothingKept
from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
from tests.encode.conftest import simple_row, write_jsonl

COLUMNS = {"input_ids", "assistant_masks", "row", "source", "row_index", "num_tokens", "num_trained"}


def small_rows(n: int, seed: int = 0) -> list[dict]:
    rows = []
    for row in synthetic_rows(n, seed=seed, scale=0.05, vocab=500):
        row.pop("meta")
        rows.append(row)
    return rows


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "chat.jsonl"
    rows = small_rows(24)
    rows.insert(3, {"messages": [{"role": "user", "content": "no reasoning"}, {"role": "assistant", "content": "x"}]})
    write_jsonl(path, rows)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("{not json\n")
    return path


def run(tmp_path, tokenizer_dir, sources, **options) -> Path:
    config = PrepareConfig(sources=sources, tokenizer=str(tokenizer_dir), output=str(tmp_path / "out"),
                           num_proc=options.pop("num_proc", 1), **options)
    return prepare(config)


def load(directory: Path):
    from datasets import load_from_disk

    return load_from_disk(str(directory))


def test_contract(tmp_path, tokenizer_dir, tokenizer, data):
    out = run(tmp_path, tokenizer_dir, [SourceSpec(path=str(data), name="chat")], verify=True)
    dataset = load(out)
    assert set(dataset.column_names) == COLUMNS
    assert len(dataset) == 24
    for record in dataset:
        row = json.loads(record["row"])
        assert row["meta"] == {"source": "chat", "row": record["row_index"]}
        assert encode_row(row, tokenizer) == {"input_ids": record["input_ids"], "assistant_masks": record["assistant_masks"]}
        assert record["num_tokens"] == len(record["input_ids"])
        assert record["num_trained"] == sum(record["assistant_masks"]) > 0
        assert record["source"] == "chat"

    report = json.loads((out / "report.json").read_text())
    assert report["sources"]["chat"]["read"] == 26
    assert report["sources"]["chat"]["kept"] == 24
    assert report["sources"]["chat"]["rejected"] == {"invalid_json": 1, "missing_reasoning": 1}
    assert report["encoder"]["name"] == "fast" and report["encoder"]["probe"]["ok"]
    assert report["encoder"]["native_rows"] == 24 and report["encoder"]["fallback_rows"] == 0  # Beam's template
    assert report["tokens"]["rows"] == 24 and report["tokens"]["total"] == sum(dataset["num_tokens"])
    assert report["verify"]["ok"] is True

    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    assert [(r["row"], r["code"]) for r in rejects] == [(3, "missing_reasoning"), (25, "invalid_json")]
    assert all(set(r) == {"source", "row", "code", "message", "raw"} for r in rejects)
    assert rejects[1]["raw"] == "{not json"

    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(out / "tokenizer").chat_template == tokenizer.chat_template


def test_num_proc_and_encoder_do_not_change_the_output(tmp_path, tokenizer_dir, data):
    one = load(run(tmp_path / "a", tokenizer_dir, [SourceSpec(path=str(data))], verify=False))
    two = load(run(tmp_path / "b", tokenizer_dir, [SourceSpec(path=str(data))], verify=False, num_proc=2,
                   batch_size=4))
    template = load(run(tmp_path / "c", tokenizer_dir, [SourceSpec(path=str(data))], verify=False,
                        encoder="template"))
    assert one.to_dict() == two.to_dict() == template.to_dict()
    rejects = [(tmp_path / d / "out" / "rejects.jsonl").read_text() for d in "abc"]
    assert rejects[0] == rejects[1] == rejects[2]


def test_length_policy_drop_and_trim(tmp_path, tokenizer_dir, tokenizer):
    long_turns = [{"role": "user", "content": "q " * 40},
                  {"role": "assistant", "reasoning_content": "r " * 40, "content": "a " * 40}]
    rows = [simple_row(0), {"messages": long_turns * 3}, {"messages": [long_turns[0], {
        **long_turns[1], "content": "a " * 2000}]}]
    path = write_jsonl(tmp_path / "rows.jsonl", rows)
    one_turn = len(encode_row({"messages": long_turns}, tokenizer)["input_ids"])

    out = run(tmp_path / "drop", tokenizer_dir, [SourceSpec(path=str(path))], max_length=one_turn + 5, verify=False)
    report = json.loads((out / "report.json").read_text())
    assert report["length_policy"]["dropped_too_long"] == 2 and len(load(out)) == 1

    out = run(tmp_path / "trim", tokenizer_dir, [SourceSpec(path=str(path))], max_length=one_turn + 5,
              length_policy="trim_turns", verify=True)
    report = json.loads((out / "report.json").read_text())
    assert report["length_policy"] == {"max_length": one_turn + 5, "policy": "trim_turns", "dropped_too_long": 1,
                                       "trimmed_rows": 1, "trimmed_messages": 4}
    dataset = load(out)
    trimmed = json.loads(dataset[1]["row"])
    assert len(trimmed["messages"]) == 2 and trimmed["meta"]["trimmed_messages"] == 4
    assert max(dataset["num_tokens"]) <= one_turn + 5


def test_mix_weights_and_report(tmp_path, tokenizer_dir):
    a = write_jsonl(tmp_path / "a.jsonl", [simple_row(i) for i in range(40)])
    b = write_jsonl(tmp_path / "b.jsonl", [simple_row(i, reasoning="") for i in range(10)]
                    + [simple_row(i) for i in range(30)])
    out = run(tmp_path, tokenizer_dir, [SourceSpec(path=str(a), weight=2, name="a"),
                                        SourceSpec(path=str(b), weight=0.5, name="b")], verify=False)
    report = json.loads((out / "report.json").read_text())
    assert report["sources"]["a"]["rows_out"] == 80
    assert 5 <= report["sources"]["b"]["rows_out"] <= 25
    assert report["mix"]["planned"]["a"] == {"weight": 2.0, "rows": 80.0, "share": 0.8}
    assert report["mix"]["planned"]["b"]["rows"] == 20.0
    real = report["mix"]["real"]
    assert real["a"]["rows"] + real["b"]["rows"] == len(load(out))
    assert report["sources"]["b"]["rejected"] == {"missing_reasoning": 10}


def test_fallback_when_the_probe_disagrees(tmp_path, tokenizer_dir, data, monkeypatch):
    from beam_sft.encode.fast import probe as probe_module

    monkeypatch.setattr(probe_module, "probe", lambda *a, **k: probe_module.ProbeResult(False, 1, "forced"))
    out = run(tmp_path, tokenizer_dir, [SourceSpec(path=str(data))], verify=False)
    report = json.loads((out / "report.json").read_text())
    assert report["encoder"]["name"] == "template" and "forced" in report["encoder"]["fallback_reason"]
    with pytest.raises(ConfigError, match="^encoder: the fast encoder cannot be used here: start-up probe mismatch: forced") as info:
        run(tmp_path / "strict", tokenizer_dir, [SourceSpec(path=str(data))], verify=False, encoder="fast")
    assert info.value.path == "encoder"
    assert list((tmp_path / "strict").iterdir()) == []  # nothing published, no staging left


def test_column_map_and_missing_reasoning_reach_the_converter(tmp_path, tokenizer_dir):
    two_turns = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "no reasoning here"},
                 {"role": "user", "content": "b"}, {"role": "assistant", "reasoning_content": "r", "content": "ok"}]
    path = write_jsonl(tmp_path / "dialogs.jsonl", [{"dialog": two_turns}])
    source = SourceSpec(path=str(path), format="openai", column_map={"messages": "dialog"})
    with pytest.raises(NothingKept, match=r"missing_reasoning=1"):  # its one row rejected: nothing to prepare
        run(tmp_path / "drop", tokenizer_dir, [source], verify=False)
    assert not (tmp_path / "drop" / "out").exists()
    out = run(tmp_path / "unmask", tokenizer_dir, [source], verify=False, missing_reasoning="unmask")
    (record,) = load(out)
    row = json.loads(record["row"])
    assert row["messages"][1].get("weight") == 0
    assert record["num_trained"] == sum(encode_row(row, pipeline_tokenizer(tokenizer_dir))["assistant_masks"])


def pipeline_tokenizer(directory):
    from beam_sft.dataset_folder.tokenizer import load_tokenizer

    return load_tokenizer(str(directory))


def test_each_record_is_decoded_and_converted_once(tmp_path, tokenizer_dir, monkeypatch):
    """The probe's rows are the first records, converted in this process and then encoded here too:
    no record goes through json.loads or the converter twice."""
    import beam_sft.convert.pipeline as convert_pipeline
    from beam_sft.prepare import batch

    data = write_jsonl(tmp_path / "rows.jsonl", small_rows(300))
    decoded, converted = [], []
    real_decode, real_convert = batch.decode, convert_pipeline.convert_row
    monkeypatch.setattr(batch, "decode", lambda text, *rest: decoded.append(text) or real_decode(text, *rest))
    monkeypatch.setattr(convert_pipeline, "convert_row",
                        lambda raw, **kw: converted.append(kw["row"]) or real_convert(raw, **kw))
    out = run(tmp_path, tokenizer_dir, [SourceSpec(path=str(data))], verify=False, batch_size=64)
    assert len(load(out)) == 300
    assert sorted(converted) == list(range(300)) and len(decoded) == 300


def test_native_rows_count_what_the_python_render_did(tmp_path, tokenizer_dir, data):
    """report.json's encoder.native_rows: the dataset's rows whose text came from Beam's template in
    Python. A template that is not one it transcribes (here Beam's with a comment added: the same
    text) runs through Jinja, so none; the rows are the same either way; copies count as rows."""
    import shutil

    from transformers import AutoTokenizer

    other = tmp_path / "tokenizer"
    shutil.copytree(tokenizer_dir, other)
    tokenizer = AutoTokenizer.from_pretrained(other)
    tokenizer.chat_template = tokenizer.chat_template + "{# not the shipped template #}"
    tokenizer.save_pretrained(other)
    native = run(tmp_path / "a", tokenizer_dir, [SourceSpec(path=str(data), name="chat", weight=2)], verify=True)
    jinja = run(tmp_path / "b", other, [SourceSpec(path=str(data), name="chat", weight=2)], verify=True)
    reports = [json.loads((d / "report.json").read_text()) for d in (native, jinja)]
    assert [r["tokens"]["rows"] for r in reports] == [48, 48]
    assert [r["encoder"]["native_rows"] for r in reports] == [48, 0]
    assert all(r["verify"]["ok"] for r in reports)
    assert load(native)["input_ids"] == load(jinja)["input_ids"]
    assert load(native)["assistant_masks"] == load(jinja)["assistant_masks"]


def test_a_rows_verdict_does_not_depend_on_its_sources_weight(tmp_path, tokenizer_dir):
    """A row the mix gives no copy was never encoded, so it counted as kept however long it was: the
    same row was too_long at weight 1 and kept at weight 0."""
    rows = [{"messages": [{"role": "user", "content": f"question {i} " + "word " * (3 * i)},
                          {"role": "assistant", "reasoning_content": f"think {i}", "content": f"answer {i}"}]}
            for i in range(30)]
    data = tmp_path / "d.jsonl"
    write_jsonl(data, rows)
    other = tmp_path / "o.jsonl"
    write_jsonl(other, [simple_row(0)])
    verdicts = {}
    for weight in (1.0, 0.7, 0.0):
        out = prepare(PrepareConfig(sources=[SourceSpec(path=str(data), weight=weight, name="d"),
                                             SourceSpec(path=str(other), name="o")],
                                    tokenizer=str(tokenizer_dir), output=str(tmp_path / f"w{weight}"),
                                    max_length=160, num_proc=1))
        entry = json.loads((out / "report.json").read_text())["sources"]["d"]
        lines = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
        rejected_rows = sorted((r["row"], r["code"]) for r in lines if r["source"] == "d")
        verdicts[weight] = (entry["kept"], entry["rejected"], rejected_rows)
    assert verdicts[1.0][1].get("too_long", 0) > 0
    assert verdicts[0.7] == verdicts[0.0] == verdicts[1.0]


def test_one_file_given_twice_by_two_spellings_is_refused_naming_both(tmp_path, data):
    """`a.jsonl` and `./a.jsonl` (or a symlink, or the folder holding it) are one file: with no `name`
    to say it is meant, every row would be read twice, unsaid; one label twice is refused naming the label."""
    other = os.path.join(str(data.parent), ".", data.name)
    with pytest.raises(ConfigError, match=r"sources\[0\] .* and sources\[1\] .* both read .*chat.jsonl'.* read twice"):
        PrepareConfig(sources=[SourceSpec(path=str(data)), SourceSpec(path=other)], output=str(tmp_path / "o"))
    link = tmp_path / "link.jsonl"
    link.symlink_to(data)
    with pytest.raises(ConfigError, match=r"sources\[0\] .* and sources\[1\] .* both read"):
        PrepareConfig(sources=[SourceSpec(path=str(data)), SourceSpec(path=str(link))], output=str(tmp_path / "o"))
    with pytest.raises(ConfigError, match=r"sources\[0\] .* and sources\[1\] .* both read .*chat.jsonl"):
        PrepareConfig(sources=[SourceSpec(path=str(data.parent)), SourceSpec(path=str(data))])
    with pytest.raises(ConfigError, match=r"sources\[0\] and sources\[1\] share the label 'x'"):
        PrepareConfig(sources=[SourceSpec(path=str(data), name="x"), SourceSpec(path=str(link), name="x")])
    # distinct names: the second reading is meant
    config = PrepareConfig(sources=[SourceSpec(path=str(data)), SourceSpec(path=other, name="again")])
    assert [s.label for s in config.sources] == [str(data), "again"]


HUB_CARD = ("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/train-*\n"
            "  - split: test\n    path: data/test-*\n---\n# card\n")


def hub_folder(root: Path, layout: str) -> Path:
    """A dataset folder laid out as on the hub: a `configs:` card over data/train-*.parquet, or no card
    with files (data/train-*) or folders (train/, test/) named for two splits, as datasets infers them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(small_rows(2))
    if layout == "card":
        (root / "data").mkdir(parents=True)
        (root / "README.md").write_text(HUB_CARD, encoding="utf-8")
        train, test = root / "data" / "train-00000-of-00001.parquet", root / "data" / "test-00000-of-00001.parquet"
    elif layout == "named files":
        (root / "data").mkdir(parents=True)
        train, test = root / "data" / "train-00000-of-00001.jsonl", root / "data" / "test-00000-of-00001.jsonl"
    else:
        (root / "train").mkdir(parents=True)
        (root / "test").mkdir()
        train, test = root / "train" / "part-0.jsonl", root / "test" / "part-0.jsonl"
    for path in (train, test):
        if path.suffix == ".parquet":
            pq.write_table(table, path)
        else:
            write_jsonl(path, table.to_pylist())
    return train


@pytest.mark.parametrize("layout", ["card", "named files", "split folders"])
def test_a_hub_layout_folder_and_a_file_it_reads_are_refused_naming_both(tmp_path, layout):
    """The folder is a dataset (its train split), not a plain folder, yet the file is still read by it:
    the check asks the readers' own listing (sources.files_read), so a hub layout is one more case of it.
    With no card, the split is named (`split: train`): the folder alone is refused (hub.refuse_split_named)."""
    repo = tmp_path / "repo"
    train = hub_folder(repo, layout)
    if layout != "card":
        with pytest.raises(BeamError, match=r"repo: its files are named by split.*split: train"):
            PrepareConfig(sources=[SourceSpec(path=str(repo))])
    split = None if layout == "card" else "train"
    with pytest.raises(ConfigError, match=r"sources\[0\] \('.*repo(@train)?'\) and sources\[1\] \('.*train.*'\) both "
                       r"read '.*train.*': its rows would be read twice; give sources\[1\] a `name`"):
        PrepareConfig(sources=[SourceSpec(path=str(repo), split=split), SourceSpec(path=str(train))])
    with pytest.raises(ConfigError, match=r"both read '.*train"):  # either order, and through `split: train`
        PrepareConfig(sources=[SourceSpec(path=str(train)), SourceSpec(path=str(repo), split="train")])
    # the test split's file is not read by the train split: no overlap; a name says a second reading is meant
    test_file = next(p for p in repo.rglob("*") if p.is_file() and "test" in str(p.relative_to(repo)))
    PrepareConfig(sources=[SourceSpec(path=str(repo), split=split), SourceSpec(path=str(test_file))])
    PrepareConfig(sources=[SourceSpec(path=str(repo), split=split), SourceSpec(path=str(train), name="again")])


def test_a_hidden_file_is_not_read_by_its_folder_so_not_twice(tmp_path):
    folder = tmp_path / "rows"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", small_rows(2))
    hidden = folder / ".held" / "b.jsonl"
    hidden.parent.mkdir()
    write_jsonl(hidden, small_rows(2))
    write_jsonl(folder / ".c.jsonl", small_rows(2))
    config = PrepareConfig(sources=[SourceSpec(path=str(folder)), SourceSpec(path=str(hidden)),
                                    SourceSpec(path=str(folder / ".c.jsonl"))])
    assert len(config.sources) == 3


def test_two_folders_one_inside_the_other_are_refused_naming_a_file_of_both(tmp_path):
    outer = tmp_path / "rows"
    inner = outer / "more"
    inner.mkdir(parents=True)
    write_jsonl(outer / "a.jsonl", small_rows(2))
    write_jsonl(inner / "b.jsonl", small_rows(2))
    for first, second in ((outer, inner), (inner, outer)):
        with pytest.raises(ConfigError, match=r"sources\[0\] .* and sources\[1\] .* both read '.*more/b.jsonl'"):
            PrepareConfig(sources=[SourceSpec(path=str(first)), SourceSpec(path=str(second))])
    # a folder whose only data file is hidden from the outer one: nothing read twice
    (inner / "b.jsonl").rename(inner / ".b.jsonl")
    write_jsonl(tmp_path / "other.jsonl", small_rows(1))
    PrepareConfig(sources=[SourceSpec(path=str(outer)), SourceSpec(path=str(tmp_path / "other.jsonl"))])
