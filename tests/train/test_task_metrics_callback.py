"""The training callback's task metrics: every metric of the scorer logged and written, and the warning
when the model answers every prompt alike while the format is good (the demo's old collapse)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from beam_sft.evaluate.metrics import KINDS, METRICS
from beam_sft.train.format_health import (
    COLLAPSE_DISTINCT,
    FormatHealthCallback,
    Prompt,
    collapse_warning,
    prompt_of,
    read_health,
    summarize,
)
from beam_sft.train.run_log import MetricsLogCallback, read_metrics

ADD = {"type": "function", "function": {
    "name": "add", "description": "Add two integers.",
    "parameters": {"type": "object", "required": ["a", "b"],
                   "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}


def call_text(a: int, b: int) -> str:
    return ("<|channel|>analysis<|message|>I call add.<|end|>"
            "<|start|>assistant to=add<|channel|>analysis <|constrain|>xml<|message|>"
            f'<rfl:parameter name="a">\n{a}\n</rfl:parameter>\n'
            f'<rfl:parameter name="b">\n{b}\n</rfl:parameter><|call|>')


def answer_text(answer: str) -> str:
    return f"<|channel|>analysis<|message|>I answer.<|end|><|start|>assistant<|channel|>final<|message|>{answer}<|return|>"


def tool_prompt(i: int) -> Prompt:
    reference = {"role": "assistant", "reasoning_content": "I call add.", "tool_calls": [
        {"type": "function", "function": {"name": "add", "arguments": {"a": 10 + i, "b": 20 + i}}}]}
    return Prompt([{"role": "user", "content": f"add {10 + i} and {20 + i}"}], [ADD], source=f"eval:{i}",
                  reference=reference)


def plain_prompt(i: int) -> Prompt:
    return Prompt([{"role": "user", "content": f"say {i}"}], None, source=f"eval:p{i}",
                  reference={"role": "assistant", "reasoning_content": "r", "content": f"It is {i}."})


PROMPTS = [tool_prompt(i) for i in range(8)] + [plain_prompt(i) for i in range(4)]
VARIED = [call_text(10 + i, 20 + i) for i in range(8)] + [answer_text(f"It is {i}.") for i in range(4)]
# The collapse the demo once showed: every call the same numbers, every answer the same text; all valid.
COLLAPSED = [call_text(73, 33)] * 8 + [answer_text("It is 6.")] * 4


class FakeTrainer:
    def __init__(self, output_dir):
        self.args = SimpleNamespace(output_dir=str(output_dir))
        self.accelerator = SimpleNamespace(num_processes=1)
        self.logged: list[dict] = []

    def log(self, logs):
        self.logged.append(dict(logs))


def run_callback(tmp_path, texts, caplog) -> FakeTrainer:
    trainer = FakeTrainer(tmp_path)
    callback = FormatHealthCallback(trainer, PROMPTS, every=1, generate=lambda model, ps: list(texts))
    state = SimpleNamespace(global_step=1, max_steps=1, is_world_process_zero=True)
    with caplog.at_level(logging.INFO, logger="beam_sft.train"):
        callback.on_step_end(None, state, None, model=object())
    return trainer


def test_prompt_of_keeps_the_reference_turn():
    row = {"messages": [{"role": "user", "content": "Hi"},
                        {"role": "assistant", "reasoning_content": "r", "content": "Yo"}]}
    assert prompt_of(row).reference == {"role": "assistant", "reasoning_content": "r", "content": "Yo"}


def test_a_row_opening_with_a_trained_turn_gives_its_next_turn_as_the_prompt():
    row = {"messages": [{"role": "assistant", "reasoning_content": "g", "content": "Hello!"},
                        {"role": "user", "content": "Hi"},
                        {"role": "assistant", "reasoning_content": "r", "content": "Yo"}]}
    prompt = prompt_of(row)
    assert prompt is not None and prompt.reference["content"] == "Yo" and len(prompt.messages) == 2


def test_varied_generations_score_right_and_raise_no_warning(tmp_path, caplog):
    trainer = run_callback(tmp_path, VARIED, caplog)
    logged = trainer.logged[0]
    assert logged["format_health"] == 1.0 and logged["format_valid"] == 1.0
    assert logged["argument_exact_match_tool"] == 1.0 and logged["distinct_ratio_tool"] == 1.0
    assert logged["answer_exact_match_plain"] == 1.0 and logged["stop_accuracy"] == 1.0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("task metrics at step 1" in r.getMessage() for r in caplog.records)


def test_a_collapsed_set_warns_that_the_model_answers_every_prompt_alike(tmp_path, caplog):
    trainer = run_callback(tmp_path, COLLAPSED, caplog)
    logged = trainer.logged[0]
    assert logged["format_health"] == 1.0  # the format alone says all is well
    assert logged["distinct_ratio_tool"] == 1 / 8 and logged["argument_exact_match_tool"] == 0.0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "the model answers every prompt alike" in warnings[0]
    assert "distinct_ratio" in warnings[0] and "format health is 1.00" in warnings[0]
    record = read_health(tmp_path)[0]
    assert record["counts"]["distinct_ratio_tool"] == {"numerator": 1, "denominator": 8, "value": 0.125}
    assert [o["arguments"] for o in record["outputs"][:8]] == [False] * 8


def test_the_warning_needs_a_good_format_and_a_collapse():
    collapsed = summarize(3, PROMPTS, COLLAPSED)
    assert collapse_warning(collapsed) is not None
    assert collapse_warning(summarize(3, PROMPTS, VARIED)) is None
    # A broken format is its own signal: the same collapse with most turns invalid does not warn.
    broken = summarize(3, PROMPTS, [t.replace("<|call|>", "") for t in COLLAPSED[:8]] + COLLAPSED[8:])
    assert broken.fraction < 0.75 and collapse_warning(broken) is None
    # Exactly half distinct is not under the threshold.
    half = [call_text(1, 1), call_text(2, 2)] * 4 + VARIED[8:]
    assert summarize(3, PROMPTS, half).task["distinct_ratio_tool"] == 0.25
    assert COLLAPSE_DISTINCT == 0.5
    four = summarize(3, PROMPTS[:4], [call_text(1, 1), call_text(1, 1), call_text(2, 2), call_text(3, 3)])
    assert four.task["distinct_ratio"] == 0.75 and collapse_warning(four) is None


def test_metrics_jsonl_holds_every_metric_of_the_scorer(tmp_path, caplog):
    trainer = run_callback(tmp_path, VARIED, caplog)
    log = MetricsLogCallback(tmp_path)
    state = SimpleNamespace(global_step=1, is_world_process_zero=True)
    for logs in trainer.logged:
        log.on_log(None, state, None, logs=logs)
    record = read_metrics(tmp_path)[-1]
    for name in METRICS:
        assert name in record, name
    # Per kind: every metric that counts a turn of that kind (answers are not counted on tool turns).
    for kind in KINDS:
        counted = [n for n in METRICS if read_health(tmp_path)[0]["counts"][f"{n}_{kind}"]["denominator"]]
        assert counted and all(f"{n}_{kind}" in record for n in counted), kind
    assert "answer_exact_match_tool" not in record  # 0/0: left out, never a made-up 0
