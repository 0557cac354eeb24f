"""Fuzz tier: hostile strings (HTML, script and event attributes, markdown headings, ``---``, backticks,
newlines, ``{{...}}`` placeholders, links) in every place data reaches a page we write: folder names,
source names, model paths, row text, reject messages, verify findings. The report page and the inspect
page must stay inert HTML (only our tags and attributes, no event handler, the one policy first); the
model card inert Markdown (only our headings, no raw HTML, link, image or rule)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.fuzz

FRAGMENTS = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "</pre>", "</title>", "</style>", "<!--",
             "-->", "<svg onload=alert(1)>", "\"'><b>", "' onmouseover='x", "&lt;", "&#x3C;", "# heading",
             "\n## h2\n", "---", "\n---\n", "`", "```", "{{conversation}}", "{{turn}}", "{% raw %}", "\r\n",
             "\u2028", "javascript:alert(1)", "<style>body{}</style>", "<meta http-equiv=refresh content=0>",
             "[x](http://127.0.0.1/)", "![i](http://127.0.0.1/i.png)", "|", "\\", "<base href=http://127.0.0.1/>"]
hostile = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), min_size=1, max_size=5).map("".join)
# a folder name: no slash, no NUL, not empty
folder_name = hostile.map(lambda s: s.replace("/", "_").replace("\x00", "_") or "x").filter(lambda s: s not in (".", ".."))


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, tuple[str, ...]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, tuple(name for name, _ in attrs)))

    handle_startendtag = handle_starttag


def structure(page: str) -> tuple[set[str], set[str]]:
    parser = _Tags()
    parser.feed(page)
    parser.close()
    return {t for t, _ in parser.tags}, {a for _, attrs in parser.tags for a in attrs}


def assert_inert_html(page: str, baseline: str) -> None:
    """Only the tags and attributes a benign page of ours has; no event handler; the one policy,
    before any text that comes from data."""
    from beam_sft.verify.page_head import CONTENT_SECURITY_POLICY

    tags, attrs = structure(page)
    base_tags, base_attrs = structure(baseline)
    assert tags <= base_tags, tags - base_tags
    assert attrs <= base_attrs, attrs - base_attrs
    assert not {a for a in attrs if a.startswith("on")}
    assert page.count("http-equiv=\"Content-Security-Policy\"") == 1
    assert page.index("Content-Security-Policy") < page.index("<title>")
    assert CONTENT_SECURITY_POLICY.replace("'", "&#x27;") in page
    assert "<script" not in page.lower() and "<img" not in page.lower() and "<base" not in page.lower()


# ---------------------------------------------------------------------------- the report page


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, fixture_dir) -> Path:
    from beam_sft.config_utils import from_dict
    from beam_sft.prepare import PrepareConfig, prepare

    tmp = tmp_path_factory.mktemp("fuzz_pages")
    rows = [{"messages": [{"role": "user", "content": f"q{i} {FRAGMENTS[i % len(FRAGMENTS)]}"},
                          {"role": "assistant", "reasoning_content": FRAGMENTS[(i + 3) % len(FRAGMENTS)],
                           "content": FRAGMENTS[(i + 7) % len(FRAGMENTS)]}]} for i in range(6)]
    rows.append({"messages": [{"role": "user", "content": "<b>x</b>"}, {"role": "assistant", "content": "no reasoning"}]})
    source = tmp / "src <b> # --- `x`.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    config = from_dict(PrepareConfig, {"sources": [{"path": str(source), "format": "openai"}], "num_proc": 1,
                                       "tokenizer": str(fixture_dir), "output": str(tmp / "prepared")})
    return Path(prepare(config))


def _hostile_copy(prepared: Path, where: Path, text: str) -> Path:
    """A copy of the folder whose report (sealed again) and rejects name sources, formats, codes,
    rules and the encoder with ``text``."""
    from beam_sft.dataset_folder.report_json import seal

    folder = where / "copy"
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(prepared, folder)
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    entry = next(iter(report["sources"].values()))
    report["sources"] = {text: {**entry, "format": text, "rejected": {text: 1}}}
    report["tokens"]["by_source"] = {text: {"tokens": 5, "trained": 2}}
    report["rejects"]["by_code"] = {text: 1}
    report["encoder"] = {"name": text}
    report["fingerprint"] = text
    report.setdefault("verify", {})["violations"] = {"total": 1, "rows": 1, "by_rule": {text: 1}}
    report["verify"]["coverage"] = {"every_row": [text]}
    report["verify"]["parser"] = text
    report["verify"]["trained_by_channel"] = {text: {"tokens": 3, "fraction_of_trained": 0.5}}
    (folder / "report.json").write_text(json.dumps(seal(report)), encoding="utf-8")
    (folder / "rejects.jsonl").write_text(json.dumps({"source": text, "row": text, "code": text, "message": text,
                                                      "raw": {"x": text}}) + "\n", encoding="utf-8")
    (folder / "verify_violations.jsonl").write_text(json.dumps({"rule": text, "row": 0, "message": text}) + "\n",
                                                    encoding="utf-8")
    return folder


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=hostile, name=folder_name)
def test_the_report_page_stays_inert(prepared, tmp_path, text, name):
    from beam_sft.verify.report_html import render_report_page

    baseline = render_report_page(_hostile_copy(prepared, tmp_path, "plain"), sample_rows=2, shown_as=Path("/x/plain"))
    page = render_report_page(_hostile_copy(prepared, tmp_path, text), sample_rows=2, shown_as=Path("/x") / name)
    assert_inert_html(page, baseline)


# ---------------------------------------------------------------------------- the inspect page


@pytest.fixture(scope="module")
def one_row(prepared):
    from beam_sft.verify.api import load_row, row_view

    ctx, env = load_row(prepared, 0)
    texts, raw = row_view(ctx, env)
    return ctx, texts, raw


@settings(max_examples=40, deadline=None)
@given(text=hostile, tokens=st.lists(hostile, min_size=1, max_size=4))
def test_the_inspect_page_stays_inert(one_row, text, tokens):
    from beam_sft.verify.context import Violation
    from beam_sft.verify.view_html import render_html

    ctx, texts, raw = one_row
    baseline = render_html(ctx, texts, raw, [Violation("rule", 0, "s", 0, "message")])
    n = len(texts)
    hostile_texts = [tokens[i % len(tokens)] for i in range(n)]
    row = {"messages": [{"role": "user", "content": text}], "meta": {text: text}}
    hostile_ctx = dataclasses.replace(ctx, source=text, row=row)
    page = render_html(hostile_ctx, hostile_texts, hostile_texts, [Violation(text, 0, text, 0, text)])
    assert_inert_html(page, baseline)


# ---------------------------------------------------------------------------- the model card


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=hostile, name=folder_name)
def test_the_model_card_stays_inert(tmp_path_factory, text, name):
    pytest.importorskip("markdown_it")
    from beam_sft.train.model_card import card_facts, render_card
    from tests.train.test_model_card import _run
    from tests.train.test_model_card_safety import check_inert

    run = _run(tmp_path_factory.mktemp("card"), lora=True, base="org/model")
    facts = card_facts(run)
    facts.update(name=name, base_model=text, prepared=text, fingerprint=text, launcher=text, architecture=text,
                 eval_dir=text, eval_mode=text, lora_config={"r": 8, "alpha": 16, "target_modules": text})
    facts["sources"][0].update(name=text, format=text, rejected={text: 2})
    meta = check_inert(render_card(facts, path=text), text)
    assert meta["base_model"] == text
