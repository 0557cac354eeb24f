"""Trainer callbacks: the packing pre-flight on the wrapped model, and a machine-readable loss log."""

from __future__ import annotations

import json
import math
from pathlib import Path

from transformers import TrainerCallback

from beam_sft.errors import PreflightError
from beam_sft.train.jsonl_log import append_record, read_records
from beam_sft.train.packing import check_isolation
from beam_sft.train.preflight import agree, raise_if

LOSS_LOG = "losses.jsonl"


def training_precision(args):
    """The half precision training computes in (``bf16``/``fp16`` in the trainer's arguments), or None
    (then the weights' dtype says it)."""
    import torch

    if getattr(args, "bf16", False):
        return torch.bfloat16
    if getattr(args, "fp16", False):
        return torch.float16
    return None


class PackingIsolationCallback(TrainerCallback):
    """Before step 1, prove on the trainer's first packed batch that packed sequences do not see each
    other (``packing.isolation_diff``: the counterfactual, and packed against alone).

    Runs in ``on_train_begin``: by then the model is wrapped for DDP/ZeRO/FSDP (a forward under
    ZeRO-3 or FSDP gathers its shards) and no optimizer step has run. Every process runs the same
    three forwards, then the verdicts are gathered so that all processes stop together.
    """

    def __init__(self, batch: dict, *, pad_token_id: int, attn_implementation: str,
                 tolerance: float | None, accelerator, report, watch=None):
        self.batch = batch
        self.pad_token_id = pad_token_id
        self.attn_implementation = attn_implementation
        self.tolerance = tolerance
        self.accelerator = accelerator
        self.report = report
        self.watch = watch

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.batch is None:
            return
        batch = {k: v.to(self.accelerator.device) if hasattr(v, "to") else v for k, v in self.batch.items()}
        if self.watch is not None:  # every process must be here: the forwards below are collectives
            self.watch.barrier("the packing isolation check")
        problems = []
        try:
            result = check_isolation(model, batch, pad_token_id=self.pad_token_id,
                                     attn_implementation=self.attn_implementation, tolerance=self.tolerance,
                                     precision=training_precision(args))
            self.report.packing_max_logit_diff = result.max_abs_diff
            self.report.packing_compared_sequences = result.compared_sequences
            self.report.packing_leak_diff = result.leak_diff
            self.report.packing_compute_dtype = result.compute_dtype
        except PreflightError as exc:
            problems.append(str(exc))
        self.batch = None
        raise_if(agree(problems, self.accelerator), "packed sequences attend to each other")


class RouterCallback(TrainerCallback):
    """Before step 1, on the wrapped model: the routers are float32 and their correction biases are
    bit for bit the checkpoint's (routers.py). All processes stop together on a problem."""

    def __init__(self, layout, biases, accelerator, watch=None):
        self.layout, self.biases, self.accelerator, self.watch = layout, biases, accelerator, watch
        self.dtypes: list[str] = []  # the router tensors' dtypes on the wrapped model (beam_run.json)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        from beam_sft.train.preflight import agree, raise_if
        from beam_sft.train.routers import BIAS, precision_problems, router_dtypes

        self.dtypes = router_dtypes(model, self.layout)
        problems = precision_problems(model, self.layout)
        changed = self.biases.changes(model)
        if changed:
            problems.append(f"{BIAS} differs from the checkpoint's after the launcher wrapped the model: {changed[:3]}")
        if self.watch is not None:
            self.watch.barrier("the router check")
        raise_if(agree(problems, self.accelerator), "the routers")


class EndOfPreflightCallback(TrainerCallback):
    """Once the pre-flight callbacks ran (the model is wrapped, the packing check passed), let the
    process group wait ``sft.ddp_timeout`` again (ranks.py)."""

    def __init__(self, watch):
        self.watch = watch

    def on_train_begin(self, args, state, control, **kwargs):
        self.watch.end_of_preflight()


class LossLogCallback(TrainerCallback):
    """Append every logged training loss to ``output_dir/losses.jsonl`` (main process only)."""

    def __init__(self, output_dir: str | Path):
        self.path = Path(output_dir) / LOSS_LOG

    def on_train_begin(self, args, state, control, **kwargs):
        # A fresh run starts a fresh log; a resumed one drops what the interrupted run logged past
        # its checkpoint, so every step appears once.
        if not state.is_world_process_zero or not self.path.is_file():
            return
        kept = [r for r in read_losses(self.path.parent) if r["step"] <= state.global_step]
        self.path.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "loss" not in logs:
            return
        record = {"step": state.global_step, "loss": float(logs["loss"])}
        for key in ("grad_norm", "learning_rate", "num_tokens", "mean_token_accuracy", "aux_loss"):
            if key in logs and isinstance(logs[key], (int, float)) and math.isfinite(float(logs[key])):
                record[key] = float(logs[key])
        append_record(self.path, record)


def read_losses(output_dir: str | Path) -> list[dict]:
    """The records ``LossLogCallback`` wrote, in order."""
    return read_records(Path(output_dir) / LOSS_LOG)
