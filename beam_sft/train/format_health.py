"""Task metrics during training: does the model still write valid Beam Harmony turns, and the right ones?

Every ``format_health.steps`` optimizer steps, ``FormatHealthCallback`` generates (greedy) from a
few fixed prompts taken from the eval set (with and without tools), reads each output with the
response template (``parse_assistant_turn``) and logs the fraction that is a valid Beam turn as
``format_health`` (and ``format_health_tools`` / ``format_health_plain``), plus one sample in
``output_dir/format_health.jsonl``. A falling figure is the early warning that a run is breaking
the format, long before the loss says anything.

The same greedy turns are scored against the eval rows' own assistant turns by the task scorer
(``evaluate/metrics.py``, the one ``beam-sft eval`` uses): every metric it has (``format_valid``,
``tool_name_accuracy``, ``argument_exact_match``, ``answer_exact_match``, ``answer_token_f1``,
``stop_accuracy``, ``distinct_ratio``, overall and ``_tool`` / ``_plain``) is logged beside format health
(trainer log, TensorBoard, ``metrics.jsonl``) and written with its counts to ``format_health.jsonl``.
Format health alone cannot tell a model that works from one that writes one well-formed answer to
every prompt; ``collapse_warning`` says so in the log when ``distinct_ratio`` falls under
``COLLAPSE_DISTINCT`` while format health is at least ``COLLAPSE_FORMAT``.

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
from beam_sft.evaluate.metrics import KINDS, METRICS, aggregate
from beam_sft.evaluate.metrics import score_turn as score_task
from beam_sft.train.jsonl_log import append_record, read_records

logger = logging.getLogger("beam_sft.train")

HEALTH_LOG = "format_health.jsonl"
# The collapse warning: fewer distinct generations than half the prompts, while the format is good
# (a broken format is its own, louder, signal; a collapse hides behind a good one).
COLLAPSE_DISTINCT = 0.5
COLLAPSE_FORMAT = 0.75


# ---------------------------------------------------------------------------- prompts


@dataclass(frozen=True)
class Prompt:
    """The conversation up to the first trained assistant turn of an eval row, its tools, and that turn
    (``reference``: what the task scorer compares the generation with; None: format health only)."""

    messages: list[dict]
    tools: list[dict] | None
    chat_template_kwargs: dict = field(default_factory=dict)
    source: str = ""
    reference: dict | None = None

    @property
    def has_tools(self) -> bool:
        return bool(self.tools)


def prompt_of(row: dict) -> Prompt | None:
    """The prompt of one canonical BeamRow: every message before its first trained assistant turn that
    has one (a trained turn opening the row has nothing to prompt with; the row's next one is taken).

    >>> prompt_of({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo",
    ...            "reasoning_content": "r"}]}).messages
    [{'role': 'user', 'content': 'Hi'}]
    """
    messages = row.get("messages") or []
    for i, message in enumerate(messages):
        if message.get("role") == "assistant" and message.get("weight", 1) != 0 and i > 0:
            meta = row.get("meta") or {}
            return Prompt([dict(m) for m in messages[:i]], row.get("tools") or None,
                          dict(row.get("chat_template_kwargs") or {}), f"{meta.get('source')}:{meta.get('row')}",
                          dict(message))
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
    task: dict[str, float | None] = field(default_factory=dict)  # the scorer's values (TaskMetrics.values)
    counts: dict[str, dict] = field(default_factory=dict)  # the same keys: numerator, denominator, value

    def metrics(self) -> dict[str, float]:
        """Format health and every task metric that counted a turn (a 0/0 metric is left out, not 0)."""
        out = {"format_health": self.fraction}
        if self.with_tools is not None:
            out["format_health_tools"] = self.with_tools
        if self.plain is not None:
            out["format_health_plain"] = self.plain
        out.update({name: value for name, value in self.task.items() if value is not None})
        return out


def summarize(step: int, prompts: Sequence[Prompt], texts: Sequence[str]) -> HealthResult:
    """Score every output: format health overall, with tools and without; the task metrics of the
    prompts that carry a reference turn."""
    verdicts = [score_turn(text, prompt.tools) for prompt, text in zip(prompts, texts, strict=True)]
    scores = [score_task(t, p.reference, p.tools) if p.reference is not None else None
              for p, t in zip(prompts, texts, strict=True)]

    def frac(selected: list[bool]) -> float | None:
        return sum(selected) / len(selected) if selected else None

    records = []
    for p, t, v, sc in zip(prompts, texts, verdicts, scores, strict=True):
        record = {"source": p.source, "tools": p.has_tools, "valid": v.valid, "problem": v.problem,
                  "generated": t[:2000]}
        if sc is not None:
            record.update(kind=sc.kind, tool_name=sc.tool_name, arguments=sc.arguments,
                          answer_exact=sc.answer_exact, answer_f1=sc.answer_f1, stop=sc.stop)
        records.append(record)
    task = aggregate([sc for sc in scores if sc is not None]) if any(sc is not None for sc in scores) else None
    return HealthResult(
        step=step,
        fraction=frac([v.valid for v in verdicts]) or 0.0,
        with_tools=frac([v.valid for p, v in zip(prompts, verdicts, strict=True) if p.has_tools]),
        plain=frac([v.valid for p, v in zip(prompts, verdicts, strict=True) if not p.has_tools]),
        verdicts=records,
        task=task.values() if task is not None else {},
        counts=task.counts() if task is not None else {},
    )


def collapse_warning(result: HealthResult) -> str | None:
    """The log's warning when the model answers every prompt alike: ``distinct_ratio`` (overall, or of
    one kind with two turns or more) under ``COLLAPSE_DISTINCT`` while format health is at least
    ``COLLAPSE_FORMAT``; None otherwise.

    >>> same = {"numerator": 1, "denominator": 8, "value": 0.125}
    >>> collapse_warning(HealthResult(40, 1.0, 1.0, None, [], {"distinct_ratio": 0.125},
    ...                               {"distinct_ratio": same}))[:60]
    'step 40: the model answers every prompt alike: 1 distinct of'
    """
    if result.fraction < COLLAPSE_FORMAT:
        return None
    for suffix, what in (("", "generations"), *((f"_{k}", f"{k} turns") for k in KINDS)):
        count = result.counts.get(f"distinct_ratio{suffix}")
        if count and count["denominator"] >= 2 and count["value"] is not None and count["value"] < COLLAPSE_DISTINCT:
            return (f"step {result.step}: the model answers every prompt alike: {count['numerator']:g} distinct of "
                    f"{count['denominator']} {what} (distinct_ratio{suffix} {count['value']:.2f} < "
                    f"{COLLAPSE_DISTINCT}) while format health is {result.fraction:.2f}; the format is learnt, "
                    "the content is not (look at the samples in " + HEALTH_LOG + ")")
    return None


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
            append_record(self.path, {"step": result.step, **result.metrics(), "counts": result.counts,
                                      "outputs": result.verdicts}, ensure_ascii=False)
            logger.info("format health at step %d: %.2f valid; sample (%s): %r", result.step, result.fraction,
                        sample["source"], shown)
            if result.task:
                logger.info("task metrics at step %d (overall; by kind in %s): %s", result.step, HEALTH_LOG,
                            ", ".join(f"{k} {result.task[k]:.2f}" for k in METRICS if result.task.get(k) is not None))
            warning = collapse_warning(result)
            if warning:
                logger.warning(warning)

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
    return read_records(Path(output_dir) / HEALTH_LOG)
