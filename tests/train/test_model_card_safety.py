"""The model card stays inert whatever a folder name, a model path or a record holds (newlines, ``#``
headings, ``---``, raw HTML, backticks, pipes, links), and it describes the data the run recorded, not
what the prepared folder holds when the card is written (a re-prepare in between)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import yaml

from beam_sft.train.model_card import card_facts, md_code, md_text, render_card, write_model_card
from tests.train.test_model_card import REPORT, _run

markdown_it = pytest.importorskip("markdown_it")

HOSTILE = [
    "x\n# injected heading", "---", "a\n---\nb: 1", "<img src=x onerror=alert(1)>", "a`b``c", "`", "``",
    "{{conversation}}", "[link](http://127.0.0.1/evil)", "![i](http://127.0.0.1/x.png)", "| a | b |",
    "&amp; &#60;script&#62;", "<script>alert(1)</script>", "\r\n## two\r\n", "*em* _em_ ~~del~~", "\\`", "<!-- c -->",
    "line\u2028sep", "trailing\\",
]
HEADINGS = ["Training", "Data", "Results at the end", "Quick start"]


def _body(card: str) -> tuple[dict, str]:
    match = re.match(r"---\n(.*?)\n---\n", card, re.S)
    assert match, card[:200]
    return yaml.safe_load(match.group(1)), card[match.end():]


def check_inert(card: str, hostile: str) -> dict:
    """The card parses to our structure only: its own headings, no raw HTML, no link or image, no rule,
    one code block (the quick start); returns the front matter. Used by the fuzz tier too."""
    meta, body = _body(card)
    assert set(meta) <= {"library_name", "pipeline_tag", "base_model", "datasets", "tags"}, meta
    parser = markdown_it.MarkdownIt("commonmark").enable("table")
    tokens = parser.parse(body)
    flat = [t for tok in tokens for t in ([tok] + list(tok.children or []))]
    kinds = {t.type for t in flat}
    assert not kinds & {"html_inline", "html_block", "link_open", "image", "hr"}, (kinds, hostile)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings[1:] == HEADINGS, headings
    assert [t.type for t in tokens if t.type in ("fence", "code_block")] == ["fence"]
    return meta


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_text_in_every_field_from_data_stays_inert(tmp_path, hostile):
    run = _run(tmp_path, lora=True, base="openai/gpt-oss-20b")
    facts = card_facts(run)
    facts.update(name=hostile, base_model=hostile, architecture=hostile, launcher=hostile, prepared=hostile,
                 fingerprint=hostile, eval_dir=hostile, eval_mode=hostile, distributed_type=hostile,
                 lora_config={"r": hostile, "alpha": 16, "target_modules": hostile}, report_sha256=hostile)
    facts["sources"][0].update(name=hostile, format=hostile, rejected={hostile: 1})
    facts["eval_loss"] = [(hostile, 1.0)]
    card = render_card(facts, path=hostile)
    meta = check_inert(card, hostile)
    assert meta["base_model"] == hostile  # quoted, whole, as the value it is
    title = markdown_it.MarkdownIt("commonmark").parse(_body(card)[1])[1].content
    one_line = re.sub(r"[\r\n\u2028]+", " ", hostile)
    assert markdown_it.MarkdownIt("commonmark").renderInline(title) == markdown_it.MarkdownIt(
        "commonmark").renderInline(md_text(hostile).strip())
    fence = re.search(r"\npath = (.*)\n", card).group(1)
    assert ast.literal_eval(fence) == hostile  # the quick start loads the folder it names
    # the source name is one code span holding the name (line breaks as spaces)
    spans = [t.content for tok in markdown_it.MarkdownIt("commonmark").enable("table").parse(_body(card)[1])
             for t in (tok.children or []) if t.type == "code_inline"]
    assert one_line.strip() in [s.strip() for s in spans] or not one_line.strip()


def test_md_text_and_md_code_render_back_to_the_text():
    md = markdown_it.MarkdownIt("commonmark")
    for text in HOSTILE:
        one_line = re.sub(r"[\r\n\u2028]+", " ", text)
        rendered = md.renderInline(md_text(text))
        import html

        assert html.unescape(rendered) == one_line, (text, rendered)
        code = md.parseInline(md_code(text, table=False))[0].children
        assert [t.type for t in code] == ["code_inline"], (text, code)
        # CommonMark strips one space each side of a span that has one each side (our padding, or the text's)
        padded = one_line.startswith(" ") and one_line.endswith(" ") and one_line.strip()
        assert code[0].content == (one_line[1:-1] if padded else one_line), text


def test_a_hostile_folder_name_and_model_path_through_write_model_card(tmp_path):
    """A real folder whose name holds a newline, a heading and raw HTML, trained from such a model path."""
    name = "run\n# <img src=x onerror=alert(1)> `x` ---"
    run = _run(tmp_path, base=str(tmp_path / "model\n---\n<b>x</b>"))
    folder = tmp_path / name
    run.rename(folder)
    card = write_model_card(folder).read_text(encoding="utf-8")
    check_inert(card, name)
    rendered = markdown_it.MarkdownIt("commonmark").enable("table").render(_body(card)[1])
    assert "<img" not in rendered and "<b>" not in rendered and rendered.count("<h1>") == 1


# ---------------------------------------------------------------------------- the data the run recorded


def test_the_card_names_the_data_the_run_recorded_not_the_folders_current_report(tmp_path):
    """The run record's prepared_data (taken at the start) is what the card states; a re-prepare of
    the folder since is said, with the report's digest now."""
    import hashlib

    from beam_sft.train.provenance import folder_provenance

    run = _run(tmp_path)
    prepared = tmp_path / "prepared"
    record = json.loads((run / "beam_run.json").read_text(encoding="utf-8"))
    record["prepared_data"] = folder_provenance(prepared)
    (run / "beam_run.json").write_text(json.dumps(record), encoding="utf-8")
    seen = hashlib.sha256((prepared / "report.json").read_bytes()).hexdigest()
    other = {**REPORT, "fingerprint": "0" * 64, "sources": {"other.jsonl": {"format": "openai", "read": 3, "kept": 3,
                                                                            "rejected": {}, "rows_out": 3}},
             "tokens": {"rows": 3, "total": 99, "trained": 33}, "rejects": {"total": 0, "by_code": {}}}
    (prepared / "report.json").write_text(json.dumps(other), encoding="utf-8")  # a re-prepare with other data
    now = hashlib.sha256((prepared / "report.json").read_bytes()).hexdigest()
    for folder, kwargs in ((run, {}), (tmp_path / "merged", {"run_folder": run, "derived": "merged"}),
                           (tmp_path / "exported", {"run_folder": run, "derived": "exported"})):
        folder.mkdir(exist_ok=True)
        card = write_model_card(folder, **kwargs).read_text(encoding="utf-8")
        assert f"SHA-256 `{seen}` when the run read it" in card and "f" * 64 in card
        assert "| rows prepared | 150 |" in card and "| tokens | 45,000 |" in card
        assert "HuggingFaceH4/ultrachat_200k@train_sft" in card and "other.jsonl" not in card
        assert f"holds other data since this run read it (its `report.json` has SHA-256 `{now}` now)" in card
    # unchanged folder: no such line
    (prepared / "report.json").write_text(json.dumps(REPORT), encoding="utf-8")
    assert "holds other data" not in write_model_card(run).read_text(encoding="utf-8")


