"""Streaming readers: JSON Lines, JSON arrays, single objects, Parquet, datasets directories."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_sft.data import sources
from beam_sft.data.sources import BadRecord, iter_records
from beam_sft.errors import BeamError


def records(path):
    return list(iter_records(path))


def test_jsonl_skips_blank_lines_and_keeps_bad_lines_in_place(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"a": 1}\n\n   \n{bad\n[1, 2]\n"text"\n')
    out = records(path)
    assert [i for i, _ in out] == [0, 1, 2, 3]
    assert out[0][1] == {"a": 1} and out[2][1] == [1, 2] and out[3][1] == "text"
    assert isinstance(out[1][1], BadRecord) and out[1][1].text == "{bad"


def test_json_array_items_and_a_message_array_is_one_conversation(tmp_path):
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps([{"messages": []}, {"messages": [1]}], indent=2))
    assert records(rows) == [(0, {"messages": []}), (1, {"messages": [1]})]
    conversation = tmp_path / "conv.json"
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    conversation.write_text(json.dumps(messages, indent=4))
    assert records(conversation) == [(0, messages)]


def test_single_object_multi_object_and_jsonl_named_json(tmp_path):
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"messages": [{"role": "user", "content": "x"}]}, indent=4))
    assert records(one) == [(0, {"messages": [{"role": "user", "content": "x"}]})]
    many = tmp_path / "many.json"
    many.write_text('{\n "a": 1\n}\n{\n "a": 2\n}\n')
    assert records(many) == [(0, {"a": 1}), (1, {"a": 2})]
    lines = tmp_path / "lines.json"
    lines.write_text('{"a": 1}\n{oops\n{"a": 3}\n')
    out = records(lines)
    assert out[0] == (0, {"a": 1}) and isinstance(out[1][1], BadRecord) and out[2] == (2, {"a": 3})
    empty = tmp_path / "empty.json"
    empty.write_text("  \n")
    assert records(empty) == []


@pytest.mark.parametrize("chunk", [1, 3, 7, 64])
def test_array_items_across_read_boundaries(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(sources, "CHUNK", chunk)
    values = [{"t": "x" * 50, "n": [1, 2.5, None]}, 12345678, "s", True, None, -0.5e-3, [], {}]
    path = tmp_path / "a.json"
    path.write_text(" [ " + " ,\n ".join(json.dumps(v) for v in values) + " ] \n")
    assert [v for _, v in records(path)] == values


def test_broken_arrays(tmp_path):
    bad_item = tmp_path / "bad.json"
    bad_item.write_text('[{"a": 1}, {"a": oops}, {"a": 3}]')
    out = records(bad_item)
    assert out[0] == (0, {"a": 1}) and len(out) == 2
    assert isinstance(out[1][1], BadRecord) and '{"a": 3}' in out[1][1].text  # the rest is kept, not lost
    unclosed = tmp_path / "unclosed.json"
    unclosed.write_text('[{"a": 1}, {"a": 2}')
    out = records(unclosed)
    assert [v for _, v in out[:2]] == [{"a": 1}, {"a": 2}] and isinstance(out[2][1], BadRecord)
    missing_comma = tmp_path / "comma.json"
    missing_comma.write_text('[{"a": 1} {"a": 2}]')
    assert isinstance(records(missing_comma)[1][1], BadRecord)


def test_parquet_rows_lose_arrow_null_fills(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [
        {"messages": [{"role": "user", "content": "q", "tool_calls": None}], "tools": None},
        {
            "messages": [{"role": "assistant", "content": None, "tool_calls": [{"id": "c", "name": "f"}]}],
            "tools": None,
        },
    ]
    path = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    out = records(path)
    assert out[0] == (0, {"messages": [{"role": "user", "content": "q"}]})
    assert out[1] == (1, {"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "name": "f"}]}]})


def test_datasets_directory_and_plain_directories(tmp_path):
    datasets = pytest.importorskip("datasets")
    saved = tmp_path / "saved"
    datasets.Dataset.from_list([{"text": "a"}, {"text": "b"}]).save_to_disk(str(saved))
    assert records(saved) == [(0, {"text": "a"}), (1, {"text": "b"})]
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "b.jsonl").write_text('{"x": 2}\n')
    (folder / "a.jsonl").write_text('{"x": 1}\n{"x": 1.5}\n')
    (folder / "notes.txt").write_text("ignored")
    assert records(folder) == [(0, {"x": 1}), (1, {"x": 1.5}), (2, {"x": 2})]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BeamError, match="no data files"):
        records(empty)


def test_a_saved_dataset_inside_a_plain_folder_is_read_as_one_unit(tmp_path):
    """A ``save_to_disk`` folder (a Dataset's, a DatasetDict's) inside a plain folder: its rows are read
    by ``datasets``, once, and its ``dataset_info.json`` / ``state.json`` / ``dataset_dict.json`` are
    never read as rows (they were: the metadata came out as records and the ``.arrow`` rows were left
    out as not a data file)."""
    datasets = pytest.importorskip("datasets")
    from beam_sft.data.sources import expand_source, iter_located, iter_raw_located

    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"x": 1}\n', encoding="utf-8")
    datasets.Dataset.from_list([{"x": 2}, {"x": 3}]).save_to_disk(str(folder / "b_saved"))
    datasets.DatasetDict({"train": datasets.Dataset.from_list([{"x": 4}])}).save_to_disk(str(folder / "c_dict"))
    datasets.Dataset.from_list([{"x": 9}]).save_to_disk(str(folder / ".hidden_saved"))
    files, skipped = expand_source(folder)
    assert files == [folder / "a.jsonl", folder / "b_saved", folder / "c_dict"]
    assert not [s for s in skipped if "b_saved" in str(s.path) or "c_dict" in str(s.path)]
    assert [r for _, _, r in iter_located(folder)] == [{"x": 1}, {"x": 2}, {"x": 3}, {"x": 4}]
    assert [json.loads(r.text) for r in iter_raw_located(folder)] == [{"x": 1}, {"x": 2}, {"x": 3}, {"x": 4}]
    top = tmp_path / "dict_at_top"  # a DatasetDict given itself is one unit too (its splits' metadata is not rows)
    datasets.DatasetDict({"train": datasets.Dataset.from_list([{"x": 5}])}).save_to_disk(str(top))
    assert expand_source(top) == ([top], []) and [r for _, _, r in iter_located(top)] == [{"x": 5}]


json_items = st.recursive(
    # Infinity is not JSON: such items are BadRecords (the number rule in tests/convert/test_input_classes.py)
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(
    items=st.lists(json_items.filter(lambda v: not (isinstance(v, dict) and "role" in v)), max_size=6),
    chunk=st.integers(1, 12),
    indent=st.sampled_from([None, 1]),
)
def test_streamed_array_equals_json_loads(tmp_path_factory, items, chunk, indent):
    path = tmp_path_factory.mktemp("arr") / "a.json"
    path.write_text(json.dumps(items, indent=indent))
    original = sources.CHUNK
    sources.CHUNK = chunk
    try:
        assert [v for _, v in records(path)] == json.loads(path.read_text())
    finally:
        sources.CHUNK = original


def test_jsonl_bad_lines_carry_their_byte_offset(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"a": 1}\n{bad\n')
    (_, first), (_, bad) = records(path)
    assert first == {"a": 1} and isinstance(bad, BadRecord) and bad.byte == 9 and not bad.rest


def test_a_bom_is_not_part_of_the_first_record(tmp_path):
    for name, body in [("a.jsonl", b'{"a": 1}\n{"a": 2}\n'), ("a.json", b'[{"a": 1}, {"a": 2}]'),
                       ("o.json", b'{\n "a": 1\n}\n')]:
        path = tmp_path / name
        path.write_bytes(b"\xef\xbb\xbf" + body)
        assert all(not isinstance(r, BadRecord) for _, r in records(path)), name
        assert records(path)[0] == (0, {"a": 1})


def test_invalid_utf8_survives_as_surrogates_never_replaced(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"a": "x\xffy"}\n')
    ((_, record),) = records(path)
    assert record["a"] == "x\udcffy"


def test_an_unreadable_array_rest_gives_byte_and_estimate(tmp_path):
    path = tmp_path / "a.json"
    text = "[" + ", ".join(['{"n": 1}'] * 10) + ", {oops}, " + ", ".join(['{"n": 1}'] * 10) + "]"
    path.write_text(text)
    out = records(path)
    assert len(out) == 11
    bad = out[-1][1]
    assert bad.rest and bad.byte == text.index("{oops") and 8 <= bad.more <= 12
    assert bad.describe().startswith(f"unreadable from byte {bad.byte} (about {bad.more} more records)")


def test_a_corrupt_parquet_names_the_file(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"x": list(range(1000))}), good)
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    for path in (cut, tmp_path / "fake.parquet"):
        if path.name == "fake.parquet":
            path.write_text("PAR1 but not really")
        with pytest.raises(BeamError, match=str(path.name)):
            records(path)


def test_directories_skip_hidden_entries_and_name_other_files(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.json").write_text("[1]")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.jsonl").write_text('{"b": 1}\n{"b": 2}\n')
    (tmp_path / "a.jsonl").write_text('{"a": 1}\n')
    (tmp_path / "readme.txt").write_text("hi")
    files, skipped = sources.expand_source(tmp_path)
    assert files == [tmp_path / "a.jsonl", tmp_path / "sub" / "b.jsonl"]
    assert [s.path.name for s in skipped] == ["readme.txt"]
    assert list(sources.iter_located(tmp_path)) == [
        (str(tmp_path / "a.jsonl"), 0, {"a": 1}),
        (str(tmp_path / "sub" / "b.jsonl"), 0, {"b": 1}),
        (str(tmp_path / "sub" / "b.jsonl"), 1, {"b": 2}),
    ]
    assert [i for i, _ in records(tmp_path)] == [0, 1, 2]  # iter_records keeps one running index


def test_raw_lines_match_the_records_and_never_hold_invalid_text(tmp_path):
    from beam_sft.convert import ConvertOptions, convert_row

    path = tmp_path / "a.jsonl"
    good = b'{"messages": [{"role": "user", "content": "q"}]}'
    path.write_bytes(b"\xef\xbb\xbf" + good + b"\n\n" + good.replace(b'"q"', b'"\xff"') + b"\n{bad \xff\n")
    raw = list(sources.iter_raw_lines(path))
    assert [i for i, _, _ in raw] == [i for i, _ in records(path)] == [0, 1, 2]
    for _, text, _ in raw:
        text.encode("utf-8")  # an Arrow string column can hold it
    assert raw[0] == (0, good.decode(), "")
    value = json.loads(raw[1][1])
    assert value == records(path)[1][1]  # the same lone surrogates as the decoding reader gives
    assert convert_row(value, format="openai", options=ConvertOptions()).code == "invalid_text"
    assert raw[2][2].startswith("not valid JSON") and "\\xff" in raw[2][1]


@settings(max_examples=100, deadline=None)
@given(
    items=st.lists(json_items.filter(lambda v: not (isinstance(v, dict) and "role" in v)), min_size=1, max_size=6),
    bad=st.sets(st.integers(0, 5)),
    form=st.sampled_from(['{"n": 1e400}', '[NaN]', '{"k": 1, "k": 2}', '{"a": {"b": [Infinity]}}']),
    chunk=st.integers(1, 12),
)
def test_streamed_array_loses_only_the_items_that_break_the_json_rule(tmp_path_factory, items, bad, form, chunk):
    """Number forms and duplicate keys inside an array, across every read boundary: the item that breaks
    the rule is a BadRecord with its own code, every other item is read as json.loads reads it."""
    path = tmp_path_factory.mktemp("arr") / "a.json"
    texts = [form if i in bad else json.dumps(v) for i, v in enumerate(items)]
    path.write_text("[" + ", ".join(texts) + "]")
    original = sources.CHUNK
    sources.CHUNK = chunk
    try:
        got = [v for _, v in records(path)]
    finally:
        sources.CHUNK = original
    assert len(got) == len(items)
    code = "duplicate_key" if '"k"' in form else "non_standard_number"
    for i, (value, item) in enumerate(zip(got, items, strict=True)):
        if i in bad:
            assert isinstance(value, sources.BadRecord) and value.code == code and not value.rest
        else:
            assert value == item


def test_values_after_a_top_level_array_are_read_on_never_dropped(tmp_path):
    """A file of arrays (JSON Lines of conversations saved as .json), an array then objects, an array
    then text that is not JSON: every value after the first ``]`` is a record or an unreadable rest."""
    row = {"messages": [{"role": "user", "content": "hi"}]}
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    cases = {
        "arrays.json": (f"[{json.dumps(row)}]\n[]\n[{json.dumps(row)}, {json.dumps(row)}]\n", [row, row, row]),
        "then_object.json": (f"[{json.dumps(row)}]\n{json.dumps(row)}\n", [row, row]),
        "conversations.json": (f"{json.dumps(messages)}\n{json.dumps(messages)}\n", [messages, messages]),
    }
    for name, (text, want) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        assert [v for _, v in records(path)] == want, name
    junk = tmp_path / "junk.json"
    head = f"[{json.dumps(row)}]"
    junk.write_text(head + " garbage\n")
    out = records(junk)
    assert out[0] == (0, row) and isinstance(out[1][1], BadRecord) and out[1][1].rest
    assert out[1][1].byte == len(head) + 1 and out[1][1].text.startswith("garbage")


def test_only_json_whitespace_is_blank(tmp_path):
    """A line of a form feed or a no-break space is a record json.loads refuses, not a blank line."""
    path = tmp_path / "a.jsonl"
    path.write_text('{"a": 1}\n\x0c\n\u00a0\n \t\r\n{"a": 2}\n', encoding="utf-8")
    out = records(path)
    assert [type(v).__name__ for _, v in out] == ["dict", "BadRecord", "BadRecord", "dict"]
    assert [t for _, t, _ in sources.iter_raw_lines(path)] == ['{"a": 1}', "\x0c", "\u00a0", '{"a": 2}']


def test_carriage_returns_are_read_as_they_are(tmp_path):
    """A CR inside a transcript is content, and a CRLF file's byte offsets count both bytes."""
    transcript = tmp_path / "t.txt"
    transcript.write_bytes(b"<|start|>user<|message|>line1\r\nline2<|end|>\r\n")
    assert records(transcript) == [(0, "<|start|>user<|message|>line1\r\nline2<|end|>")]
    crlf = tmp_path / "a.json"
    text = '[\r\n  {"a": 1},\r\n  {"a": oops}\r\n]\r\n'
    crlf.write_bytes(text.encode())
    bad = records(crlf)[1][1]
    assert isinstance(bad, BadRecord) and bad.byte == text.index('{"a": oops}')


