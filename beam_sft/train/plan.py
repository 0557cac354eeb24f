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
gradient, two moments), its weight sharded like the strategy's weights (whole on every GPU
under zero2). Activations are an estimate (stated in :func:`activation_bytes`);
buffers are the model's buffers plus the gathered working set of a sharded strategy (two decoder
layers unsharded: the one running and the one prefetched) or DDP's gradient buckets; a fixed
reserve stands for the CUDA context, NCCL buffers and allocator fragmentation.

Expert parallelism (``ep_size`` E > 1, fsdp2 only: transformers' ``DistributedConfig(ep_size=E,
fsdp_size=GPUs)``, measured on 2 CPU processes in ``tests/train/test_beam_ep.py``) changes only the
gathered working set: a rank gathers its own ``num_experts / E`` experts of a layer (and the layer's
other parameters), never all of them, and holds the all-to-all buffers of the tokens it sends and
receives. The sharded state is the same (every parameter still lives once over all GPUs).

Bad input (no config, a config that is not an object, a size that is not a positive integer, a
top-k above the expert count, a memory that is not a finite positive number) is one
``BeamError`` line naming the key, never a traceback from inside transformers or torch.
"""

from __future__ import annotations

import dataclasses
import math
import re
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

from beam_sft.errors import BeamError, ConfigError, PreflightError
from beam_sft.train import model_shape
from beam_sft.train.launch import STRATEGIES, strategy_from_environment  # the launchers' table
from beam_sft.train.lora_targets import saved_matches, unmatched
from beam_sft.train.model_shape import (  # the model's config: loaded, checked, built on meta
    NUM_EXPERTS_KEYS,
    TOP_K_KEYS,
    config_int,
    load_model_config,
    meta_model,
    text_config,
)
from beam_sft.train.moe import ROUTER_NAMES, experts_to_adapt, moe_layout

GIB = 1024**3
DEFAULT_MODEL = "BeamConfig(), transformers' defaults for reflection/Beam-1.0-501B-A23B"
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
_EXPERT_MODULE = re.compile(r"(^|\.)experts(\.\d+)?$")
# Bounds of a plan's own numbers (GPUs, tokens): far above any cluster, low enough that no product overflows.
MAX_COUNT = 10**7

# Model-config helpers that moved to train/model_shape.py and that plan itself does not use: their old
# path here works for one release, with a warning (the ones plan uses are its own imports).
MOVED_TO_MODEL_SHAPE = ("SIZE_KEYS", "check_config")


def __getattr__(name: str):
    if name in MOVED_TO_MODEL_SHAPE:
        warnings.warn(f"beam_sft.train.plan.{name} is now beam_sft.train.model_shape.{name}; the old path goes "
                      "in the next release", FutureWarning, stacklevel=2)
        return getattr(model_shape, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _flag(name: str) -> str:
    return "--" + {"gpu_memory_gib": "gpu-memory", "reserve_gib": "reserve"}.get(name, name.replace("_", "-"))


@dataclass(frozen=True)
class ParamCounts:
    total: int
    active: int  # per token: non-expert + expert * top_k / num_experts
    expert: int  # routed expert parameters (all experts)
    num_experts: int | None
    top_k: int | None
    largest_layer: int  # parameters of the largest decoder layer (the gathered working set)
    buffers_bytes: int
    largest_layer_expert: int = 0  # routed expert parameters of that layer (what EP shards)
    lora: int = 0  # adapter parameters, when counted with a LoRA rank
    lora_saved: int = 0  # parameters of PEFT's modules_to_save: trained whole, as copies, beside the adapters

    @property
    def non_expert(self) -> int:
        return self.total - self.expert


# GiB of one GPU or its reserve: far above any device (an H200 has 141), low enough that bytes stay exact ints
MAX_GIB = 1 << 20


@dataclass(frozen=True)
class PlanSetup:
    gpus: int = 8
    gpu_memory_gib: float = 80.0
    gpus_per_node: int = 8
    strategy: str = "zero3"
    dtype: str = "bfloat16"
    lora_r: int | None = None
    lora_experts: bool = False
    # PEFT's modules_to_save under LoRA (leaf names such as lm_head, embed_tokens, gate): each gets a
    # trainable copy, trained whole with AdamW
    lora_saved: tuple[str, ...] = ()
    max_length: int = 4096
    micro_batch: int = 1
    activation_checkpointing: bool = False
    reserve_gib: float = 3.0
    ep_size: int = 1  # expert parallelism: experts sharded over groups of this many GPUs (fsdp2 only)

    def __post_init__(self):
        # Named by the plan's flags (the recipe path maps onto them one to one).
        if self.strategy not in STRATEGIES:
            raise ConfigError("--strategy", f"{self.strategy!r}: expected one of {', '.join(STRATEGIES)}")
        if self.dtype not in DTYPE_BYTES:
            raise ConfigError("--dtype", f"{self.dtype!r}: expected one of {', '.join(DTYPE_BYTES)}")
        for name in ("gpus", "gpus_per_node", "max_length", "micro_batch", "ep_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
                raise ConfigError(_flag(name), f"must be an integer from 1 to {MAX_COUNT:,}, got {value!r}")
        for name in ("gpu_memory_gib", "reserve_gib"):
            value = getattr(self, name)
            low_ok = value >= 0 if name == "reserve_gib" else value > 0
            if not (isinstance(value, (int, float)) and math.isfinite(value) and low_ok and value <= MAX_GIB):
                raise ConfigError(_flag(name), f"must be a finite {'non-negative' if name == 'reserve_gib' else 'positive'} "
                                               f"number of GiB up to {MAX_GIB:,}, got {value!r}")
        if self.lora_r is not None and (isinstance(self.lora_r, bool) or not isinstance(self.lora_r, int)
                                        or not 1 <= self.lora_r <= MAX_COUNT):
            raise ConfigError("--lora", f"rank must be an integer from 1 to {MAX_COUNT:,}, got {self.lora_r!r}")
        if not isinstance(self.lora_saved, tuple) or not all(isinstance(n, str) and n for n in self.lora_saved):
            raise ConfigError("--lora-save", f"module names (non-empty strings), got {self.lora_saved!r}")
        if self.lora_saved and self.lora_r is None:
            raise ConfigError("--lora-save", "needs --lora: modules_to_save are trained beside LoRA adapters")
        if self.lora_experts and self.lora_r is None:
            raise ConfigError("--lora-experts", "needs --lora: expert adapters are LoRA adapters")
        if self.ep_size > 1:
            if self.strategy != "fsdp2":
                raise ConfigError("--ep-size", f"expert parallelism is transformers' DistributedConfig(ep_size, "
                                               f"fsdp_size): it needs --strategy fsdp2, not {self.strategy}")
            if self.gpus % self.ep_size:
                raise ConfigError("--ep-size", f"{self.ep_size} must divide --gpus {self.gpus}")


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

# What a plan's LoRA refusals name: ``beam-sft plan``'s flags, or a recipe's keys (the pre-flight's plan).
FLAG_KEYS = {"experts": "--lora-experts", "saved": "--lora-save"}
RECIPE_KEYS = {"experts": "lora.experts", "saved": "lora.modules_to_save"}


def count_parameters(config, *, lora_r: int | None = None, lora_experts: bool = False,
                     lora_saved: tuple[str, ...] = (), keys: dict[str, str] = FLAG_KEYS) -> ParamCounts:
    """Exact total and active-per-token parameter counts of the model ``config`` describes (and its
    LoRA adapter parameters for rank ``lora_r``, and the parameters of the modules PEFT trains whole
    beside them, ``lora_saved``), from one build on the meta device. LoRA on the experts of a model
    without fused experts, or a ``lora_saved`` name matching no module, is refused at ``keys``."""
    model = meta_model(config)
    num_experts = config_int(config, NUM_EXPERTS_KEYS)
    top_k = config_int(config, TOP_K_KEYS)
    expert_modules = {name for name, _ in model.named_modules() if _EXPERT_MODULE.search(name)}

    def is_expert(name: str) -> bool:
        return name.rpartition(".")[0] in expert_modules or any(name.startswith(m + ".") for m in expert_modules)

    total = expert = 0
    for name, param in model.named_parameters():  # deduplicates tied weights
        total += param.numel()
        if is_expert(name):
            expert += param.numel()
    if expert and not (num_experts and top_k):
        raise BeamError(f"{type(model).__name__}: expert parameters found but the config names no "
                        f"expert count ({'/'.join(NUM_EXPERTS_KEYS)}) or top-k ({'/'.join(TOP_K_KEYS)})")
    active = total - expert + (expert * top_k // num_experts if expert else 0)
    layers = [(n, m) for n, m in model.named_modules() if re.search(r"\.layers\.\d+$", n)]
    largest, largest_expert = total, 0
    if layers:
        sizes = [(sum(p.numel() for p in m.parameters()),
                  sum(p.numel() for pn, p in m.named_parameters() if is_expert(f"{n}.{pn}"))) for n, m in layers]
        largest, largest_expert = max(sizes)
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    return ParamCounts(total=total, active=active, expert=expert, num_experts=num_experts if expert else None,
                       top_k=top_k if expert else None, largest_layer=largest, buffers_bytes=buffers,
                       largest_layer_expert=largest_expert,
                       lora=_lora_parameters(model, lora_r, _adapted_experts(model, config, lora_r and lora_experts,
                                                                             keys["experts"])) if lora_r else 0,
                       lora_saved=_saved_parameters(model, lora_saved, keys["saved"]) if lora_r else 0)


def _adapted_experts(model, config, wanted: bool, key: str) -> tuple[str, ...]:
    """The fused expert tensors LoRA adapts, by the trainer's own rule (``moe.experts_to_adapt``)."""
    if not wanted:
        return ()
    name = f"{type(model).__name__} ({getattr(config, 'model_type', '?')})"
    return experts_to_adapt(moe_layout(model), key=key, model=name)


