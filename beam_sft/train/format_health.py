"""Format health during training: does the model still write valid Beam Harmony turns?

Every ``format_health.steps`` optimizer steps, ``FormatHealthCallback`` generates (greedy) from a
few fixed prompts taken from the eval set (with and without tools), reads each output with the
response template (``parse_assistant_turn``) and logs the fraction that is a valid Beam turn as
``format_health`` (and ``format_health_tools`` / ``format_health_plain``), plus one sample in
``output_dir/format_health.jsonl``. A falling figure is the early warning that a run is breaking
the format, long before the loss says anything.

A valid turn is what ``score_turn`` says (``evaluate/format_check.py``, the one scorer ``beam-sft eval``'s
``format_valid`` also uses): it ends with ``<|return|>`` or ``<|call|>``, parses strictly, has reasoning
and an answer or calls to declared tools whose arguments satisfy their schemas.

Distributed runs: every process generates from the same prompts (greedy, so the same tokens) with
``synced_gpus`` when there is more than one process, because under ZeRO-3 and FSDP2 each forward
gathers parameters collectively: a rank that skipped generation would leave the others waiting
forever. Rank 0's figures are broadcast and every rank logs the same values; rank 0 writes the file.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

# The pure scorer lives in evaluate/ (one scorer for training and `beam-sft eval`); re-exported here.
from beam_sft.evaluate.format_check import Verdict as Verdict
from beam_sft.evaluate.format_check import schema_problems as schema_problems
from beam_sft.evaluate.format_check import score_turn

logger = logging.getLogger("beam_sft.train")

HEALTH_LOG = "format_health.jsonl"


# ---------------------------------------------------------------------------- prompts


@dataclass(frozen=True)
class Prompt:
    """The conversation up to the first trained assistant turn of an eval row, and its tools."""

    messages: list[dict]
    tools: list[dict] | None
    chat_template_kwargs: dict = field(default_factory=dict)
    source: str = ""

    @property
    def has_tools(self) -> bool:
        return bool(self.tools)


def prompt_of(row: dict) -> Prompt | None:
    """The prompt of one canonical BeamRow: every message before its first trained assistant turn.

    >>> prompt_of({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo",
    ...            "reasoning_content": "r"}]}).messages
    [{'role': 'user', 'content': 'Hi'}]
    """
    messages = row.get("messages") or []
    for i, message in enumerate(messages):
        if message.get("role") == "assistant" and message.get("weight", 1) != 0:
            if i == 0:
                return None
            meta = row.get("meta") or {}
            return Prompt([dict(m) for m in messages[:i]], row.get("tools") or None,
                          dict(row.get("chat_template_kwargs") or {}), f"{meta.get('source')}:{meta.get('row')}")
    return None


def select_prompts(rows: Iterable[dict], count: int) -> list[Prompt]:
    """The first ``count`` prompts of ``rows``: half with tools and half without where both exist."""
    with_tools: list[Prompt] = []
    plain: list[Prompt] = []
    for row in rows:
        prompt = prompt_of(row)
        if prompt is None:
            continue
        (with_tools if prompt.has_tools else plain).append(prompt)
        if len(with_tools) >= count and len(plain) >= count:
            break
    want_tools = min(len(with_tools), max(count // 2, count - len(plain)))
    return with_tools[:want_tools] + plain[: count - want_tools]


# ---------------------------------------------------------------------------- generation and the callback


def generate_turns(model, tokenizer, prompts: Sequence[Prompt], *, max_new_tokens: int,
                   synced_gpus: bool = False) -> list[str]:
    """Greedy continuation of each prompt (one at a time: no padding to get wrong), special tokens kept."""
    import torch

    outputs = []
    was_training = model.training
    model.eval()
    try:
        device = next(model.parameters()).device
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        for prompt in prompts:
            text = tokenizer.apply_chat_template(prompt.messages, tools=prompt.tools, tokenize=False,
                                                 add_generation_prompt=True, **prompt.chat_template_kwargs)
            ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids.to(device)
            with torch.no_grad():
                out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                     do_sample=False, use_cache=True, synced_gpus=synced_gpus,
                                     eos_token_id=eos, pad_token_id=tokenizer.pad_token_id)
            outputs.append(tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=False))
    finally:
        if was_training:
            model.train()
    return outputs


@dataclass
class HealthResult:
    step: int
    fraction: float
    with_tools: float | None
    plain: float | None
    verdicts: list[dict]

    def metrics(self) -> dict[str, float]:
        out = {"format_health": self.fraction}
        if self.with_tools is not None:
            out["format_health_tools"] = self.with_tools
        if self.plain is not None:
            out["format_health_plain"] = self.plain
        return out


def summarize(step: int, prompts: Sequence[Prompt], texts: Sequence[str]) -> HealthResult:
    """Score every output; fractions overall, with tools and without."""
    verdicts = [score_turn(text, prompt.tools) for prompt, text in zip(prompts, texts, strict=True)]

    def frac(selected: list[bool]) -> float | None:
        return sum(selected) / len(selected) if selected else None

    records = [{"source": p.source, "tools": p.has_tools, "valid": v.valid, "problem": v.problem,
                "generated": t[:2000]} for p, t, v in zip(prompts, texts, verdicts, strict=True)]
    return HealthResult(
        step=step,
        fraction=frac([v.valid for v in verdicts]) or 0.0,
        with_tools=frac([v.valid for p, v in zip(prompts, verdicts, strict=True) if p.has_tools]),
        plain=frac([v.valid for p, v in zip(prompts, verdicts, strict=True) if not p.has_tools]),
        verdicts=records,
    )


class FormatHealthCallback(TrainerCallback):
    """Measure format health every ``every`` steps (and after the last step); see the module doc.

    ``generate`` is the seam tests use to feed hand-written outputs: ``(model, prompts) -> texts``.
    """

    def __init__(self, trainer, prompts: Sequence[Prompt], *, every: int, max_new_tokens: int = 256,
                 generate: Callable[[Any, Sequence[Prompt]], list[str]] | None = None):
        if every < 1:
            raise ValueError("every must be at least 1")
        self.trainer = trainer
        self.prompts = list(prompts)
        self.every = every
        self.max_new_tokens = max_new_tokens
        self._generate = generate
        self.results: list[HealthResult] = []
        self.path = Path(trainer.args.output_dir) / HEALTH_LOG

    def measure(self, model, step: int) -> HealthResult:
        accelerator = self.trainer.accelerator
        if self._generate is not None:
            texts = self._generate(model, self.prompts)
        else:
            texts = generate_turns(model, self.trainer.processing_class, self.prompts,
                                   max_new_tokens=self.max_new_tokens, synced_gpus=accelerator.num_processes > 1)
        result = summarize(step, self.prompts, texts)
        if accelerator.num_processes > 1:  # rank 0 decides: every rank logs its figures
            from accelerate.utils import broadcast_object_list

            result = broadcast_object_list([result], from_process=0)[0]
        return result

    def _run(self, state, control, model) -> None:
        if not self.prompts or model is None:
            return
        if self.results and self.results[-1].step == state.global_step:
            return
        result = self.measure(model, state.global_step)
        self.results.append(result)
        sample = result.verdicts[0]
        shown = sample["generated"][:300] + (f" [{sample['problem']}]" if sample["problem"] else " [valid]")
        # Trainer.log clears control.should_log: put it back, or this step's training loss would not be logged.
        should_log = getattr(control, "should_log", None)
        self._log({**result.metrics(), "format_health_sample": shown})  # TensorBoard shows the sample as text
        if should_log is not None:
            control.should_log = should_log
        if state.is_world_process_zero:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"step": result.step, **result.metrics(), "outputs": result.verdicts},
                                    ensure_ascii=False) + "\n")
            logger.info("format health at step %d: %.2f valid; sample (%s): %r", result.step, result.fraction,
                        sample["source"], shown)

    def _log(self, logs: dict) -> None:
        from transformers import Trainer

        if isinstance(self.trainer, Trainer):
            # transformers' Trainer.log, not TRL's override: TRL's would fold the training metrics it has
            # gathered since the last log (token accuracy, entropy) into this record and clear them, so
            # the step's own loss record would lose them.
            Trainer.log(self.trainer, logs)
        else:
            self.trainer.log(logs)

    def on_train_begin(self, args, state, control, **kwargs):
        # A fresh run starts a fresh log; a resumed one keeps what was measured up to its checkpoint.
        if state.is_world_process_zero and self.path.is_file():
            kept = [r for r in read_health(self.path.parent) if r["step"] <= state.global_step]
            self.path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept), encoding="utf-8")

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.every == 0 or state.global_step >= state.max_steps:
            self._run(state, control, model)
        return control


def read_health(output_dir: str | Path) -> list[dict]:
    """The records ``FormatHealthCallback`` wrote, in order."""
    path = Path(output_dir) / HEALTH_LOG
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
