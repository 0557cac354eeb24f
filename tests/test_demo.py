"""``make demo`` teaches the model Beam Harmony, measured on held-out prompts.

The slow tests run the demo once (beam_sft.demo.run: fixture, rows, prepare, 2-process training,
generation) and assert what the README states: format health >= 0.75 on held-out prompts whose
rows, and whose first questions, are not in the training set; every task metric measured with its
counts; eval loss falling to the end; a model card whose figures are the run's; its quick start
running as written. The content target (argument_exact_match >= 0.6 and distinct_ratio >= 0.8 on
tool turns) is asserted too: the model copies the prompts' values into its calls after the copy's
phase change (about 600 steps of 16 rows, README: What it takes). The default-tier tests
check the generator: every copied value one token, in the prompt as in the call; held-out values
seen in training, held-out questions never.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

HEALTH_TARGET = 0.75  # the README's figures
ARGUMENTS_TARGET = 0.6  # argument_exact_match on held-out tool turns: the calls copy the prompt's values
DISTINCT_TARGET = 0.8  # distinct_ratio on held-out tool turns: not one answer to every prompt
PROMPTS = 32  # recipes/demo.yaml format_health.prompts: half with tools


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


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory) -> Path:
    """One run of the demo itself for the tests below (it is what takes the minutes)."""
    from beam_sft.demo import DemoSettings, run

    out = tmp_path_factory.mktemp("demo") / "demo"
    assert run(out, DemoSettings()) == 0
    return out


def _final_health(out: Path) -> dict:
    return [json.loads(line) for line in (out / "model" / "format_health.jsonl").read_text().splitlines()][-1]


@pytest.mark.slow
def test_the_demo_learns_beam_harmony_on_held_out_prompts(demo_out):
    from beam_sft.train.model_card import card_facts

    out = demo_out
    model = out / "model"

    # Held out: no held-out row is a training row, and none asks a question a training row asked first.
    held, trained = _first_questions(out / "heldout"), _first_questions(out / "prepared")
    assert held and not held & trained

    health = [json.loads(line) for line in (model / "format_health.jsonl").read_text().splitlines()]
    final = health[-1]
    assert final["format_health"] >= HEALTH_TARGET, [o["problem"] for o in final["outputs"]]
    assert final["format_health_tools"] >= HEALTH_TARGET and final["format_health_plain"] >= HEALTH_TARGET
    assert len(final["outputs"]) == PROMPTS and sum(o["tools"] for o in final["outputs"]) == PROMPTS // 2
    # Every task metric measured, with its counts, on the held-out turns of both kinds.
    counts = final["counts"]
    assert counts["argument_exact_match_tool"]["denominator"] == PROMPTS // 2
    assert counts["answer_exact_match_plain"]["denominator"] == PROMPTS // 2
    from beam_sft.evaluate.metrics import METRICS

    assert all(name in final for name in METRICS)
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
    assert f"| format health (step {final['step']}) | {final['format_health']:.3f} of {PROMPTS}" in card
    c = counts["argument_exact_match_tool"]
    assert "| argument_exact_match | " in card and f"{c['value']:.3f} ({c['numerator']:g}/{c['denominator']})" in card
    assert f"Task metrics at step {final['step']}" in card and "Task metrics by step" in card
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


def test_every_copied_value_is_one_token_written_in_the_prompt_as_the_call_writes_it():
    """What makes the content learnable by a tiny model: each value a call copies (city, word, the add
    numbers) is one token of the demo's tokenizer, and that token is in the prompt, so the call is a
    copy of one prompt token, not a mapping to learn per value."""
    from beam_sft.data.demo_rows import TOOLS, copied_values, demo_rows
    from beam_sft.demo import DemoSettings, fixture_options
    from beam_sft.harmony.fixture import build_tokenizer

    tokenizer = build_tokenizer(fixture_options(DemoSettings()))
    assert all(len(tokenizer(v, add_special_tokens=False).input_ids) == 1 for v in copied_values())
    copied = set(copied_values())
    checked = 0
    for row in demo_rows(60):
        for i, message in enumerate(row["messages"]):
            for call in message.get("tool_calls") or []:
                prompt = tokenizer.apply_chat_template(row["messages"][:i], tools=TOOLS, tokenize=False,
                                                       add_generation_prompt=True)
                prompt_ids = tokenizer(prompt, add_special_tokens=False).input_ids
                for value in call["function"]["arguments"].values():
                    if str(value) in copied:
                        assert tokenizer.convert_tokens_to_ids(tokenizer.tokenize(str(value)))[0] in prompt_ids
                        checked += 1
    assert checked >= 40


def test_held_out_values_are_seen_in_training_but_never_the_same_question():
    """Copying is learnable (every held-out city, word and number occurs in training rows) and held out
    (no held-out first question is a training one)."""
    from beam_sft.data.demo_rows import demo_split, first_prompt

    train, held = demo_split(1200, 64)
    seen = {str(v) for r in train for m in r["messages"] for c in m.get("tool_calls") or []
            for v in c["function"]["arguments"].values()}
    held_values = {str(v) for r in held for m in r["messages"] for c in m.get("tool_calls") or []
                   for v in c["function"]["arguments"].values()}
    assert held_values and held_values <= seen
    assert not {first_prompt(r) for r in train} & {first_prompt(r) for r in held}


@pytest.mark.slow
def test_the_demo_learns_the_content_of_tool_calls(demo_out):
    """The content target: the calls copy the held-out prompts' own values, and differ from prompt to prompt."""
    final = _final_health(demo_out)
    assert final["argument_exact_match_tool"] >= ARGUMENTS_TARGET, [o["generated"] for o in final["outputs"]]
    assert final["distinct_ratio_tool"] >= DISTINCT_TARGET, [o["generated"] for o in final["outputs"]]


def test_training_runs_with_the_allocator_settings_unless_the_user_set_them(tmp_path, monkeypatch):
    from beam_sft import demo

    seen = []
    monkeypatch.setattr(demo.subprocess, "call", lambda command, **kw: seen.append(kw["env"]) or 0)
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "7")
    assert demo.run_training(["true"], tmp_path / "train.log") == 0
    (env,) = seen
    assert env["MALLOC_MMAP_THRESHOLD_"] == demo.TRAINING_MALLOC["MALLOC_MMAP_THRESHOLD_"] == str(128 << 20)
    assert env["MALLOC_TRIM_THRESHOLD_"] == "7"  # the user's own value