def _saved_parameters(model, names: tuple[str, ...], key: str) -> int:
    """Parameters of the modules PEFT's ``modules_to_save`` matches, by PEFT's own rule
    (``lora_targets.saved_matches``: ``norm`` matches every ``*norm`` module, ``proj`` every ``*_proj``);
    each is copied and trained whole. A name that matches no module is refused at ``key``, as the
    trainer refuses it (``lora_targets.check_names``): PEFT would silently train nothing for it (a router
    name the recipe adds for ``lora.train_routers`` may be absent: a model has one of them)."""
    seen: set[int] = set()
    matched: set[str] = set()
    count = 0
    modules = []
    for name, module in model.named_modules():
        modules.append(name)
        hits = [n for n in names if saved_matches(n, name)]
        if not hits:
            continue
        matched.update(hits)
        for param in module.parameters():
            if id(param) not in seen:  # a tied weight, or a module inside another, counts once
                seen.add(id(param))
                count += param.numel()
    missing = [n for n in names if n not in matched and n not in ROUTER_NAMES]
    if missing:
        leaves = sorted({n.rsplit(".", 1)[-1] for n in modules if n and not n.rsplit(".", 1)[-1].isdigit()})
        raise unmatched(key, missing[0], leaves, "module")
    return count


def _lora_parameters(model, r: int, experts: tuple[str, ...]) -> int:
    """Adapter parameters of LoRA rank ``r`` on every linear layer but the output head and routers
    (PEFT's ``all-linear``), and on the fused expert tensors named by ``experts`` (PEFT's
    ``target_parameters`` suffixes; r per expert per side)."""
    import torch

    count = 0
    for name, module in model.named_modules():
        leaf = name.rpartition(".")[2]
        if isinstance(module, torch.nn.Linear) and leaf not in ("lm_head", "router", "gate", "score"):
            count += r * (module.in_features + module.out_features)
    for name, param in model.named_parameters():
        if any(name == e or name.endswith("." + e) for e in experts):  # (experts, in, out)
            count += r * param.shape[0] * (param.shape[1] + param.shape[2])
    return count


