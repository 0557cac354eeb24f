"""``make demo`` teaches the model Beam Harmony (issue 25), measured on held-out prompts.

The slow test runs the demo itself (beam_sft.demo.run: fixture, rows, prepare, 2-process training,
generation) and asserts what the README states: format health >= 0.75 on held-out prompts whose
rows, and whose first questions, are not in the training set; eval loss falling to the end; a model
card whose figures are the run's; its quick start running as written. The default-tier tests check
the generator.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

HEALTH_TARGET = 0.75  # the README's figure


def test_demo_rows_cover_every_kind_tool_and_effort_and_are_seeded():
    from beam_sft.data.demo_rows import KINDS, TOOLS, demo_rows, demo_split, first_prompt
    from beam_sft.train.format_health import schema_problems

    rows = list(demo_rows(200, seed=3))
    assert rows == list(demo_rows(200, seed=3)) and rows != list(demo_rows(200, seed=4))
    assert {r["meta"]["kind"] for r in rows} == set(KINDS)
    assert {(r.get("chat_template_kwargs") or {}).get("reasoning_effort") for r in rows} >= {"low", "medium", "high"}
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    called = set()
    for row in rows:
        for message in row["messages"]:
            if message["role"] == "assistant":
                assert message["reasoning_content"]  # reasoning on every assistant turn
            for call in message.get("tool_calls") or []:
                called.add(call["function"]["name"])
                assert schema_problems(call["function"]["arguments"], schemas[call["function"]["name"]]) == []
    assert called == set(schemas)
    assert any(sum(m["role"] == "user" for m in r["messages"]) > 1 for r in rows)  # multi-turn
    train, held = demo_split(300, 40)
    assert len(held) == 40 and not {first_prompt(r) for r in train} & {first_prompt(r) for r in held}


def test_demo_rows_prepare_without_a_rejection(tmp_path, fixture_dir):
    from beam_sft.config_utils import from_dict
    from beam_sft.data.demo_rows import demo_rows
    from beam_sft.prepare import PrepareConfig, prepare

    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in demo_rows(40)), encoding="utf-8")
    config = from_dict(PrepareConfig, {"sources": [{"path": str(source), "format": "openai"}],
                                       "tokenizer": str(fixture_dir), "output": str(tmp_path / "out")})
    report = json.loads((Path(prepare(config)) / "report.json").read_text(encoding="utf-8"))
    assert report["rejects"]["total"] == 0 and report["tokens"]["rows"] == 40 and report["verify"]["ok"]


def _first_questions(folder: Path) -> set[str]:
    from datasets import load_from_disk

    out = set()
    for text in load_from_disk(str(folder)).select_columns(["row"])["row"]:
        row = json.loads(text)
        out.add(next(m["content"] for m in row["messages"] if m["role"] == "user"))
    return out


@pytest.mark.slow
def test_the_demo_learns_beam_harmony_on_held_out_prompts(tmp_path):
    from beam_sft.demo import DemoSettings, run
    from beam_sft.train.model_card import card_facts

    out = tmp_path / "demo"
    assert run(out, DemoSettings()) == 0
    model = out / "model"

    # Held out: no held-out row is a training row, and none asks a question a training row asked first.
    held, trained = _first_questions(out / "heldout"), _first_questions(out / "prepared")
    assert held and not held & trained

    health = [json.loads(line) for line in (model / "format_health.jsonl").read_text().splitlines()]
    final = health[-1]
    assert final["format_health"] >= HEALTH_TARGET, [o["problem"] for o in final["outputs"]]
    assert final["format_health_tools"] >= HEALTH_TARGET and final["format_health_plain"] >= HEALTH_TARGET
    assert len(final["outputs"]) == 16 and sum(o["tools"] for o in final["outputs"]) == 8
    evals = [json.loads(line)["eval_loss"] for line in (model / "metrics.jsonl").read_text().splitlines()
             if "eval_loss" in line]
    assert len(evals) >= 3 and all(b < a for a, b in zip(evals, evals[1:], strict=False))  # falling to the end

    # The card: its figures are the run's, and its quick start runs as written.
    card = (model / "README.md").read_text(encoding="utf-8")
    record = json.loads((model / "beam_run.json").read_text(encoding="utf-8"))
    report = json.loads((out / "prepared" / "report.json").read_text(encoding="utf-8"))
    facts = card_facts(model)
    assert facts["world_size"] == record["distributed"]["num_processes"] == 2
    assert facts["launcher"] == record["launcher"] == "accelerate launch"
    assert facts["rejected_by_code"] == report["rejects"]["by_code"] and facts["rejected_by_code"]
    assert f"| eval loss (step {record['global_step']}) | {evals[-1]:.4f} |" in card
    assert f"| format health (step {final['step']}) | {final['format_health']:.3f} of 16" in card
    assert f"| tokens | {report['tokens']['total']:,} |" in card
    assert "huggingface.co/None" not in card and "fine-tuned version of" not in card
    code = re.search(r"```python\n(.*?)```", card, re.S).group(1)
    scope: dict = {}
    exec(compile(code, "quick start", "exec"), scope)  # noqa: S102 (the card's own code, as a reader runs it)
    assert scope["message"]["role"] == "assistant" and "thinking" in scope["message"]

    generations = json.loads((out / "generations.json").read_text(encoding="utf-8"))
    assert any(g["tools"] for g in generations) and any(not g["tools"] for g in generations)
    assert all("error" not in g["parsed"] for g in generations)
    assert (out / "prepared" / "report.html").is_file()
