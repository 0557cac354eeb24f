"""rejects.jsonl records and the per-source summary table."""

from __future__ import annotations

import json
from collections import Counter

from beam_sft.convert import Rejection
from beam_sft.data.rejects import RejectsWriter, SourceSummary, format_summary_table


def test_summary_counts_every_row_once():
    s = SourceSummary("a.jsonl", "openai")
    for code in ("missing_reasoning", "invalid_json", "missing_reasoning"):
        s.count_rejected(code)
    s.count_kept()
    assert (s.read, s.kept, s.n_rejected, s.reject_rate) == (4, 1, 3, 0.75)
    assert s.to_json()["by_code"] == {"invalid_json": 1, "missing_reasoning": 2}
    assert SourceSummary("empty", "openai").reject_rate == 0.0


def test_table_lists_sources_then_the_total_with_reasons_by_count():
    a = SourceSummary(
        "a.jsonl", "openai", read=5, kept=2, rejected=Counter(missing_reasoning=2, invalid_json=1)
    )
    b = SourceSummary("dir/b.json", "sharegpt", read=1, kept=0, rejected=Counter(invalid_json=1))
    lines = format_summary_table([a, b]).splitlines()
    assert lines[1].split() == ["a.jsonl", "openai", "5", "2", "3", "missing_reasoning=2", "invalid_json=1"]
    assert lines[3].split() == ["TOTAL", "6", "2", "4", "invalid_json=2", "missing_reasoning=2"]
    assert len({line.index("read") if "read" in line else None for line in lines[:1]}) == 1


def test_writer_writes_one_json_line_per_rejection(tmp_path):
    path = tmp_path / "sub" / "rejects.jsonl"
    raw = {"messages": [{"role": "user", "content": "é <|end|>"}]}
    with RejectsWriter(path) as out:
        out.write(
            Rejection("harmony_marker_in_text", "messages[0].content contains <|end|>").at(
                source="s", row=3, raw=raw
            )
        )
        out.write(Rejection("invalid_json", "bad").at(source="s", row=4, raw="{oops"))
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert records[0] == {
        "source": "s",
        "row": 3,
        "code": "harmony_marker_in_text",
        "message": "messages[0].content contains <|end|>",
        "raw": raw,
    }
    assert records[1]["raw"] == "{oops" and out.count == 2
    assert "é" in path.read_text(encoding="utf-8")  # not escaped


def test_writer_without_a_path_only_counts():
    with RejectsWriter(None) as out:
        out.write(Rejection("invalid_json", "x"))
    assert out.count == 1


def test_a_record_with_invalid_unicode_is_written_as_exact_escaped_json(tmp_path):
    """One writer of a rejects line (dataset_folder.rejects) for convert and prepare: both surrogate-safe."""
    from beam_sft.dataset_folder.rejects import reject_json, reject_line

    for line in (reject_json({"code": "invalid_json", "raw": "x\udcffy"}),
                 reject_line("a.jsonl", 1, "invalid_json", "m", "x\udcffy")):
        assert json.loads(line)["raw"] == "x\udcffy"
        line.encode("utf-8")  # writable
    with RejectsWriter(tmp_path / "r.jsonl") as out:
        out.write(Rejection("invalid_json", "x", raw="x\udcffy"))
    assert json.loads((tmp_path / "r.jsonl").read_text(encoding="utf-8"))["raw"] == "x\udcffy"


def test_summary_remarks_empty_and_unreadable_sources():
    empty = SourceSummary("e.jsonl", "openai")
    cut = SourceSummary("c.json", "openai")
    cut.count_kept()
    cut.count_rejected("unreadable_rest")
    cut.unreadable = (1234, 99)
    table = format_summary_table([empty, cut])
    assert "e.jsonl: the source is empty" in table
    assert "c.json: unreadable from byte 1234 (about 99 more records)" in table
    assert round(cut.reject_rate, 2) == 0.99


def test_the_table_shows_a_hostile_file_name_on_its_own_line():
    """A source is named by its file, and anyone names files: an ESC, a bidi override, a zero-width
    space or a newline in one is shown as an escape, and every source keeps one line of the table."""
    evil = "d/ev\x1b[2Jil\u202e\u200b\nTOTAL  9.jsonl"
    a = SourceSummary(evil, "openai", read=2, kept=1, rejected=Counter(invalid_json=1))
    a.unreadable = (7, 1)
    a.causes = Counter({"cause\x1b]0;x\x07": 1})
    empty = SourceSummary("e\x9b2J.jsonl", "openai")
    table = format_summary_table([a, empty])
    assert not any(c in table for c in "\x1b\x07\x9b\u202e\u200b")
    lines = table.splitlines()
    assert lines[1].split()[0] == "d/ev\\x1b[2Jil\\u202e\\u200b\\nTOTAL" and lines[2].startswith("e\\x9b2J.jsonl ")
    assert lines[3].startswith("TOTAL ") and len(lines) == 7  # header, 2 sources, total, 3 remarks
    assert all(line.startswith(("d/ev\\x1b", "e\\x9b")) for line in lines[4:])


def test_a_rejects_line_shows_what_would_act_in_a_terminal_as_json_escapes(tmp_path):
    """People read rejects.jsonl with cat and grep: a row's C1 CSI, bidi override, zero-width space or DEL
    is written as a JSON escape (JSON itself escapes only C0), and the line still reads back as the row."""
    raw = {"messages": [{"role": "user", "content": "a\x9b2J b\u202eexe c<|en\u200bd|> d\x7f \U000e0041 é 😀"}]}
    with RejectsWriter(tmp_path / "r.jsonl") as out:
        out.write(Rejection("invalid_json", "bad \u202e", raw=raw, source="s\u2066.jsonl", row=1))
    text = (tmp_path / "r.jsonl").read_text(encoding="utf-8")
    assert not any(c in text for c in "\x9b\u202e\u200b\x7f\u2066\U000e0041") and "é 😀" in text
    assert json.loads(text)["raw"] == raw
