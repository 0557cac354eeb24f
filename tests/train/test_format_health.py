"""Format health: the scorer on hand-written outputs, the schema check, prompt choice, the callback."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from beam_sft.train.format_health import (
    FormatHealthCallback,
    Prompt,
    prompt_of,
    read_health,
    schema_problems,
    score_turn,
    select_prompts,
    summarize,
)

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city.",
    "parameters": {"type": "object", "required": ["city"],
                   "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                  "unit": {"type": "string", "enum": ["C", "F"]}}}}}

VALID_ANSWER = ("<|channel|>analysis<|message|>The user greets me.<|end|>"
                "<|start|>assistant<|channel|>final<|message|>Hello!<|return|>")
VALID_CALL = ("<|channel|>analysis<|message|>Look it up.<|end|>"
              "<|start|>assistant to=get_weather<|channel|>analysis <|constrain|>xml<|message|>"
              '<rfl:parameter name="city">\nParis\n</rfl:parameter>\n'
              '<rfl:parameter name="days">\n3\n</rfl:parameter><|call|>')
MISSING_REASONING = "<|channel|>final<|message|>Hello!<|return|>"
EMPTY_REASONING = ("<|channel|>analysis<|message|><|end|>"
                   "<|start|>assistant<|channel|>final<|message|>Hello!<|return|>")
BROKEN_CALL_XML = ("<|channel|>analysis<|message|>Look it up.<|end|>"
                   "<|start|>assistant to=get_weather<|channel|>analysis <|constrain|>xml<|message|>"
                   '<rfl:parameter name="city">\nParis\n<|call|>')


def test_rendered_turns_are_what_the_template_writes(tokenizer):
    """The hand-written valid outputs are exactly the chat template's assistant turns."""
    for turn, tools, message in (
        (VALID_ANSWER, None, {"role": "assistant", "reasoning_content": "The user greets me.", "content": "Hello!"}),
        (VALID_CALL, [WEATHER], {"role": "assistant", "reasoning_content": "Look it up.", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}]}),
    ):
        prompt = [{"role": "user", "content": "Hi"}]
        head = tokenizer.apply_chat_template(prompt, tools=tools, tokenize=False, add_generation_prompt=True)
        full = tokenizer.apply_chat_template(prompt + [message], tools=tools, tokenize=False)
        assert full.startswith(head)
        assert full[len(head):].startswith(turn), full[len(head):]


def test_scorer_on_hand_written_outputs_gives_1_0_0():
    prompts = [Prompt([{"role": "user", "content": "Hi"}], None), Prompt([{"role": "user", "content": "Hi"}], None),
               Prompt([{"role": "user", "content": "Weather?"}], [WEATHER])]
    for texts, expected in (([VALID_ANSWER], 1.0), ([MISSING_REASONING], 0.0), ([BROKEN_CALL_XML], 0.0)):
        prompt = prompts[2] if "get_weather" in texts[0] else prompts[0]
        assert summarize(1, [prompt], texts).fraction == expected, texts
    assert summarize(1, prompts, [VALID_ANSWER, MISSING_REASONING, VALID_CALL]).fraction == pytest.approx(2 / 3)


@pytest.mark.parametrize(("text", "tools", "problem"), [
    (VALID_ANSWER, None, None),
    (VALID_CALL, [WEATHER], None),
    (VALID_ANSWER + "<|endoftext|><|endoftext|>", None, None),  # padding after the stop is not the turn
    (MISSING_REASONING, None, "parse"),
    (EMPTY_REASONING, None, "no reasoning"),
    (BROKEN_CALL_XML, [WEATHER], "parse"),
    (VALID_ANSWER.replace("<|return|>", ""), None, "does not end"),
    (VALID_ANSWER.replace("Hello!", ""), None, "empty answer"),
    (VALID_CALL, None, "not a declared tool"),
    (VALID_CALL.replace("\n3\n", "\nthree\n"), [WEATHER], "expected integer"),
    (VALID_CALL.replace('<rfl:parameter name="city">\nParis\n</rfl:parameter>\n', ""), [WEATHER],
     "missing required city"),
])
def test_score_turn(text, tools, problem):
    verdict = score_turn(text, tools)
    assert verdict.valid == (problem is None), verdict
    if problem is not None:
        assert problem in verdict.problem