# ---------------------------------------------------------------- memory per GPU

@dataclass(frozen=True)
class Shape:
    """What the activation estimate reads from a config (:func:`shape_of`)."""

    hidden: int
    layers: int
    vocab: int
    q_width: int  # query heads x head size (also the output gate's width when the attention has one)
    kv_width: int  # key-value heads x head size
    output_gate: bool  # a sigmoid gate per head on the attention output (Beam)
    dense_width: int  # a dense MLP's intermediate size
    dense_layers: int  # decoder layers with a dense MLP (the rest route to experts)
    expert_width: int  # one routed expert's intermediate size
    num_experts: int
    top_k: int
    shared_width: int  # shared experts' intermediate size in all
    fp32_mlp: bool  # the MLP's activation and product in fp32 (Beam)
    softcap: bool  # logits soft-capped in fp32 (Beam: final_logit_softcapping)
    layer_kinds: tuple[str, ...]  # attention kind per layer (sliding_attention / full_attention)


def shape_of(config) -> Shape:
    text = text_config(config)
    hidden = int(text.hidden_size)
    heads = int(getattr(text, "num_attention_heads", 1) or 1)
    head_dim = int(getattr(text, "head_dim", None) or hidden // heads)
    kv = int(getattr(text, "num_key_value_heads", None) or heads)
    layers = int(text.num_hidden_layers)
    experts = config_int(config, NUM_EXPERTS_KEYS) or 0
    top_k = config_int(config, TOP_K_KEYS) or 0
    mlp_kinds = getattr(text, "mlp_layer_types", None)
    if not experts:
        dense_layers = layers
    elif mlp_kinds is not None:
        dense_layers = sum(1 for kind in mlp_kinds if kind == "dense")
    else:
        dense_layers = min(layers, int(getattr(text, "first_k_dense_replace", 0) or 0))
    expert_width = int(getattr(text, "moe_intermediate_size", None) or getattr(text, "intermediate_size", 4 * hidden))
    model_type = str(getattr(text, "model_type", ""))
    return Shape(
        hidden=hidden, layers=layers, vocab=int(text.vocab_size), q_width=heads * head_dim, kv_width=kv * head_dim,
        output_gate=model_type == "beam", dense_width=int(getattr(text, "intermediate_size", None) or 4 * hidden),
        dense_layers=dense_layers, expert_width=expert_width, num_experts=experts, top_k=top_k,
        shared_width=int(getattr(text, "n_shared_experts", 0) or 0) * expert_width,
        fp32_mlp=model_type == "beam", softcap=getattr(text, "final_logit_softcapping", None) is not None,
        layer_kinds=tuple(getattr(text, "layer_types", None) or ("full_attention",) * layers))


def _layer_bytes_per_token(shape: Shape, w: int, sparse: bool) -> int:
    """Bytes one token keeps for the backward in one decoder layer (memory-efficient attention).

    Attention: the input norm's input and output (2h), q and k raw, normed and rotated (3 each),
    v, the attention output (q width), and with an output gate its pre-activation, its sigmoid and the
    gated product (3 q widths), then o_proj's output and its norm (2h). A dense MLP keeps its norm
    (2h) and gate, up and product (3 widths; Beam's fp32 activation adds gate, up and the activation
    in fp32: 12 bytes a width). A sparse one keeps its norm (2h), the router's fp32 input and scores
    (4h + 12 bytes an expert), and per routed copy of the token its input and output (3h with the
    weighted copy) and the expert's gate-up, activation and product (3 widths, plus fp32 as above).
    Sliding-window and full layers keep the same here: flash/sdpa keep no score matrix, so the window
    changes the compute, not the activations (their masks are counted once, in activation_bytes).
    """
    h = shape.hidden
    gate = 3 * shape.q_width if shape.output_gate else 0
    attention = w * (4 * h + 4 * shape.q_width + 4 * shape.kv_width + gate)
    fp32 = 12 if shape.fp32_mlp else 0

    def mlp(width: int) -> int:
        return (3 * w + fp32) * width

    if not sparse:
        return attention + w * 2 * h + mlp(shape.dense_width)
    routed = shape.top_k * (3 * h * w + mlp(shape.expert_width))
    return attention + w * 2 * h + 4 * h + 12 * shape.num_experts + routed + mlp(shape.shared_width)


# TRL's fused LM head (``trl.trainer.utils.add_fused_lm_head``, which ``SFTTrainer`` >= 1.16 adds for
# every loss `beam-sft train` uses) projects tiles of this many tokens x vocabulary entries and never
# holds the whole logits. trl's own constants; tests/train/test_plan.py holds these equal to them.
HEAD_TOKEN_TILE = 4096  # trl.kernels.chunked_logprob.TOKEN_CHUNK_SIZE
HEAD_VOCAB_TILE = 32768  # trl.trainer.utils._CHUNKED_LOGPROB_CHUNK_SIZE


def head_bytes(shape: Shape, w: int, tokens: int, *, head_trains: bool) -> int:
    """The LM head's memory for ``tokens`` tokens under TRL's fused head (Beam's soft cap included:
    the kernel applies it per tile). One projection tile ``min(tokens, 4096) x min(vocab, 32768)`` in
    the compute dtype; the final hidden states it keeps (``w``) and their fp32 gradient; when the
    head trains (not under LoRA), its weight's gradient in fp32 and the copy in the weight's dtype
    it returns (``vocab x hidden x (4 + w)``); a few fp32 numbers a token (log-sum-exp, the target's
    logit, entropy, top-1). Measured on an H100 (README, "Measured on a GPU"): a 2.76B Beam training
    on 8,192 packed tokens peaked at 21.6 GiB, about its weights, gradients and AdamW state (20.5)
    and this; the whole logits, as this plan counted them before, would have been 20.9 GiB more."""
    tile = min(tokens, HEAD_TOKEN_TILE) * min(shape.vocab, HEAD_VOCAB_TILE) * w
    hidden = tokens * shape.hidden * (w + 4)
    weight_grad = shape.vocab * shape.hidden * (4 + w) if head_trains else 0
    return tile + hidden + weight_grad + tokens * 32


def activation_bytes(config, setup: PlanSetup) -> int:
    """Estimated activation memory of one micro-batch on one GPU.

    Per token and decoder layer, :func:`_layer_bytes_per_token` (dense and sparse layers each by
    their own widths); with activation checkpointing each layer keeps only its input (``h`` values)
    and one layer, the largest, is recomputed at a time. The LM head adds :func:`head_bytes`: at
    Beam's 151,936-token vocabulary, hidden 5120 and 8,192 tokens, 4.8 GiB for a full fine-tune
    (most of it the head's fp32 weight gradient), where the whole logits with the soft cap in fp32
    would be 20.9 GiB. One boolean mask per attention kind (sliding, full) of ``length^2`` bytes
    per sequence. An estimate: it sets the margin, the weights and optimizer terms are exact.
    """
    shape = shape_of(config)
    w = DTYPE_BYTES[setup.dtype]
    tokens = setup.micro_batch * setup.max_length
    dense = _layer_bytes_per_token(shape, w, sparse=False)
    sparse = _layer_bytes_per_token(shape, w, sparse=True) if shape.num_experts else dense
    moe_layers = shape.layers - shape.dense_layers
    if setup.activation_checkpointing:
        layers = shape.layers * tokens * w * shape.hidden + tokens * max(dense if shape.dense_layers else 0,
                                                                         sparse if moe_layers else 0)
    else:
        layers = tokens * (shape.dense_layers * dense + moe_layers * sparse)
    masks = len(set(shape.layer_kinds)) * setup.micro_batch * setup.max_length ** 2
    return layers + head_bytes(shape, w, tokens, head_trains=head_trains(setup)) + masks


def head_trains(setup: PlanSetup) -> bool:
    """Whether the LM head gets a gradient: a full fine-tune, or LoRA with the head in modules_to_save."""
    return setup.lora_r is None or "lm_head" in setup.lora_saved


def memory_per_gpu(counts: ParamCounts, config, setup: PlanSetup, *, lora_params: int | None = None) -> dict[str, int]:
    """Bytes each GPU holds, by component, for ``setup`` over ``setup.gpus`` GPUs."""
    w = DTYPE_BYTES[setup.dtype]
    lora_params = (counts.lora + counts.lora_saved) if lora_params is None else lora_params
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
        # 16 bytes an adapter parameter: its fp32 weight (4) is sharded like the strategy's weights
        # (every GPU holds it whole under zero2), its gradient and AdamW moments (12) like the rest
        lora = (math.ceil(lora_params * 16 / shards) if weight_shards == shards
                else lora_params * 4 + math.ceil(lora_params * 12 / shards))
        trainable = lora_params
    if setup.strategy in ("ddp", "zero2"):
        # gradient buckets; one process is not wrapped in DDP and has none
        working = 0 if setup.gpus == 1 else trainable * (4 if setup.lora_r is not None else w)
    else:
        # The running layer and the prefetched one, unsharded; under expert parallelism a rank
        # gathers only its num_experts / ep_size experts of each, and holds the all-to-all buffers
        # of its tokens' routed copies (sent and received).
        layer = counts.largest_layer - counts.largest_layer_expert + counts.largest_layer_expert // setup.ep_size
        working = 2 * layer * w
        if setup.ep_size > 1 and counts.top_k:
            working += 2 * setup.micro_batch * setup.max_length * counts.top_k * text_config(config).hidden_size * w
    return {
        "weights": weights,
        "gradients": grads,
        "optimizer": optim,
        "lora": lora,
        "activations": activation_bytes(config, setup),
        "buffers": counts.buffers_bytes + working,
        "reserve": int(setup.reserve_gib * GIB),
    }


def plan(source, setup: PlanSetup = PlanSetup(), *, max_nodes: int = 4096, trust_remote_code: bool = False,
         keys: dict[str, str] = FLAG_KEYS) -> Plan:
    """Count the model of ``source`` (config, config.json, model dir; None: ``BeamConfig()``) and plan
    ``setup`` on it; ``keys``: what a LoRA refusal names (the plan's flags, or a recipe's keys)."""
    import dataclasses

    config = load_model_config(source, trust_remote_code=trust_remote_code)
    counts = count_parameters(config, lora_r=setup.lora_r, lora_experts=setup.lora_experts,
                              lora_saved=setup.lora_saved, keys=keys)
    if setup.ep_size > 1 and (not counts.num_experts or counts.num_experts % setup.ep_size):
        raise ConfigError("--ep-size", f"{setup.ep_size} must divide the model's routed experts "
                                       f"({counts.num_experts or 'none: not a mixture of experts'})")
    per_gpu = memory_per_gpu(counts, config, setup)
    usable = int(setup.gpu_memory_gib * GIB)
    total = sum(per_gpu.values())
    nodes = None
    if setup.strategy == "ddp":  # nothing is sharded: more GPUs change nothing per GPU
        nodes = 1 if total <= usable else None
        # (zero2 keeps every weight on every GPU: the search below finds its floor too)
    else:
        # Memory per GPU only falls as nodes are added, so the first that fits is the fewest
        # (with expert parallelism, of the node counts whose GPUs the EP group divides).
        for n in range(1, max_nodes + 1):
            if (n * setup.gpus_per_node) % setup.ep_size:
                continue
            trial = dataclasses.replace(setup, gpus=n * setup.gpus_per_node)
            if sum(memory_per_gpu(counts, config, trial).values()) <= usable:
                nodes = n
                break
    notes = []
    if counts.expert:
        notes.append(f"active per token: non-expert {counts.non_expert:,} + experts {counts.expert:,} "
                     f"x {counts.top_k}/{counts.num_experts}")
        w = DTYPE_BYTES[setup.dtype]
        notes.append(f"largest decoder layer {counts.largest_layer:,} parameters ({counts.largest_layer_expert:,} "
                     f"in routed experts): {counts.largest_layer * w / 1e9:.1f} GB gathered in {setup.dtype}"
                     + (f"; with --ep-size {setup.ep_size} a GPU gathers "
                        f"{counts.num_experts // setup.ep_size} of its {counts.num_experts} experts"
                        if setup.ep_size > 1 else ""))
    shape = shape_of(config)
    tokens = setup.micro_batch * setup.max_length
    head = head_bytes(shape, DTYPE_BYTES[setup.dtype], tokens, head_trains=head_trains(setup))
    notes.append(f"LM head: TRL's fused head, {shape.vocab:,} entries x {tokens:,} tokens in tiles of "
                 f"{HEAD_TOKEN_TILE} x {HEAD_VOCAB_TILE}" + (", soft cap per tile" if shape.softcap else "")
                 + f": {head / GIB:.2f} GiB, in the activations")
    notes.append("activations are an estimate (see beam_sft/train/plan.py); weights, gradients and "
                 "optimizer state are exact for the strategy")
    if source is None:
        label = DEFAULT_MODEL
    elif hasattr(source, "to_dict"):
        label = getattr(config, "name_or_path", "") or "config"
    else:
        label = str(source)
    return Plan(
        model=label,
        model_type=str(getattr(config, "model_type", "")),
        parameters={"total": counts.total, "active": counts.active, "expert": counts.expert,
                    "non_expert": counts.non_expert, "num_experts": counts.num_experts, "top_k": counts.top_k,
                    "lora": counts.lora, "lora_saved": counts.lora_saved},
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
        lines.append(f"{lora_label}: {params['lora']:,} adapter parameters"
                     + (f", {params['lora_saved']:,} in modules_to_save ({', '.join(p.setup['lora_saved'])}) "
                        "trained whole" if params.get("lora_saved") else ""))
    s = p.setup
    lines.append(f"setup: {s['strategy']}, {s['gpus']} GPUs of {s['gpu_memory_gib']:g} GiB "
                 f"({s['gpus_per_node']} a node), {s['dtype']}, micro-batch {s['micro_batch']} x "
                 f"{s['max_length']} tokens, activation checkpointing {'on' if s['activation_checkpointing'] else 'off'}"
                 + (f", expert parallelism over {s['ep_size']} GPUs" if s.get("ep_size", 1) > 1 else ""))
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

def recipe_setup(recipe, *, world_size: int, gpu_memory_gib: float, strategy: str | None = None) -> PlanSetup:
    """The PlanSetup a recipe describes, for ``world_size`` processes."""
    sft = recipe.sft
    dtype = recipe.model.dtype if recipe.model.dtype != "auto" else _mixed_precision(sft)
    lora = recipe.lora
    ep_size = getattr(recipe.model, "ep_size", 1)
    if ep_size > 1:  # sharded at load by transformers' FSDP2 with the experts split: fsdp2's profile
        strategy = "fsdp2"
    return PlanSetup(
        gpus=world_size, gpu_memory_gib=gpu_memory_gib, gpus_per_node=max(1, min(world_size, 8)),
        strategy=strategy or strategy_from_environment(), dtype=dtype, ep_size=ep_size,
        lora_r=lora.r if lora is not None else None,
        lora_experts=lora.on_experts if lora is not None else False,
        lora_saved=lora_saved_names(lora),
        max_length=int(sft.get("max_length") or 1024), micro_batch=int(sft.get("per_device_train_batch_size") or 8),
        activation_checkpointing=_checkpointing(sft),
        reserve_gib=0.0,  # the free memory measured already excludes the CUDA context
    )


def _mixed_precision(sft) -> str:
    """The dtype of a recipe with ``model.dtype: auto``, from its mixed precision as TRL resolves it:
    ``bf16`` when set, else on unless ``fp16`` (TRL's SFTConfig default: ``bf16 = not fp16``)."""
    fp16 = bool(sft.get("fp16"))
    bf16 = sft.get("bf16")
    if bf16 if bf16 is not None else not fp16:
        return "bfloat16"
    return "float16" if fp16 else "float32"


def _checkpointing(sft) -> bool:
    """Whether the run checkpoints activations, as TrainingArguments resolves it: ``activation_checkpointing``
    when set, else its deprecated alias ``gradient_checkpointing``, else SFTConfig's default (TRL: on)."""
    for key in ("activation_checkpointing", "gradient_checkpointing"):
        if sft.get(key) is not None:
            return bool(sft[key])
    from trl import SFTConfig

    return next((f.default is True for f in dataclasses.fields(SFTConfig) if f.name == "gradient_checkpointing"), False)


def lora_saved_names(lora) -> tuple[str, ...]:
    """The modules a recipe's LoRA trains whole: its ``modules_to_save``, and the routers when
    ``lora.train_routers`` (the trainer adds them there, by these leaf names)."""
    if lora is None:
        return ()
    names = list(lora.modules_to_save or [])
    if lora.train_routers:
        names += [r for r in ROUTER_NAMES if r not in names]
    return tuple(names)


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
    result = plan(recipe.model.path, setup, max_nodes=1, trust_remote_code=recipe.model.trust_remote_code,
                  keys=RECIPE_KEYS)
    if _any_process(not result.fits):  # every process stops together (a lone refusal would hang the rest)
        parts = ", ".join(f"{k} {v / GIB:.2f}" for k, v in result.per_gpu_bytes.items() if v)
        where = "" if not result.fits else "another process has too little free memory; on this one "
        raise PreflightError(
            f"pre-flight failed: {where}the plan for {recipe.model.path} with {setup.strategy} over {world_size} "
            f"processes needs {result.total_bytes / GIB:.2f} GiB per GPU ({parts}) and {free_bytes / GIB:.2f} GiB "
            "is free; add GPUs, enable activation checkpointing, or lower the micro-batch or max_length "
            f"(`beam-sft plan --model {recipe.model.path} ...` prints the fewest nodes that fit)")
    return result
