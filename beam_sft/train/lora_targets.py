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
import re

from beam_sft.compat import weight_conversion
from beam_sft.errors import ConfigError
from beam_sft.train.moe import ndim

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
    return weight_conversion.converts_on_load(getattr(getattr(model, "config", None), "model_type", None))


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
    return target_modules


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


# --- every name the lora section lists matches the model, as PEFT will match it ------------------------
# PEFT refuses a target_modules list only when none of its names matches, with a traceback once the
# trainer wraps the model; a modules_to_save or target_parameters name that matches nothing it skips
# without a word (that name trains nothing). check_names runs where the model is known, before training
# (the trainer's lora_config, every process); plan matches --lora-save by the same rule.


def listed_matches(target: str, name: str) -> bool:
    """PEFT's rule for a listed ``target_modules`` or ``target_parameters`` entry: the whole name, or
    its last dotted parts (``self_attn.q_proj`` matches ``model.layers.0.self_attn.q_proj``)."""
    return name == target or name.endswith("." + target)


def saved_matches(target: str, name: str) -> bool:
    """PEFT's rule for a ``modules_to_save`` entry (``peft.utils.other._set_trainable``): the module's
    full name ends with it as a plain string, so ``norm`` is every ``*norm`` module."""
    return name.endswith(target)


def unmatched(key: str, target: str, valid: list[str], what: str) -> ConfigError:
    """The one refusal of a listed name that matches nothing: the key, the name, a few valid ones."""
    close = difflib.get_close_matches(target, valid, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    more = ", ..." if len(valid) > 12 else ""
    return ConfigError(key, f"{target!r} names no {what} of this model ({hint}its {what}s: "
                            f"{', '.join(valid[:12])}{more})")


def check_names(lora, model) -> None:
    """Refuse (ConfigError at its key) a ``lora.target_modules``, ``lora.target_parameters`` or
    ``lora.modules_to_save`` name that matches nothing of ``model`` as PEFT matches it."""
    modules = [n for n, _ in model.named_modules() if n]
    targets = lora.target_modules
    if isinstance(targets, (list, tuple)):
        linear = sorted({n.rsplit(".", 1)[-1] for n in linear_names(model, exclude=[])})
        for target in targets:
            if not any(listed_matches(target, n) for n in modules):
                raise unmatched("lora.target_modules", target, linear, "module")
    elif isinstance(targets, str) and not is_preset(targets) and targets.lower() != "all-linear":
        _check_pattern(targets, modules, linear_names(model, exclude=[]))
    if lora.target_parameters:
        parameters = [n for n, _ in model.named_parameters()]
        valid = sorted({".".join(n.split(".")[-3:]) for n, p in model.named_parameters() if ndim(p) == 3}) \
            or sorted({".".join(n.split(".")[-2:]) for n in parameters})
        for target in lora.target_parameters:
            if not any(listed_matches(target, n) for n in parameters):
                raise unmatched("lora.target_parameters", target, valid, "parameter")
    if lora.modules_to_save:
        leaves = sorted({n.rsplit(".", 1)[-1] for n in modules if not n.rsplit(".", 1)[-1].isdigit()})
        for target in lora.modules_to_save:
            if not any(saved_matches(target, n) for n in modules):
                raise unmatched("lora.modules_to_save", target, leaves, "module")


def _check_pattern(pattern: str, modules: list[str], linear: list[str]) -> None:
    """PEFT reads a ``target_modules`` string other than ``all-linear`` as a regular expression that
    must match a module's full name."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ConfigError("lora.target_modules", f"{pattern!r}: PEFT reads a string as a regular expression over "
                                                 f"full module names, and this one does not compile ({exc})") from None
    if not any(compiled.fullmatch(n) for n in modules):
        example = f" such as {linear[0]}" if linear else ""
        raise ConfigError("lora.target_modules", f"{pattern!r} matches no module of this model: PEFT reads a string "
                                                 f"as a regular expression over full module names{example} "
                                                 "(or list module names instead)")
