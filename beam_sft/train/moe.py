"""Mixture-of-experts models in training: where the blocks, routers and fused expert tensors are.

transformers 5.24 stores a block's experts as fused 3-D tensors (``experts.gate_up_proj`` of shape
``[experts, ., .]``) beside a router (``router`` in gpt-oss, ``gate`` in DeepSeek-V3). Training needs:

* **ZeRO-3 leaf modules.** ZeRO-3 gathers parameters module by module, in hooks. A rank whose tokens
  reach none of an expert's submodules would skip that gather while the other ranks wait in it:
  a deadlock. Marking each MoE block a ZeRO-3 leaf (``deepspeed.utils.set_z3_leaf_modules``) makes
  every rank gather the whole block at its entry, whatever the routing. FSDP2 shards per decoder
  layer, so every rank gathers the whole layer anyway.
* **LoRA on the experts.** PEFT reaches fused tensors through ``LoraConfig(target_parameters=...)``
  (a ``ParamWrapper``), not ``target_modules``.
* **Routers frozen under LoRA.** ``all-linear`` would put an adapter on a router that is an
  ``nn.Linear`` (Mixtral, Qwen-MoE); routers are excluded unless ``lora.train_routers``.

The aux (load-balancing) loss is TRL's: ``SFTTrainer`` adds ``router_aux_loss_coef x aux_loss`` when
the model config declares a coefficient (``sft.router_aux_loss_coef`` overrides it, 0 turns it off)
and logs it as ``aux_loss``.
"""

from __future__ import annotations

from dataclasses import dataclass

from beam_sft.errors import ConfigError

ROUTER_NAMES = ("router", "gate")  # the router's attribute name in the MoE blocks transformers ships


@dataclass(frozen=True)
class MoeLayout:
    blocks: tuple[str, ...]  # module names of the MoE blocks (router + experts)
    routers: tuple[str, ...]  # module names of their routers
    expert_parameters: tuple[str, ...]  # fused 3-D expert tensors, as "<block attr>.experts.<param>" suffixes

    @property
    def is_moe(self) -> bool:
        return bool(self.blocks)


def moe_layout(model) -> MoeLayout:
    """The MoE blocks of ``model`` (empty for a dense model).

    A block is a module with an ``experts`` child that holds 3-D parameters and a router child.
    """
    blocks, routers, params = [], [], []
    for name, module in model.named_modules():
        experts = getattr(module, "experts", None)
        if experts is None or not hasattr(experts, "named_parameters"):
            continue
        fused = [p for p, value in experts.named_parameters(recurse=False) if ndim(value) == 3]
        router = next((r for r in ROUTER_NAMES if getattr(module, r, None) is not None), None)
        if not fused or router is None:
            continue
        blocks.append(name)
        routers.append(f"{name}.{router}" if name else router)
        attr = name.rsplit(".", 1)[-1]
        params.extend(f"{attr}.experts.{p}" for p in fused)
    return MoeLayout(tuple(blocks), tuple(routers), tuple(dict.fromkeys(params)))


def experts_to_adapt(layout: MoeLayout, *, key: str, model: str) -> tuple[str, ...]:
    """The fused expert tensors LoRA on the experts adapts (PEFT ``target_parameters`` suffixes), or a
    ConfigError at ``key`` for a model that has none. The one rule: ``plan --lora-experts`` (on the
    meta model) and the trainer (``lora.experts``, on the loaded one) both ask it, so plan never
    plans what train refuses."""
    if not layout.expert_parameters:
        raise ConfigError(key, f"{model} has no fused expert tensors to adapt (not a mixture of experts, or its "
                               "experts are linear modules): leave it out, target_modules adapts linear layers")
    return layout.expert_parameters


def ndim(param) -> int:
    # Under ZeRO-3 a partitioned parameter is empty; its real shape is ds_shape.
    return len(getattr(param, "ds_shape", param.shape))


def mark_zero3_leaves(model) -> int:
    """Make every MoE block a ZeRO-3 leaf (gathered whole at its entry); returns the number marked."""
    layout = moe_layout(model)
    if not layout.is_moe:
        return 0
    from deepspeed.utils import set_z3_leaf_modules_by_name

    modules, _ = set_z3_leaf_modules_by_name(model, list(layout.blocks))
    return len(modules)


def router_parameters(model, layout: MoeLayout | None = None) -> list[str]:
    """Names of the trainable parameters that belong to a router (with a PEFT prefix, if any)."""
    layout = layout or moe_layout(_base(model))
    out = []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if any(f"{router}." in name or name.endswith(router) for router in layout.routers):
            out.append(name)
    return out


def _base(model):
    return model.get_base_model() if hasattr(model, "get_base_model") else model
