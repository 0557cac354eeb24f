"""The model card's task metrics: the last measurement with its counts (overall and by kind) and the curve,
one row per measured step, every figure read from the run's format_health.jsonl."""

from __future__ import annotations

import json

from beam_sft.evaluate.metrics import KINDS, METRICS
from beam_sft.train.model_card import card_facts, task_metric_tables, write_model_card
from tests.train.test_model_card import _run


def _counts(step: int) -> dict:
    """Hand-made counts in the shape summarize() writes: 8 tool turns, 4 plain turns."""
    out = {}
    for name in METRICS:
        for suffix, n in (("", 12), ("_tool", 8), ("_plain", 4)):
            if name.startswith("answer") and suffix == "_tool":
                out[name + suffix] = {"numerator": 0, "denominator": 0, "value": None}
                continue
            right = min(n, step // 10 + len(suffix))
            out[name + suffix] = {"numerator": right, "denominator": n, "value": right / n}
    return out


def test_the_card_shows_every_task_metric_and_its_curve(tmp_path):
    run = _run(tmp_path)
    (run / "format_health.jsonl").write_text("".join(json.dumps(
        {"step": s, "format_health": v, "counts": _counts(s), "outputs": [{}] * 12}) + "\n"
        for s, v in ((10, 0.25), (20, 0.5), (30, 0.875))), encoding="utf-8")
    card = write_model_card(run).read_text(encoding="utf-8")
    facts = card_facts(run)
    assert [s for s, _ in facts["task_metrics"]] == [10, 20, 30]
    results = card.split("## Results at the end")[1].split("## Quick start")[0]
    assert "Task metrics at step 30" in results
    last = _counts(30)
    for name in METRICS:  # the last step's figures, with counts, overall and by kind
        cells = [last[name], *(last[f"{name}_{k}"] for k in KINDS)]
        shown = [f"{c['value']:.3f} ({c['numerator']:g}/{c['denominator']})" if c["denominator"] else "-"
                 for c in cells]
        assert f"| {name} | " + " | ".join(shown) + " |" in results, name
    curve = [line for line in results.splitlines() if line.startswith(("| 10 |", "| 20 |", "| 30 |"))]
    assert len(curve) == 3 and all(line.count("|") == len(METRICS) + 2 for line in curve)
    first = _counts(10)
    assert curve[0].split(" | ")[1] == (f"{first['format_valid']['value']:.2f} ("
                                        f"{first['format_valid_tool']['value']:.2f} / "
                                        f"{first['format_valid_plain']['value']:.2f})")
    assert "(- / " not in curve[0].split(" | ")[1] and "| - (" not in curve[0]


def test_a_run_without_task_metrics_keeps_the_card_as_it_was(tmp_path):
    run = _run(tmp_path)  # format_health.jsonl without counts: an older run, or prompts without references
    card = write_model_card(run).read_text(encoding="utf-8")
    assert card_facts(run)["task_metrics"] == [] and "Task metrics" not in card
    assert task_metric_tables([]) == []
