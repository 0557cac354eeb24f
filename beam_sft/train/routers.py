"""The router guarantees of bias-balanced mixtures of experts (Beam, DeepSeek-V3) in training.

Beam's router (``mlp.gate``, ``BeamTopKRouter``) scores every expert with a sigmoid of an fp32
linear map, adds ``e_score_correction_bias`` (a buffer) to choose the experts, and weights them by
the unbiased scores. The model declares both tensors ``_keep_in_fp32_modules_strict``. Fine-tuning
must keep what that design relies on:

* **No load-balancing loss.** Such a router is balanced by its bias, not by a softmax aux loss,
  and the model has none (its config declares no ``router_aux_loss_coef``). TRL would still add
  Mixtral's softmax load-balancing loss, computed from these router logits, for any non-zero
  ``sft.router_aux_loss_coef``: ``check_aux_loss`` refuses that. Left out, TRL reads the
  coefficient from the config, where there is none: 0, no aux loss.
* **fp32 routing.** ``route_in_fp32`` runs each fp32-strict router with autocast off, so mixed
  precision (DDP's autocast) cannot run its linear map in bf16; ``check_precision`` refuses the
  launchers that would hold or gather the router in another dtype (FSDP2 with mixed precision
  all-gathers every parameter of a layer in bf16; FSDP2 needs one dtype for a layer's parameters,
  so a bf16 model with fp32 routers cannot shard), and ``precision_problems`` checks the wrapped
  model's own router tensors (DeepSpeed keeps ``_keep_in_fp32_modules_strict`` tensors in fp32).
* **The correction bias unchanged.** The published Beam SFT recipes keep its update rate at zero;
  here nothing updates it (a buffer: no gradient, no optimizer state). ``BiasSnapshot`` holds it
  bit for bit from the load and compares the wrapped model's before step 1 and at the save.
"""

from __future__ import annotations

import functools
import re

from beam_sft.compat import model_config
from beam_sft.errors import BeamError, ConfigError, PreflightError
from beam_sft.train import launch

BIAS = "e_score_correction_bias"


