"""What ``lora.target_modules`` names, spelled out as full module names so it means what it says.

In Beam, ``gate_proj`` is two things: the attention's sigmoid output gate (``self_attn.gate_proj``)
and the dense layers' SwiGLU gate (``mlp.gate_proj``); ``mlp.gate`` is the router; and PEFT maps the
short names ``gate_proj``/``up_proj``/``down_proj`` onto the fused expert tensors of some models
(its transformers-v4 weight conversion). Short names are ambiguous there, so the presets resolve to
the exact modules of the model at hand:

* ``beam-attention``: every linear map of every attention block (``q_proj``, ``k_proj``, ``v_proj``,
  ``o_proj`` and the output gate ``self_attn.gate_proj``);
* ``beam-attention-mlp``: those and the dense layers' MLP (``mlp.gate_proj``, ``up_proj``, ``down_proj``);
* ``all-linear`` (any MoE model): every linear layer but the output head and the routers.

The experts come with ``lora.experts: true`` (PEFT ``target_parameters`` on the fused tensors);
routers never get an adapter (``lora.train_routers`` trains them in full instead).

**PEFT renames.** On a model transformers converts from per-expert checkpoints (Beam, DeepSeek-V3,
Qwen-MoE: ``transformers.conversion_mapping``), peft 0.21 rewrites every ``target_modules`` entry
whose last name is ``gate_proj``, ``up_proj`` or ``down_proj`` (full names too) into the fused expert
tensors, and ``gate`` into the router's weight (measured: ``all-linear`` spelled out gave Beam's
attention output gate and dense MLP no adapter and its experts one instead; PEFT's own ``all-linear``
adds the router). ``resolve`` therefore hands those linear layers to PEFT as parameters
(``<module>.weight`` in ``target_parameters``), which it leaves alone, saves, reloads and merges like
any adapter; PEFT applies no dropout to a parameter adapter, so they need ``lora.dropout: 0``.
"""

from __future__ import annotations

import difflib

from beam_sft.errors import ConfigError

PRESETS = {
    "beam-attention": "q_proj, k_proj, v_proj, o_proj and the output gate self_attn.gate_proj of every layer",
    "beam-attention-mlp": "beam-attention and the dense layers' mlp.gate_proj, mlp.up_proj, mlp.down_proj",
}
PRESET_PREFIX = "beam-"


def is_preset(target_modules) -> bool:
    return isinstance(target_modules, str) and target_modules.startswith(PRESET_PREFIX)


def check_preset_name(target_modules) -> None:
    """Refuse an unknown ``beam-*`` preset at recipe load (ConfigError with the key path)."""

    if is_preset(target_modules) and target_modules not in PRESETS:
        known = "; ".join(f"{k}: {v}" for k, v in PRESETS.items())
        raise ConfigError("lora.target_modules", f"unknown preset {target_modules!r} (known: {known})")


# Last names peft rewrites into fused experts / the router on converted MoE models (see above).
RENAMED_BY_PEFT = ("gate_proj", "up_proj", "down_proj", "gate", "w1", "w2", "w3")


def resolve(target_modules, model, layout) -> tuple[list[str] | str, list[str]]:
    """``(target_modules, target_parameters)`` for PEFT: presets and ``all-linear`` as full module
    names, and on a model whose names PEFT rewrites, the linear layers it would rewrite as parameters."""
    names = _module_names(target_modules, model, layout)
    if not _peft_renames(model) or isinstance(names, str):
        return names, []
    linear = set(linear_names(model, exclude=[]))
    kept, as_parameters = [], []
    for target in names:
        hits = sorted(n for n in linear if n == target or n.endswith("." + target))
        if hits and target.rsplit(".", 1)[-1] in RENAMED_BY_PEFT:
            as_parameters.extend(f"{n}.weight" for n in hits)
        else:
            kept.append(target)
    return kept, list(dict.fromkeys(as_parameters))


def _peft_renames(model) -> bool:
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    try:
        from transformers.conversion_mapping import get_checkpoint_conversion_mapping
    except ImportError:  # an older transformers: PEFT converts nothing either
        return False
    return model_type is not None and get_checkpoint_conversion_mapping(model_type) is not None


def _module_names(target_modules, model, layout):

    routers = list(layout.routers) if layout is not None else []
    if is_preset(target_modules):
        check_preset_name(target_modules)
        model_type = getattr(getattr(model, "config", None), "model_type", None)
        if model_type != "beam":
            raise ConfigError("lora.target_modules", f"{target_modules!r} is a preset for Beam (model_type beam); "
                                                     f"this model is {model_type!r}: list its modules instead")
        blocks = list(layout.blocks) if layout is not None else []
        names = linear_names(model, exclude=routers + blocks)
        attention = [n for n in names if ".self_attn." in n]
        if target_modules == "beam-attention":
            return attention
        return attention + [n for n in names if ".mlp." in n]
    if routers and isinstance(target_modules, str) and target_modules.lower() == "all-linear":
        # Spelled out without the routers: PEFT's own expansion, through its weight-conversion
        # mapping, puts an adapter on DeepSeek-V3's router (measured with peft 0.21).
        return linear_names(model, exclude=routers)
    if isinstance(target_modules, (list, tuple)):
        _check_named(target_modules, model)
    return target_modules


def _check_named(targets, model) -> None:
    """Each listed module name matches a module as PEFT matches it (the whole name, or its last parts):
    PEFT refuses a name that matches none only once the trainer wraps the model, with a traceback."""
    names = [n for n, _ in model.named_modules() if n]
    for target in targets:
        if isinstance(target, str) and not any(n == target or n.endswith("." + target) for n in names):
            leaves = sorted({n.rsplit(".", 1)[-1] for n in linear_names(model, exclude=[])})
            close = difflib.get_close_matches(target, leaves, n=1)
            hint = f" (did you mean {close[0]}?)" if close else f" (its linear layers: {', '.join(leaves[:12])})"
            raise ConfigError("lora.target_modules", f"{target!r} names no module of this model{hint}")


def linear_names(model, *, exclude: list[str]) -> list[str]:
    """The full names of the model's linear layers outside ``exclude`` and the output head (full names:
    PEFT turns the short names gate_proj/up_proj/down_proj into fused-expert targets on some models)."""
    import torch

    head = model.get_output_embeddings()
    names = set()
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and module is not head \
                and not any(name == r or name.startswith(r + ".") for r in exclude):
            names.add(name)
    return sorted(names)
