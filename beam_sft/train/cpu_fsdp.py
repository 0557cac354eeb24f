"""FSDP on the CPU, for the ``cpu-fsdp2`` launcher config that tests the FSDP2 path without GPUs.

accelerate 1.15 only turns a multi-process run into FSDP for GPU-like device types: on the CPU the
state stays ``MULTI_CPU`` (plain DDP over gloo) and the FSDP plugin from the launcher config is
dropped without a word. torch's FSDP2 (``fully_shard``) itself runs on the CPU over gloo, so when
the launcher asked for FSDP (``ACCELERATE_USE_FSDP``) and the state fell back to ``MULTI_CPU``, we
promote the state to FSDP with the launcher's plugin. On GPUs this never triggers.
"""

from __future__ import annotations

import os


def fsdp_requested() -> bool:
    return os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"


def promote_cpu_fsdp(accelerator) -> bool:
    """Make ``accelerator`` shard with FSDP when the launcher asked for it but the CPU state dropped it."""
    from accelerate.state import AcceleratorState, PartialState
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    state = accelerator.state
    if not fsdp_requested() or state.distributed_type != DistributedType.MULTI_CPU:
        return False
    plugin = FullyShardedDataParallelPlugin()  # from the launcher's FSDP_* environment
    AcceleratorState._shared_state["distributed_type"] = DistributedType.FSDP
    AcceleratorState._shared_state["fsdp_plugin"] = plugin
    PartialState._shared_state["distributed_type"] = DistributedType.FSDP
    return True