def _text_config(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def bias_balanced(config) -> bool:
    """A mixture of experts (its config has ``output_router_logits``) that declares no load-balancing
    loss (no ``router_aux_loss_coef``): Beam and DeepSeek-V3, whose routers a correction bias balances."""
    text = _text_config(config)
    return hasattr(text, "output_router_logits") and not hasattr(text, "router_aux_loss_coef")


def check_aux_loss(config, sft: dict) -> None:
    """Refuse a non-zero ``sft.router_aux_loss_coef`` on a bias-balanced router (ConfigError)."""
    coef = sft.get("router_aux_loss_coef")
    if coef and bias_balanced(config):
        kind = getattr(_text_config(config), "model_type", "this model")
        raise ConfigError(
            "sft.router_aux_loss_coef",
            f"{coef!r} is refused for {kind}: its routers choose experts by sigmoid scores plus a correction "
            "bias (e_score_correction_bias) that keeps the load balanced, and the model has no load-balancing "
            "loss; TRL would add Mixtral's softmax load-balancing loss on these router logits, a term the "
            "model never trained with. Leave the key out or set it to 0",
        )


def strict_fp32_names(model) -> list[str]:
    """Full names of the parameters and buffers ``model`` declares ``_keep_in_fp32_modules_strict``."""
    keep = model_config.keep_in_fp32_strict(model)
    if not keep:
        return []
    pattern = re.compile("|".join(re.escape(k).replace(r"\*", ".*") for k in keep))
    names = [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()]
    return [n for n in names if pattern.search(n)]


def fp32_routers(model, layout) -> list[str]:
    """The routers of ``layout`` whose weight ``model`` keeps in fp32 by declaration."""
    strict = set(strict_fp32_names(model))
    return [r for r in layout.routers if f"{r}.weight" in strict]


def route_in_fp32(model, layout) -> int:
    """Run every fp32-strict router with autocast off (its model code computes in fp32; autocast would
    run its linear map in bf16). Returns how many routers it wrapped."""
    wrapped = 0
    for name in fp32_routers(model, layout):
        router = model.get_submodule(name)
        if getattr(router, "beam_sft_fp32_routing", False):
            continue
        router.forward = _without_autocast(router.forward)
        router.beam_sft_fp32_routing = True
        wrapped += 1
    return wrapped


def _without_autocast(forward):
    @functools.wraps(forward)
    def fp32_forward(*args, **kwargs):
        import torch

        device = next((a.device.type for a in (*args, *kwargs.values()) if hasattr(a, "device")), "cpu")
        with torch.autocast(device_type=device, enabled=False):
            return forward(*args, **kwargs)

    return fp32_forward


def check_precision(trainer, model, layout) -> None:
    """Before the launcher wraps the model: refuse set-ups that would hold or compute a fp32-strict
    router in another dtype (PreflightError saying why)."""
    import torch

    names = strict_fp32_names(model)
    if not names or not layout.is_moe:
        return
    tensors = dict(model.named_parameters())
    tensors.update(dict(model.named_buffers()))
    loaded = sorted({str(tensors[n].dtype) for n in names if tensors[n].dtype != torch.float32})
    if loaded:
        raise PreflightError(f"the router tensors {names[:2]} ... loaded as {', '.join(loaded)}, not float32 "
                             "as the model declares (_keep_in_fp32_modules_strict)")
    accelerator = trainer.accelerator
    if not launch.is_fsdp(accelerator):
        return  # DDP: autocast only (route_in_fp32); DeepSpeed keeps these tensors fp32 (checked after wrapping)
    if accelerator.mixed_precision in ("bf16", "fp16"):
        raise PreflightError(
            f"FSDP2 with mixed_precision {accelerator.mixed_precision} is refused on this model: it all-gathers "
            "every parameter of a decoder layer in that dtype for the forward, the router's too, so experts would "
            "be chosen by rounded router weights (the model keeps them float32). Use DeepSpeed ZeRO-3 (it keeps "
            "the model's fp32 tensors fp32 under bf16), or FSDP2 with mixed_precision 'no' and model.dtype float32"
        )
    others = sorted({str(p.dtype) for p in model.parameters() if p.dtype != torch.float32})
    if others:
        raise PreflightError(
            f"FSDP2 is refused with model.dtype {', '.join(others)} on this model: transformers keeps its routers "
            "float32 (_keep_in_fp32_modules_strict) and FSDP2 shards a decoder layer's parameters in one dtype. "
            "Load model.dtype float32, or use DeepSpeed ZeRO-3"
        )


def _router_tensors(wrapped, layout) -> list:
    suffixes = tuple(f"{r}.weight" for r in layout.routers) + tuple(f"{r}.{BIAS}" for r in layout.routers)
    return [(n, t) for n, t in (*wrapped.named_parameters(), *wrapped.named_buffers()) if n.endswith(suffixes)]


def router_dtypes(wrapped, layout) -> list[str]:
    """The dtypes the router weights and correction biases of ``wrapped`` hold (after wrapping)."""
    return sorted({str(t.dtype) for _, t in _router_tensors(wrapped, layout)})


def precision_problems(wrapped, layout) -> list[str]:
    """After the launcher's wrapping: every router weight and correction bias of ``wrapped`` is float32."""
    import torch

    found = _router_tensors(wrapped, layout)
    bad = [f"{n} is {t.dtype}" for n, t in found if t.dtype != torch.float32]
    if bad:
        return [f"router tensors are not float32 after the launcher wrapped the model: {', '.join(bad[:3])}"]
    return []


class BiasSnapshot:
    """Every ``e_score_correction_bias`` of a model as loaded, to compare bit for bit later."""

    def __init__(self, model):
        self.values = {n: b.detach().clone().cpu() for n, b in model.named_buffers() if n.endswith(BIAS)}

    def __len__(self) -> int:
        return len(self.values)

    def changes(self, model) -> list[str]:
        """Names of the biases of ``model`` (wrapped or not) that differ from the snapshot, or are missing."""
        import torch

        now = {n: b for n, b in model.named_buffers() if n.endswith(BIAS)}
        out = []
        for name, value in self.values.items():
            match = next((b for n, b in now.items() if n == name or n.endswith("." + name)), None)
            if match is None:
                out.append(f"{name} (missing)")
            elif match.dtype != value.dtype or not torch.equal(match.detach().cpu(), value):
                out.append(name)
        return out

    def require_unchanged(self, model, when: str) -> None:
        changed = self.changes(model)
        if changed:
            raise BeamError(f"{BIAS} changed {when}: {changed[:3]} (fine-tuning must leave the routers' correction "
                            "bias as the checkpoint has it)")