def test_schema_problems():
    schema = WEATHER["function"]["parameters"]
    assert schema_problems({"city": "Paris", "days": 2, "unit": "C"}, schema) == []
    assert schema_problems({"city": "Paris", "unit": "K"}, schema) == ["arguments.unit: 'K' is not one of ['C', 'F']"]
    assert schema_problems({"city": 3}, schema) == ["arguments.city: expected string, got int"]
    assert schema_problems({"city": "x", "days": True}, schema) == ["arguments.days: expected integer, got bool"]
    assert schema_problems([1, "a"], {"type": "array", "items": {"type": "number"}}) == \
        ["arguments[1]: expected number, got str"]
    assert schema_problems({"a": 1}, {"type": "object", "additionalProperties": False}) == \
        ["arguments: unexpected key a"]
    assert schema_problems(None, {"type": ["string", "null"]}) == []


def test_prompts_from_eval_rows_with_and_without_tools():
    rows = [
        {"messages": [{"role": "user", "content": f"q{i}"},
                      {"role": "assistant", "reasoning_content": "r", "content": "a"}],
         **({"tools": [WEATHER]} if i % 3 == 0 else {}), "meta": {"source": "s", "row": i}}
        for i in range(10)
    ]
    prompts = select_prompts(rows, 4)
    assert [p.has_tools for p in prompts] == [True, True, False, False]
    assert [p.source for p in prompts] == ["s:0", "s:3", "s:1", "s:2"]
    assert prompts[0].messages == [{"role": "user", "content": "q0"}]
    only_plain = select_prompts([r for r in rows if "tools" not in r], 3)
    assert len(only_plain) == 3 and not any(p.has_tools for p in only_plain)
    weight0 = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "x", "weight": 0},
                            {"role": "user", "content": "b"}, {"role": "assistant", "content": "y"}]}
    assert [m["content"] for m in prompt_of(weight0).messages] == ["a", "x", "b"]


class FakeTrainer:
    def __init__(self, output_dir):
        self.args = SimpleNamespace(output_dir=str(output_dir))
        self.accelerator = SimpleNamespace(num_processes=1)
        self.logged: list[dict] = []

    def log(self, logs):
        self.logged.append(dict(logs))


def test_callback_logs_the_fraction_and_a_sample(tmp_path):
    trainer = FakeTrainer(tmp_path)
    prompts = [Prompt([{"role": "user", "content": "Weather?"}], [WEATHER], source="eval:0"),
               Prompt([{"role": "user", "content": "Hi"}], None, source="eval:1")]
    outputs = {"Weather?": BROKEN_CALL_XML, "Hi": VALID_ANSWER}
    callback = FormatHealthCallback(trainer, prompts, every=2,
                                    generate=lambda model, ps: [outputs[p.messages[-1]["content"]] for p in ps])
    state = SimpleNamespace(global_step=0, max_steps=5, is_world_process_zero=True)
    for step in range(1, 6):
        state.global_step = step
        callback.on_step_end(None, state, None, model=object())
    assert [r.step for r in callback.results] == [2, 4, 5]
    sample = trainer.logged[0].pop("format_health_sample")
    assert trainer.logged[0] == {"format_health": 0.5, "format_health_tools": 0.0, "format_health_plain": 1.0}
    assert sample.startswith("<|channel|>analysis") and "[parse:" in sample
    records = read_health(tmp_path)
    assert [r["step"] for r in records] == [2, 4, 5]
    assert records[0]["outputs"][0]["problem"].startswith("parse:")
    assert json.loads(json.dumps(records[0]))["outputs"][1]["valid"] is True


