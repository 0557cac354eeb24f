"""Served vs local: `beam-sft eval` against `transformers serve` (started here on 127.0.0.1) and locally,
on a model that writes real tool calls and answers (``memorized_model``).

Tolerance, and why: greedy decoding of the same prompt by the same weights on the same CPU gives the
same tokens, so on every turn whose prompt the server renders as training did, every figure is equal
(tolerance 0). transformers serve drops ``reasoning_content`` from the request's history
(``get_processor_inputs_from_messages`` keeps only role, content, tool_calls, tool_call_id), so a turn
that follows an earlier assistant turn gets a prompt with that turn's analysis empty: another prompt, so
possibly another generation. The test proves that this is the whole difference: local generation from
prompts with the earlier reasoning dropped the same way scores every turn exactly as the server does.
"""

from __future__ import annotations

import json

import pytest

from beam_sft.cli import main
from beam_sft.evaluate.generate import generate, load_model
from beam_sft.evaluate.metrics import aggregate, score_turn
from beam_sft.evaluate.turns import EvalTurn, read_rows, select_turns
from tests.serving import serve_or_skip

pytestmark = pytest.mark.slow

MARKS = ("format_valid", "tool_name", "arguments", "answer_exact", "answer_f1", "stop")


@pytest.fixture(scope="module")
def served(memorized_model, tmp_path_factory):
    yield from serve_or_skip(memorized_model, tmp_path_factory)


def _run(argv, out):
    assert main(["eval", *argv, "--max-new-tokens", "96", "--json", str(out)]) == 0
    return json.loads(out.read_text())


def _after_assistant(turn_source: str, turns) -> bool:
    turn = next(t for t in turns if t.source == turn_source)
    return any(m.get("role") == "assistant" for m in turn.messages)


def test_served_and_local_agree(memorized_model, memorized_prepared, served, tmp_path):
    local = _run([str(memorized_model), "--data", str(memorized_prepared)], tmp_path / "local.json")
    remote = _run(["--base-url", served.base_url, "--model", served.model, "--data", str(memorized_prepared)],
                  tmp_path / "served.json")
    assert set(local["metrics"]) == set(remote["metrics"]) and set(local["counts"]) == set(remote["counts"])
    # the model learned its rows: locally every figure is 1 (so agreement below is on real calls)
    assert local["metrics"]["argument_exact_match"] == 1.0 and local["metrics"]["answer_exact_match"] == 1.0
    turns = select_turns(read_rows(memorized_prepared)).turns
    first = [(a, b) for a, b in zip(local["samples"], remote["samples"], strict=True)
             if not _after_assistant(a["source"], turns)]
    assert {a["kind"] for a, _ in first} == {"tool", "plain"}
    for a, b in first:  # tolerance 0 on turns whose prompt the server renders as training did
        assert [a[m] for m in MARKS] == [b[m] for m in MARKS], (a["source"], a["generated"], b["generated"])
        assert a["message"] == b["message"]  # the same turn read back: reasoning, answer, calls with typed arguments
    # the server returned the calls as OpenAI tool_calls, arguments as JSON text, finish_reason tool_calls
    for _, b in first:
        if b["kind"] == "tool":
            raw = json.loads(b["generated"])
            assert raw["finish_reason"] == "tool_calls"
            call = raw["message"]["tool_calls"][0]["function"]
            assert call["name"] == "get_weather" and json.loads(call["arguments"])["city"] in ("Paris", "Oslo")
    assert remote["run"]["turns_after_reasoning"] == sum(_after_assistant(a["source"], turns)
                                                         for a in local["samples"]) > 0


def test_the_dropped_history_reasoning_is_the_whole_difference(memorized_model, memorized_prepared, served,
                                                               tmp_path):
    """Local generation from the prompts as the server renders them (earlier reasoning dropped) writes
    what the server wrote, on every turn: read with the shipped response template (what serve parses
    with), the local text is the served message."""
    from transformers.utils.chat_parsing import parse_response

    from beam_sft.harmony.response import response_template

    remote = _run(["--base-url", served.base_url, "--model", served.model, "--data", str(memorized_prepared)],
                  tmp_path / "served.json")
    turns = select_turns(read_rows(memorized_prepared)).turns
    as_served = [EvalTurn([{k: v for k, v in m.items() if k not in ("reasoning_content", "thinking", "reasoning")}
                           for m in t.messages], t.reference, t.tools, t.chat_template_kwargs, t.source)
                 for t in turns]
    model, tokenizer = load_model(memorized_model)
    texts = generate(model, tokenizer, as_served, max_new_tokens=96)
    for text, turn, b in zip(texts, turns, remote["samples"], strict=True):
        read = parse_response(text, response_template(), prefix="", tools=turn.tools)
        message = json.loads(b["generated"])["message"]
        assert (read.get("thinking") or "") == (message.get("reasoning_content") or ""), b["source"]
        calls = [(c["function"]["name"], c["function"]["arguments"]) for c in read.get("tool_calls") or []]
        assert calls == [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                         for c in message.get("tool_calls") or []], b["source"]
        if not calls:
            assert (read.get("content") or "") == (message.get("content") or ""), b["source"]
    # and where the prompts are the same, so are the figures: the tool turns (first turns of their rows)
    local_scores = [score_turn(text, t.reference, t.tools) for text, t in zip(texts, turns, strict=True)]
    tool = aggregate([s for s in local_scores if s.kind == "tool"]).values()
    assert tool["argument_exact_match"] == remote["metrics"]["argument_exact_match"] == 1.0