@pytest.mark.parametrize("name", ["rows.csv", "rows.tsv", "rows.arrow", "rows.csv.gz", "book.xlsx"])
def test_a_kind_of_file_no_reader_reads_is_one_clear_error(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"prompt,answer\nhi,yo\n")
    with pytest.raises(BeamError, match=r"is not read here .*convert it to JSON Lines"):
        records(path)


def test_a_pretty_printed_document_named_jsonl_is_read_as_json(tmp_path):
    """An array (or objects) pretty-printed into a .jsonl file: line by line, each of its lines was one
    invalid_json record (41 rejections for 3 rows). A broken first line of real JSON Lines stays one
    record, and the lines after it are read."""
    rows = [{"messages": [{"role": "user", "content": f"q{i}"}]} for i in range(3)]
    array = tmp_path / "array.jsonl"
    array.write_text(json.dumps(rows, indent=2))
    objects = tmp_path / "objects.jsonl"
    objects.write_text("\n".join(json.dumps(r, indent=2) for r in rows))
    for path in (array, objects):
        assert [v for _, v in records(path)] == rows
        assert [json.loads(r.text) for r in sources.iter_raw_located(path)] == rows
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"messages": oops\n' + json.dumps(rows[0]) + "\n")
    out = records(broken)
    assert isinstance(out[0][1], BadRecord) and out[1] == (1, rows[0])


