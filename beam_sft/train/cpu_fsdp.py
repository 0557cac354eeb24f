"""FSDP on the CPU, for the ``cpu-fsdp2`` launcher config that tests the FSDP2 path without GPUs.

accelerate 1.15 only turns a multi-process run into FSDP for GPU-like device types: on the CPU the
state stays ``MULTI_CPU`` (plain DDP over gloo) and the FSDP plugin from the launcher config is
dropped without a word. torch's FSDP2 (``fully_shard``) itself runs on the CPU over gloo, so when
the launcher asked for FSDP (``ACCELERATE_USE_FSDP``) for a CPU run (``sft.use_cpu``, which the
cpu-* configs need since accelerate's FSDP launcher does not pass its ``use_cpu`` on, or no GPU at all)
and the state fell back to ``MULTI_CPU``, we promote the state to FSDP with the launcher's plugin.

This is the one place that touches accelerate's private state (``AcceleratorState._shared_state``,
``PartialState._shared_state``); ``PRIVATE_NAMES`` lists what it relies on and ``check_internals``
(run by the tests) fails naming the one a new accelerate changed. Nothing here runs unless a CPU
FSDP launch asks for it: ``trainer.trainer_class`` returns TRL's plain ``SFTTrainer`` otherwise.
"""

from __future__ import annotations

import os

# What promote_cpu_fsdp relies on: (module, object in it, attribute of that object or None).
PRIVATE_NAMES = (
    ("accelerate.state", "AcceleratorState", "_shared_state"),
    ("accelerate.state", "PartialState", "_shared_state"),
    ("accelerate.utils", "DistributedType", "MULTI_CPU"),
    ("accelerate.utils", "DistributedType", "FSDP"),
    ("accelerate.utils", "FullyShardedDataParallelPlugin", None),
)
# Keys of the shared state it overwrites (present once a state exists; fsdp_plugin is added).
STATE_KEYS = ("distributed_type",)


def _env_true(name: str) -> bool:
    return os.environ.get(name, "false").lower() in ("true", "1", "yes")


def cpu_fsdp_requested(use_cpu: bool = False) -> bool:
    """True when the launcher asked for FSDP and the run is on the CPU (the cpu-fsdp2 config)."""
    if not _env_true("ACCELERATE_USE_FSDP"):
        return False
    if use_cpu or _env_true("ACCELERATE_USE_CPU"):
        return True
    import torch

    return not torch.cuda.is_available()


def check_internals() -> list[str]:
    """The accelerate names this module needs that are missing (empty when all are there)."""
    import importlib

    missing = []
    for module_name, obj_name, attr in PRIVATE_NAMES:
        obj = getattr(importlib.import_module(module_name), obj_name, None)
        if obj is None or (attr is not None and not hasattr(obj, attr)):
            missing.append(".".join(x for x in (module_name, obj_name, attr) if x))
    return missing


def promote_cpu_fsdp(accelerator) -> bool:
    """Make ``accelerator`` shard with FSDP when a CPU FSDP launch asked for it but the state dropped it."""
    from accelerate.state import AcceleratorState, PartialState
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    state = accelerator.state
    if not _env_true("ACCELERATE_USE_FSDP") or state.distributed_type != DistributedType.MULTI_CPU:
        return False
    missing = [k for k in STATE_KEYS if k not in AcceleratorState._shared_state]
    if missing:
        raise RuntimeError(f"accelerate's AcceleratorState no longer holds {missing}: beam_sft.train.cpu_fsdp "
                           "needs updating for this accelerate version")
    plugin = FullyShardedDataParallelPlugin()  # from the launcher's FSDP_* environment
    AcceleratorState._shared_state["distributed_type"] = DistributedType.FSDP
    AcceleratorState._shared_state["fsdp_plugin"] = plugin
    PartialState._shared_state["distributed_type"] = DistributedType.FSDP
    return True


def trainer_class(base):
    """``base`` (TRL's SFTTrainer) promoted to FSDP on the CPU; used only when ``cpu_fsdp_requested``."""

    class CpuFsdpSFTTrainer(base):
        def create_accelerator_and_postprocess(self):
            super().create_accelerator_and_postprocess()
            if promote_cpu_fsdp(self.accelerator):
                self.is_fsdp_enabled = True

    return CpuFsdpSFTTrainer
