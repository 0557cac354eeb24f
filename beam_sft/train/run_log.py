"""What a run shows where people look: TensorBoard (``sft.report_to: tensorboard``) gets the run
record and the prepared data's key figures at the start, and every logged metric (loss,
``eval_loss``, ``format_health``, the task metrics) as training goes, through transformers' own TensorBoardCallback.

``attach(trainer, recipe, eval_data, prepared_dir, prepared_data=...)`` adds the callbacks a recipe asks for:
``RunRecordCallback`` always (it does nothing without a TensorBoard writer), ``MetricsLogCallback``
(``output_dir/metrics.jsonl``: eval loss, format health and task metrics by step) and ``FormatHealthCallback`` when
``format_health.steps`` is set.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from beam_sft.dataset_folder.report_json import read_report
from beam_sft.evaluate.metrics import KINDS, METRICS
from beam_sft.train.jsonl_log import append_record, read_records


def prepare_figures(report: dict) -> dict[str, float]:
    """Key figures of a prepared folder's ``report.json``: rows, tokens, trained fraction (overall and
    by channel), rejected rows.

    >>> prepare_figures({"tokens": {"rows": 3, "total": 90, "trained": 30, "trained_fraction": 0.33},
    ...                  "verify": {"trained_by_channel": {"final": {"fraction_of_trained": 0.5}}}})
    {'prepare/rows': 3.0, 'prepare/tokens': 90.0, 'prepare/trained_tokens': 30.0, 'prepare/trained_fraction': 0.33, 'prepare/trained_by_channel/final': 0.5}
    """
    out: dict[str, float] = {}
    tokens = report.get("tokens") or {}
    for key, name in (("rows", "rows"), ("total", "tokens"), ("trained", "trained_tokens"),
                      ("trained_fraction", "trained_fraction")):
        if isinstance(tokens.get(key), (int, float)):
            out[f"prepare/{name}"] = float(tokens[key])
    for channel, entry in ((report.get("verify") or {}).get("trained_by_channel") or {}).items():
        if isinstance(entry, dict) and isinstance(entry.get("fraction_of_trained"), (int, float)):
            out[f"prepare/trained_by_channel/{channel}"] = float(entry["fraction_of_trained"])
    rejected = sum(sum((s.get("rejected") or {}).values()) for s in (report.get("sources") or {}).values()
                   if isinstance(s, dict))
    if report.get("sources"):
        out["prepare/rejected_rows"] = float(rejected)
    return out


def tensorboard_writer(trainer):
    """The SummaryWriter of transformers' TensorBoardCallback, once it has made it (train begin)."""
    from transformers.integrations import TensorBoardCallback

    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, TensorBoardCallback):
            return getattr(callback, "tb_writer", None)
    return None


class RunRecordCallback(TrainerCallback):
    """At train begin (main process), write the run record and the data's key figures to TensorBoard."""

    def __init__(self, trainer, record: dict[str, Any], prepared_dir: Path, eval_dir: Path | None = None):
        self.trainer = trainer
        self.record = record
        self.prepared_dir = Path(prepared_dir)
        self.eval_dir = eval_dir

    def figures(self) -> dict[str, float]:
        out = prepare_figures(read_report(self.prepared_dir) or {})
        if self.eval_dir is not None:
            out.update({k.replace("prepare/", "prepare_eval/", 1): v
                        for k, v in prepare_figures(read_report(self.eval_dir) or {}).items()})
        for key in ("train_rows", "eval_rows"):
            if isinstance(self.record.get("eval", {}).get(key), int):
                out[f"split/{key}"] = float(self.record["eval"][key])
        return out

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        writer = tensorboard_writer(self.trainer)
        if writer is None:
            return
        text = json.dumps(self.record, indent=2, default=str)
        writer.add_text("beam_run", f"```json\n{text}\n```", global_step=state.global_step)
        for name, value in self.figures().items():
            writer.add_scalar(name, value, global_step=state.global_step)
        writer.flush()


METRICS_LOG = "metrics.jsonl"
# Eval loss, format health and every task metric of the scorer (overall and per kind), by the names
# `beam-sft eval --json` uses.
_LOGGED = ("eval_loss", "eval_mean_token_accuracy", "format_health", "format_health_tools", "format_health_plain",
           *(f"{name}{suffix}" for name in METRICS for suffix in ("", *(f"_{kind}" for kind in KINDS))))


class MetricsLogCallback(TrainerCallback):
    """Append every logged ``eval_loss``, ``format_health`` and task-metric figure to ``output_dir/metrics.jsonl``
    (main process), beside ``losses.jsonl``: what the demo's summary and the tests read."""

    def __init__(self, output_dir: str | Path):
        self.path = Path(output_dir) / METRICS_LOG

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self.path.is_file():  # a resumed run keeps what came before
            kept = [r for r in read_metrics(self.path.parent) if r["step"] <= state.global_step]
            self.path.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        record = {k: float(logs[k]) for k in _LOGGED if isinstance(logs.get(k), (int, float))}
        if record:
            append_record(self.path, {"step": state.global_step, **record})


def read_metrics(output_dir: str | Path) -> list[dict]:
    """The records ``MetricsLogCallback`` wrote, in order."""
    return read_records(Path(output_dir) / METRICS_LOG)


def run_record(recipe, prepared_dir: Path, eval_data, *, prepared_data: dict[str, Any],
               truncation: dict | None = None) -> dict[str, Any]:
    """What ``beam_run.json`` holds that is known before step 1 (the data by digest, not only by path:
    ``prepared_data`` is ``provenance.folder_provenance`` as the run took it at the start; ``truncation``:
    the rows ``sft.max_length`` cuts and drops, ``data.truncation_counts``)."""
    return {"recipe": recipe.to_record(), "prepared": str(prepared_dir), "lora": recipe.lora is not None,
            "prepared_data": prepared_data,
            "eval": eval_data.summary if eval_data is not None else None,
            "truncation": truncation}


def attach(trainer, recipe, eval_data, prepared_dir: Path, *, prepared_data: dict[str, Any],
           truncation: dict | None = None):
    """Add the run-record and (when asked for) format-health callbacks; returns the latter or None."""
    from beam_sft.train.eval_set import eval_rows_json
    from beam_sft.train.format_health import FormatHealthCallback, select_prompts

    eval_dir = Path(eval_data.summary["eval_dir"]) if eval_data is not None and "eval_dir" in eval_data.summary \
        else None
    trainer.add_callback(RunRecordCallback(trainer, run_record(recipe, prepared_dir, eval_data, prepared_data=prepared_data,
                                                               truncation=truncation),
                                           prepared_dir,
                                           eval_dir))
    trainer.add_callback(MetricsLogCallback(trainer.args.output_dir))
    health = recipe.format_health
    if not health.steps or eval_data is None:
        return None
    prompts = select_prompts(eval_rows_json(eval_data), health.prompts)
    callback = FormatHealthCallback(trainer, prompts, every=health.steps, max_new_tokens=health.max_new_tokens)
    trainer.add_callback(callback)
    return callback
