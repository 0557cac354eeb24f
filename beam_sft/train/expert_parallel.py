"""``model.ep_size``: expert parallelism through transformers' own ``DistributedConfig``.

With ``ep_size`` E > 1 the model is loaded with ``from_pretrained(...,
distributed_config=DistributedConfig(ep_size=E, fsdp_size=WORLD))``: the routed experts of every layer
are split over EP groups of E processes (each holds ``num_experts / E`` of them, tokens reach them by
all-to-all) and everything else is FSDP2-sharded over all processes. The Trainer sees
``is_distributed_loading_by_transformers`` and neither accelerate nor DeepSpeed wraps the model
again, so the launch is a plain multi-process one (``configs/accelerate/ddp.yaml``, or its ``cpu-``
twin), never a ZeRO or FSDP config. Measured on 2 CPU processes (``tests/train/test_beam_ep.py``:
logits and one AdamW step equal the unsharded model's; a packed run's losses and saved weights
equal DDP's). Refused with it: LoRA (not measured), resuming, and checkpoints with optimizer state
(transformers' Trainer keeps none for a model sharded at load: ``sft.save_only_model: true``).
"""

from __future__ import annotations

from typing import Any

from beam_sft.errors import ConfigError
from beam_sft.train.launch import strategy_from_environment


def check_recipe(recipe) -> None:
    """What a recipe alone can tell: the size, and the parts not proven with it."""
    ep = recipe.model.ep_size
    if isinstance(ep, bool) or not isinstance(ep, int) or ep < 1:
        raise ConfigError("model.ep_size", f"must be an integer of at least 1, got {ep!r}")
    if ep == 1:
        return
    if recipe.lora is not None:
        raise ConfigError("model.ep_size", "expert parallelism with LoRA is not supported (PEFT over the "
                                           "sharded experts is untested): drop the lora section or set ep_size 1")
    # transformers' Trainer checkpoints no optimizer state of a model sharded at load (trainer.py,
    # "Resuming is not supported for models sharded at load time"): say so before anything loads.
    sft = recipe.sft
    if sft.get("resume_from_checkpoint"):
        raise ConfigError("sft.resume_from_checkpoint", "a run with model.ep_size > 1 cannot resume: transformers' "
                                                        "Trainer keeps no optimizer state for a model sharded at load")
    if str(sft.get("save_strategy", "steps")) != "no" and not sft.get("save_only_model"):
        raise ConfigError("sft.save_strategy", "with model.ep_size > 1 checkpoints hold the model only: set "
                                               "sft.save_only_model: true (or sft.save_strategy: no); transformers' "
                                               "Trainer keeps no optimizer state for a model sharded at load")


def check_launch(recipe, config, *, world_size: int, strategy: str | None = None) -> None:
    """At launch, before the weights load: the EP group divides the processes and the model's
    experts, and no launcher shards the model too (``strategy``: from the launcher's environment)."""
    ep = recipe.model.ep_size
    if ep == 1:
        return
    from beam_sft.train.model_shape import NUM_EXPERTS_KEYS

    strategy = strategy or strategy_from_environment()
    if strategy != "ddp":
        raise ConfigError("model.ep_size", f"the model is sharded at load by transformers; launch with a plain "
                                           f"multi-process accelerate config (ddp.yaml), not {strategy}")
    if world_size % ep:
        raise ConfigError("model.ep_size", f"{ep} must divide the {world_size} processes")
    text = config.get_text_config()
    experts = next((getattr(text, k) for k in NUM_EXPERTS_KEYS if isinstance(getattr(text, k, None), int)), None)
    if not experts or experts % ep:
        raise ConfigError("model.ep_size", f"{ep} must divide the model's routed experts "
                                           f"({experts or 'none: not a mixture of experts'})")


def distributed_config(recipe) -> dict[str, Any]:
    """``from_pretrained`` keyword arguments for the recipe's expert parallelism ({} without it)."""
    ep = recipe.model.ep_size
    if ep == 1:
        return {}
    import torch.distributed as dist
    from transformers.distributed import DistributedConfig

    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    return {"distributed_config": DistributedConfig(ep_size=ep, fsdp_size=world)}


def held_experts(model) -> tuple[int, int]:
    """(experts this process holds, experts there are) in the first routed-expert tensor of ``model``."""
    for name, param in model.named_parameters():
        if ".experts." in name and param.dim() == 3:
            local = param.to_local() if hasattr(param, "to_local") else param
            return int(local.shape[0]), int(param.shape[0])
    return 0, 0


def announce(model, recipe) -> None:
    """One line per process: what expert parallelism left it (stderr; the tests read it)."""
    if recipe.model.ep_size == 1:
        return
    import sys

    import torch.distributed as dist

    held, total = held_experts(model)
    rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    print(f"beam-sft train: expert parallelism (ep_size {recipe.model.ep_size}): rank {rank} holds {held} of "
          f"{total} experts a layer", file=sys.stderr, flush=True)