def test_a_pipe_as_a_source_is_said_to_be_one(tmp_path):
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(BeamError, match="not a regular file"):
        records(fifo)
    with pytest.raises(BeamError, match="no such file or directory"):
        records(tmp_path / "missing.jsonl")


def test_a_stray_bracket_above_json_lines_is_one_bad_line(tmp_path):
    """A first line of "[" above whole lines of JSON Lines is one bad record; the rows after it are read
    (read as one JSON value, 999 of 1000 rows were one unreadable rest)."""
    row = {"messages": [{"role": "user", "content": "q"}]}
    path = tmp_path / "stray.jsonl"
    path.write_text("[\n" + "".join(json.dumps(row) + "\n" for _ in range(50)))
    out = records(path)
    assert isinstance(out[0][1], BadRecord) and [v for _, v in out[1:]] == [row] * 50
    compact = tmp_path / "compact.jsonl"
    compact.write_text("[\n" + ",\n".join(json.dumps(row) for _ in range(3)) + "\n]\n")
    assert [v for _, v in records(compact)] == [row] * 3


def test_read_twice_finds_one_file_in_two_sources_and_a_file_inside_a_folder_read_whole(tmp_path):
    from beam_sft.data.sources import read_twice

    saved = tmp_path / "saved"  # a folder read whole (a save_to_disk folder, a repository datasets lists)
    saved.mkdir()
    inside = saved / "data-00000-of-00001.arrow"
    inside.write_bytes(b"")
    other = tmp_path / "a.jsonl"
    other.write_text("{}\n", encoding="utf-8")
    assert read_twice([[other], [saved]]) is None
    assert read_twice([[other], [tmp_path / "." / "a.jsonl"]]) == (0, 1, str(other.resolve()))
    assert read_twice([[saved], [other], [inside]]) == (0, 2, str(inside.resolve()))
    assert read_twice([[inside], [other], [saved]]) == (0, 2, str(inside.resolve()))
    assert read_twice([[saved, inside]]) is None  # within one source: its own listing, read once


