"""Launched by the slow tests instead of ``-m beam_sft train``: the same ``train`` with a probe.

``accelerate launch --config_file ... tests/train/probe_launch.py --probe-out DIR --config RECIPE``
trains exactly as ``beam-sft train`` does and, per rank, writes ``DIR/memory-<rank>.json`` (bytes of
parameters and optimizer state this rank holds after the first optimizer step, read from the
sharded tensors themselves) and ``DIR/logits.pt`` (the trained model's logits on fixed ids, taken
in-process at the end of training, every rank joining the sharded forward).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from transformers import TrainerCallback

PROBE_IDS = [[5, 17, 300, 42, 7, 99, 3, 250]]


def _local_bytes(tensor) -> int:
    local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
    return local.numel() * local.element_size()


def held_bytes(trainer) -> dict:
    """Parameters and optimizer state held by this rank (DeepSpeed ZeRO partitions or FSDP2 shards)."""
    engine = trainer.model_wrapped
    optimizer = getattr(engine, "optimizer", None) if hasattr(engine, "zero_optimization_stage") else None
    if optimizer is not None and hasattr(optimizer, "fp32_partitioned_groups_flat"):  # ZeRO-3
        params = 0
        for p in engine.module.parameters():
            params += p.ds_tensor.numel() * p.ds_tensor.element_size()
            if getattr(p, "ds_persist", False):
                params += p.numel() * p.element_size()
        master = sum(t.numel() * t.element_size() for t in optimizer.fp32_partitioned_groups_flat)
        moments = sum(v.numel() * v.element_size() for s in optimizer.optimizer.state.values()
                      for v in s.values() if torch.is_tensor(v) and v.dim() > 0)
        return {"parameters": params, "optimizer": master + moments, "kind": "zero3"}
    inner = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
    params = sum(_local_bytes(p) for p in trainer.model.parameters())
    moments = sum(_local_bytes(v) for s in inner.state.values() for v in s.values()
                  if torch.is_tensor(v) and v.dim() > 0)
    return {"parameters": params, "optimizer": moments, "kind": "fsdp2"}


class Probe(TrainerCallback):
    def __init__(self, out: Path):
        self.out = out
        self.trainer = None

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 1:
            data = held_bytes(self.trainer)
            (self.out / f"memory-{args.process_index}.json").write_text(json.dumps(data))

    def on_train_end(self, args, state, control, model=None, **kwargs):
        model = self.trainer.model_wrapped
        model.eval()
        with torch.no_grad():
            logits = model(input_ids=torch.tensor(PROBE_IDS)).logits
        if args.process_index == 0:
            torch.save(logits.detach().cpu(), self.out / "logits.pt")
        model.train()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--probe-out", required=True, type=Path)
    parser.add_argument("--config", required=True)
    args, overrides = parser.parse_known_args(argv)
    args.probe_out.mkdir(parents=True, exist_ok=True)

    from beam_sft.train import trainer as trainer_module
    from beam_sft.train.recipe import load_recipe

    probe = Probe(args.probe_out)
    build = trainer_module.build

    def build_with_probe(recipe, *, callbacks=None):
        run = build(recipe, callbacks=[*(callbacks or []), probe])
        probe.trainer = run.trainer
        return run

    trainer_module.build = build_with_probe
    trainer_module.train(load_recipe(args.config, overrides))
    from accelerate import PartialState

    from beam_sft.train.cli import _end_process_group

    _end_process_group(PartialState())  # as `beam-sft train` does
    return 0


if __name__ == "__main__":
    sys.exit(main())
