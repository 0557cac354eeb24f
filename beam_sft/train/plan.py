"""``beam-sft plan``: exact parameter counts and memory per GPU, before anything is loaded.

The counts are exact: the model is built from its config on the ``meta`` device (shapes, no
storage), so what is counted is what ``from_pretrained`` would build. Tied weights count once.
For a mixture of experts, the parameters of routed expert modules (a module named ``experts``;
shared experts live in ``shared_experts`` and count as always active) are active in the fraction
``top_k / num_experts``; everything else is active for every token (embeddings included).

Memory per GPU is a model of what each strategy holds, component by component:

===========  =====================================  ==========================================
strategy     full fine-tune, bytes per parameter    sharded over
===========  =====================================  ==========================================
ddp          weights w, gradients w, AdamW 2w        nothing (every GPU holds everything)
zero3        weights w, gradients w, AdamW 12        all GPUs (fp32 master copy + two fp32 moments)
zero2        the same                                gradients and AdamW state only
fsdp2        weights 4, gradients 4, AdamW 8         all GPUs (accelerate upcasts trainable
                                                     parameters to fp32 under mixed precision)
===========  =====================================  ==========================================

``w`` is the model dtype's size (2 for bf16). With LoRA the base weights are frozen (weights only,
in ``w``, sharded like the strategy) and every adapter parameter costs 16 bytes (fp32 weight,
gradient, two moments). Activations are an estimate (stated in :func:`activation_bytes`);
buffers are the model's buffers plus the gathered working set of a sharded strategy (two decoder
layers unsharded: the one running and the one prefetched) or DDP's gradient buckets; a fixed
reserve stands for the CUDA context, NCCL buffers and allocator fragmentation.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from beam_sft.errors import BeamError, ConfigError, PreflightError

GIB = 1024**3
STRATEGIES = ("zero3", "zero2", "fsdp2", "ddp")
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
# Names a config uses for the number of routed experts and for how many each token uses.
NUM_EXPERTS_KEYS = ("num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts")
TOP_K_KEYS = ("num_experts_per_tok", "moe_topk", "top_k", "num_experts_per_token")
_EXPERT_MODULE = re.compile(r"(^|\.)experts(\.\d+)?$")


@dataclass(frozen=True)
class ParamCounts:
    total: int
    active: int  # per token: non-expert + expert * top_k / num_experts
    expert: int  # routed expert parameters (all experts)
    num_experts: int | None
    top_k: int | None
    largest_layer: int  # parameters of the largest decoder layer (the gathered working set)
    buffers_bytes: int

    @property
    def non_expert(self) -> int:
        return self.total - self.expert


@dataclass(frozen=True)
class PlanSetup:
    gpus: int = 8
    gpu_memory_gib: float = 80.0
    gpus_per_node: int = 8
    strategy: str = "zero3"
    dtype: str = "bfloat16"
    lora_r: int | None = None
    lora_experts: bool = False
    max_length: int = 4096
    micro_batch: int = 1
    activation_checkpointing: bool = False
    reserve_gib: float = 3.0

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ConfigError("strategy", f"{self.strategy!r}: expected one of {', '.join(STRATEGIES)}")
        if self.dtype not in DTYPE_BYTES:
            raise ConfigError("dtype", f"{self.dtype!r}: expected one of {', '.join(DTYPE_BYTES)}")
        for name in ("gpus", "gpus_per_node", "max_length", "micro_batch"):
            if getattr(self, name) < 1:
                raise ConfigError(name, f"must be at least 1, got {getattr(self, name)}")
        if self.gpu_memory_gib <= 0:
            raise ConfigError("gpu_memory_gib", "must be positive")
        if self.lora_r is not None and self.lora_r < 1:
            raise ConfigError("lora", f"rank must be at least 1, got {self.lora_r}")


@dataclass
class Plan:
    model: str
    model_type: str
    parameters: dict[str, Any]
    setup: dict[str, Any]
    per_gpu_bytes: dict[str, int]
    total_bytes: int
    usable_bytes: int
    fits: bool
    nodes_needed: int | None  # fewest nodes of gpus_per_node that fit; None: no number of nodes does
    gpus_needed: int | None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["per_gpu_gib"] = {k: round(v / GIB, 3) for k, v in self.per_gpu_bytes.items()}
        out["total_gib"] = round(self.total_bytes / GIB, 3)
        return out


# ---------------------------------------------------------------- the model, from its config only

def load_model_config(source, *, trust_remote_code: bool = False):
    """A transformers config from a config object, a ``config.json`` path, or a model directory/hub id."""
    from transformers import AutoConfig, PretrainedConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if isinstance(source, PretrainedConfig):
        return source
    path = Path(source)
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise BeamError(f"{path}: not a JSON config ({exc})") from exc
        model_type = data.get("model_type")
        if model_type not in CONFIG_MAPPING:
            raise BeamError(f"{path}: unknown or missing model_type {model_type!r}")
        return CONFIG_MAPPING[model_type].from_dict(data)
    try:
        return AutoConfig.from_pretrained(str(source), trust_remote_code=trust_remote_code)
    except OSError as exc:
        raise BeamError(f"{source}: no model config found ({exc})") from exc


def meta_model(config):
    """The model built on the meta device: exact shapes, no memory, no weights read."""
    import torch
    from transformers import AutoModelForCausalLM

    # A config loaded with trust_remote_code carries its code's auto_map; building it needs the same trust.
    trust = bool(getattr(config, "auto_map", None))
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, trust_remote_code=trust)


def _config_int(config, keys) -> int | None:
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for key in keys:
        value = getattr(text, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def count_parameters(config) -> ParamCounts:
    """Exact total and active-per-token parameter counts of the model ``config`` describes."""
    model = meta_model(config)
    num_experts = _config_int(config, NUM_EXPERTS_KEYS)
    top_k = _config_int(config, TOP_K_KEYS)
    expert_modules = {name for name, _ in model.named_modules() if _EXPERT_MODULE.search(name)}
    total = expert = 0
    for name, param in model.named_parameters():  # deduplicates tied weights
        total += param.numel()
        if name.rpartition(".")[0] in expert_modules or any(name.startswith(m + ".") for m in expert_modules):
            expert += param.numel()
    if expert and not (num_experts and top_k):
        raise BeamError(f"{type(model).__name__}: expert parameters found but the config names no "
                        f"expert count ({'/'.join(NUM_EXPERTS_KEYS)}) or top-k ({'/'.join(TOP_K_KEYS)})")
    active = total - expert + (expert * top_k // num_experts if expert else 0)
    layers = [m for n, m in model.named_modules() if re.search(r"\.layers\.\d+$", n)]
    largest = max((sum(p.numel() for p in m.parameters()) for m in layers), default=total)
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    return ParamCounts(total=total, active=active, expert=expert, num_experts=num_experts if expert else None,
                       top_k=top_k if expert else None, largest_layer=largest, buffers_bytes=buffers)


def lora_parameters(config, r: int, *, experts: bool = False) -> int:
    """Adapter parameters of LoRA rank ``r`` on every linear layer but the output head and routers
    (PEFT's ``all-linear``); with ``experts``, also on fused expert tensors (r per expert per side)."""
    import torch

    model = meta_model(config)
    count = 0
    for name, module in model.named_modules():
        leaf = name.rpartition(".")[2]
        if isinstance(module, torch.nn.Linear) and leaf not in ("lm_head", "router", "gate", "score"):
            count += r * (module.in_features + module.out_features)
        if experts and _EXPERT_MODULE.search(name):
            for param in module.parameters(recurse=False):
                if param.dim() == 3:  # (experts, in, out)
                    count += r * param.shape[0] * (param.shape[1] + param.shape[2])
    return count


# ---------------------------------------------------------------- memory per GPU

def _dims(config) -> dict[str, int]:
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    hidden = int(text.hidden_size)
    top_k = _config_int(config, TOP_K_KEYS)
    expert_width = getattr(text, "moe_intermediate_size", None) or getattr(text, "intermediate_size", 4 * hidden)
    if _config_int(config, NUM_EXPERTS_KEYS) and top_k:
        width = top_k * expert_width + (getattr(text, "n_shared_experts", 0) or 0) * expert_width
    else:
        width = getattr(text, "intermediate_size", 4 * hidden)
    return {"hidden": hidden, "mlp_width": int(width), "layers": int(text.num_hidden_layers),
            "vocab": int(text.vocab_size)}


def activation_bytes(config, setup: PlanSetup) -> int:
    """Estimated activation memory of one micro-batch on one GPU.

    Per token and decoder layer, without checkpointing, ``8 h + 4 m`` values are kept for the
    backward (norms, q/k/v/o, residuals: ~8 h; the MLP's gate, up, activation and product over the
    active width ``m``: ~4 m; memory-efficient attention keeps no score matrix); with activation
    checkpointing each layer keeps only its input (``h``) and one layer is recomputed at a time.
    The logits add ``vocab x (w + 8)`` bytes a token (the logits, and their fp32 copy and gradient
    in the loss). An estimate: it sets the margin, the weights and optimizer terms are exact.
    """
    d = _dims(config)
    w = DTYPE_BYTES[setup.dtype]
    tokens = setup.micro_batch * setup.max_length
    per_layer = tokens * w * (8 * d["hidden"] + 4 * d["mlp_width"])
    if setup.activation_checkpointing:
        layers = d["layers"] * tokens * w * d["hidden"] + per_layer
    else:
        layers = d["layers"] * per_layer
    return layers + tokens * d["vocab"] * (w + 8)


def memory_per_gpu(counts: ParamCounts, config, setup: PlanSetup, *, lora_params: int = 0) -> dict[str, int]:
    """Bytes each GPU holds, by component, for ``setup`` over ``setup.gpus`` GPUs."""
    w = DTYPE_BYTES[setup.dtype]
    shards = 1 if setup.strategy == "ddp" else setup.gpus
    weight_shards = 1 if setup.strategy in ("ddp", "zero2") else setup.gpus
    total = counts.total
    if setup.lora_r is None:
        per_param = {"ddp": (w, w, 2 * w), "zero3": (w, w, 12), "zero2": (w, w, 12), "fsdp2": (4, 4, 8)}[setup.strategy]
        weights = math.ceil(total * per_param[0] / weight_shards)
        grads, optim = (math.ceil(total * b / shards) for b in per_param[1:])
        lora = 0
        trainable = total
    else:
        weights, grads, optim = math.ceil(total * w / weight_shards), 0, 0
        lora = math.ceil(lora_params * 16 / shards)
        trainable = lora_params
    if setup.strategy in ("ddp", "zero2"):
        working = trainable * (4 if setup.lora_r is not None else w)  # gradient buckets
    else:
        working = 2 * counts.largest_layer * w  # the running layer and the prefetched one, unsharded
    return {
        "weights": weights,
        "gradients": grads,
        "optimizer": optim,
        "lora": lora,
        "activations": activation_bytes(config, setup),
        "buffers": counts.buffers_bytes + working,
        "reserve": int(setup.reserve_gib * GIB),
    }


def plan(source, setup: PlanSetup = PlanSetup(), *, max_nodes: int = 4096, trust_remote_code: bool = False) -> Plan:
    """Count the model of ``source`` (config, config.json, model dir) and plan ``setup`` on it."""
    import dataclasses

    config = load_model_config(source, trust_remote_code=trust_remote_code)
    counts = count_parameters(config)
    lora_params = lora_parameters(config, setup.lora_r, experts=setup.lora_experts) if setup.lora_r else 0
    per_gpu = memory_per_gpu(counts, config, setup, lora_params=lora_params)
    usable = int(setup.gpu_memory_gib * GIB)
    total = sum(per_gpu.values())
    nodes = None
    if setup.strategy == "ddp":  # nothing is sharded: more GPUs change nothing per GPU
        nodes = 1 if total <= usable else None
        # (zero2 keeps every weight on every GPU: the search below finds its floor too)
    else:
        # Memory per GPU only falls as nodes are added, so the first that fits is the fewest.
        for n in range(1, max_nodes + 1):
            trial = dataclasses.replace(setup, gpus=n * setup.gpus_per_node)
            if sum(memory_per_gpu(counts, config, trial, lora_params=lora_params).values()) <= usable:
                nodes = n
                break
    notes = []
    if counts.expert:
        notes.append(f"active per token: non-expert {counts.non_expert:,} + experts {counts.expert:,} "
                     f"x {counts.top_k}/{counts.num_experts}")
    notes.append("activations are an estimate (see beam_sft/train/plan.py); weights, gradients and "
                 "optimizer state are exact for the strategy")
    return Plan(
        model=str(source) if not hasattr(source, "to_dict") else (getattr(config, "_name_or_path", "") or "config"),
        model_type=str(getattr(config, "model_type", "")),
        parameters={"total": counts.total, "active": counts.active, "expert": counts.expert,
                    "non_expert": counts.non_expert, "num_experts": counts.num_experts, "top_k": counts.top_k,
                    "lora": lora_params},
        setup=asdict(setup),
        per_gpu_bytes=per_gpu,
        total_bytes=total,
        usable_bytes=usable,
        fits=total <= usable,
        nodes_needed=nodes,
        gpus_needed=None if nodes is None else (1 if setup.strategy == "ddp" else nodes * setup.gpus_per_node),
        notes=notes,
    )


def format_plan(p: Plan) -> str:
    params = p.parameters
    lines = [f"model: {p.model} ({p.model_type})",
             f"parameters: total {params['total']:,}  active per token {params['active']:,}"
             + (f"  (experts {params['expert']:,}: {params['num_experts']} routed, top-{params['top_k']})"
                if params["expert"] else "")]
    if params["lora"]:
        lora_label = f"lora r={p.setup['lora_r']}" + (" (+experts)" if p.setup["lora_experts"] else "")
        lines.append(f"{lora_label}: {params['lora']:,} adapter parameters")
    s = p.setup
    lines.append(f"setup: {s['strategy']}, {s['gpus']} GPUs of {s['gpu_memory_gib']:g} GiB "
                 f"({s['gpus_per_node']} a node), {s['dtype']}, micro-batch {s['micro_batch']} x "
                 f"{s['max_length']} tokens, activation checkpointing {'on' if s['activation_checkpointing'] else 'off'}")
    lines.append("memory per GPU (GiB):")
    for name, value in p.per_gpu_bytes.items():
        lines.append(f"  {name:<12}{value / GIB:>12.2f}")
    lines.append(f"  {'total':<12}{p.total_bytes / GIB:>12.2f}   of {p.usable_bytes / GIB:g}")
    lines.append(f"fits: {'yes' if p.fits else 'no'}")
    if p.nodes_needed is None:
        lines.append("nodes needed: none fits" + (" (ddp does not shard: use zero3 or fsdp2)"
                                                   if s["strategy"] == "ddp" else ""))
    else:
        lines.append(f"nodes needed: {p.nodes_needed} ({p.gpus_needed} GPUs)")
    lines.extend(f"note: {n}" for n in p.notes)
    return "\n".join(lines)


# ---------------------------------------------------------------- the pre-flight before loading

def strategy_from_environment(env=None) -> str:
    """The strategy ``accelerate launch`` set up for this process (from its environment)."""
    import os

    env = os.environ if env is None else env
    if env.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true":
        stage = env.get("ACCELERATE_DEEPSPEED_ZERO_STAGE")
        config_file = env.get("ACCELERATE_DEEPSPEED_CONFIG_FILE")
        if config_file and Path(config_file).is_file():
            stage = str(json.loads(Path(config_file).read_text(encoding="utf-8"))
                        .get("zero_optimization", {}).get("stage", stage))
        return {"3": "zero3", "2": "zero2", "1": "zero2"}.get(str(stage), "ddp")
    if env.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
        return "fsdp2"
    return "ddp"


def recipe_setup(recipe, *, world_size: int, gpu_memory_gib: float, strategy: str | None = None) -> PlanSetup:
    """The PlanSetup a recipe describes, for ``world_size`` processes."""
    sft = recipe.sft
    dtype = recipe.model.dtype if recipe.model.dtype != "auto" else ("bfloat16" if sft.get("bf16") else "float32")
    lora = recipe.lora
    return PlanSetup(
        gpus=world_size, gpu_memory_gib=gpu_memory_gib, gpus_per_node=max(1, min(world_size, 8)),
        strategy=strategy or strategy_from_environment(), dtype=dtype,
        lora_r=lora.r if lora is not None else None,
        max_length=int(sft.get("max_length") or 1024), micro_batch=int(sft.get("per_device_train_batch_size") or 8),
        activation_checkpointing=bool(sft.get("activation_checkpointing") or sft.get("gradient_checkpointing")),
        reserve_gib=0.0,  # the free memory measured already excludes the CUDA context
    )


def _any_process(flag: bool) -> bool:
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return flag
    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    value = torch.tensor([int(flag)], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def check_plan_fits(recipe, *, world_size: int, free_bytes: int | None = None, strategy: str | None = None):
    """Refuse a launch whose plan exceeds this GPU's free memory, before any weight is loaded.

    ``free_bytes`` defaults to ``torch.cuda.mem_get_info()`` on the current device; without CUDA
    (and no ``free_bytes``) this is a no-op returning None. Returns the Plan when it checked.
    """
    if free_bytes is None:
        import torch

        if not torch.cuda.is_available():
            return None
        free_bytes = torch.cuda.mem_get_info()[0]
    setup = recipe_setup(recipe, world_size=world_size, gpu_memory_gib=free_bytes / GIB, strategy=strategy)
    result = plan(recipe.model.path, setup, max_nodes=1, trust_remote_code=recipe.model.trust_remote_code)
    if _any_process(not result.fits):  # every process stops together (a lone refusal would hang the rest)
        parts = ", ".join(f"{k} {v / GIB:.2f}" for k, v in result.per_gpu_bytes.items() if v)
        where = "" if not result.fits else "another process has too little free memory; on this one "
        raise PreflightError(
            f"pre-flight failed: {where}the plan for {recipe.model.path} with {setup.strategy} over {world_size} "
            f"processes needs {result.total_bytes / GIB:.2f} GiB per GPU ({parts}) and {free_bytes / GIB:.2f} GiB "
            "is free; add GPUs, enable activation checkpointing, or lower the micro-batch or max_length "
            f"(`beam-sft plan --model {recipe.model.path} ...` prints the fewest nodes that fit)")
    return result