def test_read_twice_knows_a_file_by_its_identity_not_its_spelling(tmp_path):
    """A hard link is the file it links (one inode), and a file reached through a symlinked folder
    lies inside the folder another source reads whole: both are one file read twice."""
    from beam_sft.data.sources import read_twice

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("{}\n", encoding="utf-8")
    b.write_text("{}\n", encoding="utf-8")
    linked = tmp_path / "linked.jsonl"
    os.link(a, linked)
    assert read_twice([[a], [linked]]) == (0, 1, str(linked.resolve()))
    assert read_twice([[a], [b]]) is None  # distinct files: fine

    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "x.arrow").write_bytes(b"")
    alias = tmp_path / "alias"
    alias.symlink_to(saved, target_is_directory=True)
    through = alias / "x.arrow"  # a file of the folder read whole, spelled through a symlinked folder
    assert read_twice([[saved], [through]]) == (0, 1, str((saved / "x.arrow").resolve()))
    assert read_twice([[through], [b], [saved]]) == (0, 2, str((saved / "x.arrow").resolve()))
    assert read_twice([[alias], [b], [saved / "x.arrow"]]) == (0, 2, str((saved / "x.arrow").resolve()))
    assert read_twice([[saved], [b]]) is None


def test_read_twice_places_each_path_once_not_each_pair(tmp_path, monkeypatch):
    """A large listing: every file is placed once and each folder above it stat'ed once (no pairwise stat)."""
    from beam_sft import paths
    from beam_sft.data.sources import read_twice

    folder = tmp_path / "many"
    folder.mkdir()
    files = []
    for i in range(300):
        files.append(folder / f"{i}.jsonl")
        files[-1].write_bytes(b"")
    calls = []
    real_stat = os.stat
    monkeypatch.setattr(paths.os, "stat", lambda p, *a, **k: calls.append(p) or real_stat(p, *a, **k))
    assert read_twice([files[:150], files[150:], [tmp_path / "elsewhere"]]) is None
    assert len(calls) < 2 * len(files)