def test_a_resume_after_a_line_cut_short_keeps_the_records_before_it(tmp_path):
    """A run killed (or out of disk) while appending leaves half a line; the resume once died reading it
    (JSONDecodeError in on_train_begin), here and in losses.jsonl and metrics.jsonl alike."""
    from beam_sft.train.callbacks import LossLogCallback, read_losses
    from beam_sft.train.run_log import MetricsLogCallback, read_metrics

    whole = json.dumps({"step": 2, "format_health": 1.0, "counts": {}, "outputs": []})
    (tmp_path / "format_health.jsonl").write_text(whole + '\n{"step": 4, "format_he', encoding="utf-8")
    (tmp_path / "losses.jsonl").write_text('{"step": 2, "loss": 1.5}\n{"step": 4, "lo', encoding="utf-8")
    (tmp_path / "metrics.jsonl").write_text('{"step": 2, "eval_loss": 1.5}\n{"step": 4', encoding="utf-8")
    state = SimpleNamespace(global_step=2, max_steps=5, is_world_process_zero=True)
    FormatHealthCallback(FakeTrainer(tmp_path), [], every=2).on_train_begin(None, state, None)
    LossLogCallback(tmp_path).on_train_begin(None, state, None)
    MetricsLogCallback(tmp_path).on_train_begin(None, state, None)
    assert [r["step"] for r in read_health(tmp_path)] == [2]
    assert read_losses(tmp_path) == [{"step": 2, "loss": 1.5}]
    assert read_metrics(tmp_path) == [{"step": 2, "eval_loss": 1.5}]
    # the resumed run appends: its records follow the whole ones, the cut line gone (appended after it,
    # the first would have joined it on one line, a bad line in the middle that failed every later read)
    LossLogCallback(tmp_path).on_log(None, SimpleNamespace(global_step=3, is_world_process_zero=True), None,
                                     logs={"loss": 1.25})
    assert read_losses(tmp_path) == [{"step": 2, "loss": 1.5}, {"step": 3, "loss": 1.25}]
    (tmp_path / "losses.jsonl").write_text('{"step": 2, "lo\n{"step": 3, "loss": 1.0}\n', encoding="utf-8")
    with pytest.raises(ValueError):  # a bad line before the last is no interrupted append: still said
        read_losses(tmp_path)


# --- generation on Beam's own architecture (the beam fixture) -------------------------------------


def test_generation_on_beam_stops_at_a_stop_marker_under_the_soft_cap(moe_dirs, tokenizer):
    """Format health's generation on BeamForCausalLM: the step logits are soft-capped (30 x tanh), and
    greedy decoding ends at <|return|> or <|call|> (the fixture's generation config's eos ids), with
    the KV cache over a prompt longer than the sliding window giving the tokens decoding without one."""
    import torch
    from transformers import AutoModelForCausalLM

    from beam_sft.train.format_health import generate_turns

    model = AutoModelForCausalLM.from_pretrained(moe_dirs["beam"]).eval()
    prompt = Prompt([{"role": "user", "content": "What is the weather like in Paris today, and tomorrow?"}],
                    None, source="eval:0")
    ids = tokenizer.apply_chat_template(prompt.messages, add_generation_prompt=True, return_tensors="pt",
                                        return_dict=True)["input_ids"]
    assert ids.shape[1] > model.config.sliding_window
    with torch.no_grad():
        cached = model.generate(ids, max_new_tokens=12, do_sample=False, use_cache=True)
        uncached = model.generate(ids, max_new_tokens=12, do_sample=False, use_cache=False)
    assert torch.equal(cached, uncached)
    head = model.lm_head.weight.detach().clone()
    with torch.no_grad():
        hidden = model.model(ids).last_hidden_state[0, -1]
    for stop in ("<|return|>", "<|call|>"):
        # Make the head push the stop marker far past the cap: the step logit is capped, and decoding stops.
        stop_id = tokenizer.convert_tokens_to_ids(stop)
        assert stop_id in model.generation_config.eos_token_id
        with torch.no_grad():
            model.lm_head.weight.copy_(head)
            model.lm_head.weight[stop_id] = 1000.0 * hidden / hidden.norm() ** 2
            out = model.generate(ids, max_new_tokens=20, do_sample=False, output_logits=True,
                                 return_dict_in_generate=True)
        step = out.logits[0][0]
        assert 29.0 < float(step.max()) <= model.config.final_logit_softcapping  # raw ~1000, capped at 30
        assert int(step.argmax()) == stop_id and out.sequences.shape[1] == ids.shape[1] + 1  # stopped at it
        assert generate_turns(model, tokenizer, [prompt], max_new_tokens=20) == [stop]