def test_a_record_with_digests_only_states_no_counts_once_the_folder_changed(tmp_path):
    run = _run(tmp_path)
    record = json.loads((run / "beam_run.json").read_text(encoding="utf-8"))
    record["prepared_data"] = {"path": str(tmp_path / "prepared"), "report_sha256": "a" * 64, "fingerprint": "b" * 64}
    (run / "beam_run.json").write_text(json.dumps(record), encoding="utf-8")
    card = write_model_card(run).read_text(encoding="utf-8")
    assert "recorded the data's digests only, so no counts are stated" in card
    assert "| rows prepared | - |" in card and "ultrachat" not in card.split("## Data")[1].split("## Results")[0]


@pytest.mark.slow
def test_train_then_reprepare_then_merge_the_card_names_the_original_data(fixture_dir, tmp_path):
    """A real run: train (LoRA, 2 steps) on a folder prepared from 16 rows, prepare that folder again
    from 24 other rows, merge: the merged card states the 16 rows and the first report's digest."""
    import hashlib

    from beam_sft.config_utils import from_dict
    from beam_sft.prepare import PrepareConfig, prepare
    from beam_sft.train.merge import merge_adapter
    from beam_sft.train.recipe import recipe_from_dict
    from beam_sft.train.trainer import train
    from tests.train.conftest import recipe_dict, train_rows

    def prepared_from(rows):
        source = tmp_path / "rows.jsonl"
        source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        config = from_dict(PrepareConfig, {"sources": [{"path": str(source), "format": "openai"}], "num_proc": 1,
                                           "tokenizer": str(fixture_dir), "output": str(tmp_path / "prepared"),
                                           "max_length": 512})
        return Path(prepare(config))

    prepared = prepared_from(train_rows(16))
    first = hashlib.sha256((prepared / "report.json").read_bytes()).hexdigest()
    out = train(recipe_from_dict(recipe_dict(fixture_dir, prepared, tmp_path / "run", sft={"max_steps": 2},
                                             lora={"r": 4, "alpha": 8, "dropout": 0.0})))
    prepared_from(train_rows(24, seed=1))
    merged = merge_adapter(out, tmp_path / "merged", base=str(fixture_dir))
    card = (merged / "README.md").read_text(encoding="utf-8")
    data = card.split("## Data")[1].split("## Results")[0]
    assert f"SHA-256 `{first}` when the run read it" in data and "holds other data since this run read it" in data
    rows = int(re.search(r"\| rows prepared \| ([\d,]+) \|", data).group(1).replace(",", ""))
    assert rows == json.loads((out / "beam_run.json").read_text())["prepared_data"]["summary"]["rows"] <= 16
