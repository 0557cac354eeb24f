"""accelerate's private state, for the CPU FSDP launches (``beam_sft.train.cpu_fsdp``).

accelerate 1.15 keeps a CPU multi-process run as ``MULTI_CPU`` and drops the launcher's FSDP plugin;
``promote_to_fsdp`` overwrites its shared state (``AcceleratorState._shared_state``,
``PartialState._shared_state``) to make it FSDP with that plugin. ``PRIVATE_NAMES`` lists what it
relies on and ``problems()`` names the one a new accelerate changed.
"""

from __future__ import annotations

import importlib

# What promote_to_fsdp relies on: (module, object in it, attribute of that object or None).
PRIVATE_NAMES = (
    ("accelerate.state", "AcceleratorState", "_shared_state"),
    ("accelerate.state", "PartialState", "_shared_state"),
    ("accelerate.utils", "DistributedType", "MULTI_CPU"),
    ("accelerate.utils", "DistributedType", "FSDP"),
    ("accelerate.utils", "FullyShardedDataParallelPlugin", None),
)
# Keys of the shared state it overwrites (present once a state exists; fsdp_plugin is added).
STATE_KEYS = ("distributed_type",)


def problems() -> list[str]:
    """The accelerate names ``promote_to_fsdp`` needs that are missing (empty when all are there)."""
    missing = []
    for module_name, obj_name, attr in PRIVATE_NAMES:
        try:
            obj = getattr(importlib.import_module(module_name), obj_name, None)
        except ImportError:
            obj = None
        if obj is None or (attr is not None and not hasattr(obj, attr)):
            missing.append(".".join(x for x in (module_name, obj_name, attr) if x))
    return missing


def is_multi_cpu(state) -> bool:
    from accelerate.utils import DistributedType

    return state.distributed_type == DistributedType.MULTI_CPU


def promote_to_fsdp() -> None:
    """Make the shared accelerator state FSDP, with the plugin the launcher's FSDP_* environment describes."""
    from accelerate.state import AcceleratorState, PartialState
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    missing = [k for k in STATE_KEYS if k not in AcceleratorState._shared_state]
    if missing:
        raise RuntimeError(f"accelerate's AcceleratorState no longer holds {missing}: beam_sft.compat.accelerate_state "
                           "needs updating for this accelerate version")
    plugin = FullyShardedDataParallelPlugin()  # from the launcher's FSDP_* environment
    AcceleratorState._shared_state["distributed_type"] = DistributedType.FSDP
    AcceleratorState._shared_state["fsdp_plugin"] = plugin
    PartialState._shared_state["distributed_type"] = DistributedType.FSDP
