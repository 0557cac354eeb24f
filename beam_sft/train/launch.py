"""The launchers: ONE table, the single place a launcher is added, and the one module that asks
accelerate (its environment, its state's distributed type, its config files) how a run is launched.

A launcher is a strategy of the memory planner (``plan --strategy``) and the accelerate configs that
start it: a YAML file named after it in ``configs/accelerate/``, its ``cpu-`` twin (the same path on CPU processes over
gloo, for tests) and ``multinode-`` variants. Expert parallelism (``model.ep_size`` > 1) is not a
launcher of its own: it is the plain ``ddp`` launch with transformers sharding the experts at load
(train/expert_parallel.py asks ``strategy_from_environment`` for that).

>>> STRATEGIES
('zero3', 'zero2', 'fsdp2', 'ddp')
>>> strategy_from_environment({"ACCELERATE_USE_FSDP": "true"}), strategy_from_environment({})
('fsdp2', 'ddp')
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beam_sft.config_utils import load_json_config


@dataclass(frozen=True)
class Launcher:
    strategy: str  # the planner's name, and the config file's stem (without cpu-/multinode-)
    distributed_type: str  # what its accelerate config says
    zero_stage: int | None = None  # DeepSpeed: the stage of the config's deepspeed JSON


# The order is plan --strategy's (its default first).
LAUNCHERS: tuple[Launcher, ...] = (
    Launcher("zero3", "DEEPSPEED", zero_stage=3),
    Launcher("zero2", "DEEPSPEED", zero_stage=2),
    Launcher("fsdp2", "FSDP"),
    Launcher("ddp", "MULTI_GPU"),
)
STRATEGIES: tuple[str, ...] = tuple(x.strategy for x in LAUNCHERS)
# A ZeRO stage a DeepSpeed JSON may name -> the strategy whose memory profile it has (stage 1: zero2's).
_STAGES = {"3": "zero3", "2": "zero2", "1": "zero2"}


def _true(env, name: str) -> bool:
    return str(env.get(name, "false")).lower() in ("true", "1", "yes")


def strategy_from_environment(env=None) -> str:
    """The strategy ``accelerate launch`` set up for this process (from its environment)."""
    env = os.environ if env is None else env
    if env.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true":
        stage = env.get("ACCELERATE_DEEPSPEED_ZERO_STAGE")
        config_file = env.get("ACCELERATE_DEEPSPEED_CONFIG_FILE")
        if config_file and Path(config_file).is_file():
            stage = str(load_json_config(config_file).get("zero_optimization", {}).get("stage", stage))
        return _STAGES.get(str(stage), "ddp")
    if env.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
        return "fsdp2"
    return "ddp"


def fsdp_requested(env=None) -> bool:
    """The launcher asked for FSDP (``ACCELERATE_USE_FSDP``), whatever the state became."""
    return _true(os.environ if env is None else env, "ACCELERATE_USE_FSDP")


def cpu_requested(env=None) -> bool:
    """The launcher asked for CPU processes (``ACCELERATE_USE_CPU``: the cpu- configs)."""
    return _true(os.environ if env is None else env, "ACCELERATE_USE_CPU")


def distributed_type(accelerator) -> str:
    """The accelerator's distributed type by name (``FSDP``, ``DEEPSPEED``, ``MULTI_CPU``, ...)."""
    return str(accelerator.distributed_type).split(".")[-1]


def is_fsdp(accelerator) -> bool:
    """The model is (or will be) wrapped by FSDP in this run."""
    return "FSDP" in str(accelerator.distributed_type)


def launcher_of_config(config: dict[str, Any], root: Path) -> Launcher:
    """The one launcher an accelerate config file (parsed; relative paths from ``root``) starts."""
    kind = config.get("distributed_type")
    if kind == "MULTI_CPU":  # a cpu- twin of ddp.yaml
        kind = "MULTI_GPU"
    stage = None
    if kind == "DEEPSPEED":
        file = (config.get("deepspeed_config") or {}).get("deepspeed_config_file")
        stage = load_json_config(root / file).get("zero_optimization", {}).get("stage") if file else None
    found = [x for x in LAUNCHERS if x.distributed_type == kind and x.zero_stage == stage]
    if len(found) != 1:
        raise ValueError(f"distributed_type {kind!r}, ZeRO stage {stage!r}: {len(found)} launchers match")
    return found[0]
