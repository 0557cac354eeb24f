"""Packing that keeps sequences apart, and the logits comparison that proves it.

TRL's ``bfd`` packing (and ``padding_free``) flattens a batch into one row and marks where each
sequence starts only through ``position_ids`` (they restart at 0). Whether the sequences then stay
apart depends on the attention path:

* flash attention reads the restarts as varlen boundaries;
* for ``sdpa``, ``eager`` and ``flex_attention``, transformers' ``masking_utils`` turns the
  restarts into a block-diagonal mask, but only when the forward has no 2D attention mask and
  **no cache**. A forward with ``use_cache`` on (the model config's default) creates a cache,
  skips that detection, and every packed sequence attends to the ones before it (measured: max
  logit difference ~0.77 on the fixture model, against ~2e-7 without a cache).

Hybrid models (``config.layer_types`` mixing sliding-window and full attention, as gpt-oss and Beam)
add a second way to leak: in transformers 5.24 ``GptOssModel`` builds its masks without the
position ids at all, so even without a cache its packed sequences attend to each other (measured:
0.77 on the gpt_oss fixture under eager). ``keep_packed_sequences_apart`` gives such a decoder the
masks itself, per layer type, through transformers' public mask builders
(``masking_utils.create_causal_mask`` / ``create_sliding_window_causal_mask`` with the position ids),
as a dict the decoder takes as already prepared. On CPU, gpt-oss cannot run sdpa (transformers
refuses it) nor flex_attention (sinks are GPU-only there): the model load and the pre-flight
say so.

So training turns the cache off on the model config (``disable_cache``), refuses the packing
strategies that cut sequences without marking the cut (``wrapped``) or train a tail without its
prompt (``bfd_split``), refuses attention implementations we have not measured, and before step 1
``check_isolation`` runs the trainer's own first packed batch through the model twice more: once
with the tokens of every other sequence changed (the sequences after them must not move, bit for
bit: same shapes, same kernels), once with each sequence alone (its logits must be its own, which
also proves the positions restart). A leak fails the run. In half precision on a mixture of experts
the second comparison is reported, not decisive: its two shapes round differently and routing
amplifies that (measured on an H100, README "Measured on a GPU").
"""

from __future__ import annotations

from dataclasses import dataclass

from beam_sft.compat import model_config
from beam_sft.errors import ConfigError, PreflightError
from beam_sft.train.moe import moe_layout

# Attention implementations under which packing is allowed. All keep packed sequences apart given
# position_ids and no cache; check_isolation proves it for the model at hand before step 1.
PACKING_ATTENTION = ("sdpa", "eager", "flex_attention", "flash_attention_2", "flash_attention_3")
# bfd keeps every sequence whole (truncating the overflow); the others break sequences.
PACKING_STRATEGIES = ("bfd",)
# Positions compared per packed sequence: a leak shows from a sequence's first token on.
COMPARE_POSITIONS = 64


def check_packing_options(sft: dict, attn_implementation: str) -> None:
    """Refuse packing set-ups that cannot keep sequences apart (ConfigError with the key path).

    >>> check_packing_options({"packing": True, "packing_strategy": "wrapped"}, "sdpa")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    beam_sft.errors.ConfigError: sft.packing_strategy: 'wrapped' ...
    """
    packed = bool(sft.get("packing")) or bool(sft.get("padding_free"))
    if not packed:
        return
    strategy = sft.get("packing_strategy", "bfd")
    if sft.get("packing") and strategy not in PACKING_STRATEGIES:
        raise ConfigError(
            "sft.packing_strategy",
            f"{strategy!r} is refused: 'wrapped' cuts sequences mid-way with no boundary, so they attend to "
            "each other, and 'bfd_split' trains the tail of a long conversation without its prompt; "
            "use 'bfd' (sequences longer than max_length are truncated) or raise sft.max_length",
        )
    if attn_implementation not in PACKING_ATTENTION:
        raise ConfigError(
            "model.attn_implementation",
            f"packing with {attn_implementation!r} is refused: sequence isolation is only established for "
            f"{', '.join(PACKING_ATTENTION)}",
        )


def disable_cache(model) -> None:
    """Turn the KV cache off for training: with a cache, sdpa/eager/flex ignore packing boundaries."""
    config = getattr(model, "config", None)
    if config is not None:
        config.use_cache = False
        text_config = config.get_text_config() if hasattr(config, "get_text_config") else None
        if text_config is not None:
            text_config.use_cache = False


# Layer types whose mask transformers' public builders make; a decoder with any other kind is left alone
# (the pre-flight then proves or refuses it).
_MASK_BUILDERS = {"full_attention": "create_causal_mask", "sliding_attention": "create_sliding_window_causal_mask"}
# Implementations that read boundaries from the mask (flash attention reads the position ids itself).
_MASKED_ATTENTION = ("eager", "sdpa", "flex_attention")


def builds_layer_masks(model) -> bool:
    """Whether ``model`` is a hybrid decoder whose layer types' masks ``keep_packed_sequences_apart`` builds."""
    layer_types = list(getattr(getattr(getattr(model, "model", None), "config", None), "layer_types", None) or [])
    return bool(layer_types) and all(t in _MASK_BUILDERS for t in layer_types)


def keep_packed_sequences_apart(model) -> bool:
    """On a hybrid decoder (``config.layer_types``), build each layer type's mask from the position
    ids of a packed batch, so sliding-window and full layers both keep the sequences apart.

    Installs a forward pre-hook on the decoder (``model.model``); it acts only on packed forwards
    (position ids that restart, no attention mask, no cache). Returns whether it installed one.
    """
    if not builds_layer_masks(model):
        return False
    decoder = model.model
    if getattr(decoder, "_beam_packed_mask_hook", None) is not None:
        return True
    decoder._beam_packed_mask_hook = decoder.register_forward_pre_hook(_packed_mask_hook, with_kwargs=True)
    return True


def _packed_mask_hook(module, args, kwargs):
    import torch
    from transformers import masking_utils

    position_ids = kwargs.get("position_ids")
    config = module.config
    if (position_ids is None or kwargs.get("attention_mask") is not None or kwargs.get("cache") is not None
            or kwargs.get("past_key_values") is not None or model_config.attn_implementation(config) not in _MASKED_ATTENTION):
        return None
    if masking_utils.find_packed_sequence_indices(position_ids) is None:
        return None  # one sequence per row: the decoder's own causal masks are right
    input_ids = kwargs.get("input_ids", args[0] if args else None)
    embeds = kwargs.get("inputs_embeds")
    if embeds is None:
        # The builders read only the shape, dtype and device of the embeddings.
        weight = module.get_input_embeddings().weight
        embeds = torch.empty((*input_ids.shape, 1), dtype=weight.dtype, device=input_ids.device)
    masks = {}
    for layer_type in dict.fromkeys(config.layer_types):
        build = getattr(masking_utils, _MASK_BUILDERS[layer_type])
        masks[layer_type] = build(config=config, inputs_embeds=embeds, attention_mask=None, cache=None,
                                  position_ids=position_ids)
    return args, {**kwargs, "attention_mask": masks}


def segments(position_ids) -> list[tuple[int, int]]:
    """``[start, end)`` of each packed sequence in one row of position ids (a restart at 0 opens one).

    >>> segments([0, 1, 2, 0, 1, 0])
    [(0, 3), (3, 5), (5, 6)]
    """
    ids = [int(p) for p in position_ids]
    starts = [i for i, p in enumerate(ids) if p == 0 or i == 0]
    return [(s, e) for s, e in zip(starts, starts[1:] + [len(ids)], strict=True)]


def is_packed_batch(batch: dict) -> bool:
    """True when ``batch`` is flattened with position ids and no 2D attention mask (TRL padding-free)."""
    return "position_ids" in batch and "attention_mask" not in batch


@dataclass(frozen=True)
class IsolationResult:
    max_abs_diff: float  # packed against alone, the later sequences' first COMPARE_POSITIONS logits
    compared_sequences: int
    tolerance: float
    # The counterfactual: the same packed batch with the tokens of the even-numbered sequences
    # changed; the odd-numbered ones after them must not move. Same shapes, so no rounding excuse.
    leak_diff: float = 0.0
    leak_tolerance: float = 1e-3
    compute_dtype: str = "float32"
    # Whether packed-against-alone decides too: not for a half-precision MoE forward, whose rounding
    # differences flip routing choices (see isolation_diff).
    alone_decides: bool = True

    @property
    def leaks(self) -> bool:
        """The counterfactual moved a sequence (or came out NaN: nothing is proven then)."""
        return not self.leak_diff <= self.leak_tolerance

    @property
    def ok(self) -> bool:
        if self.leaks or self.max_abs_diff != self.max_abs_diff:  # NaN logits prove nothing either way
            return False
        return self.max_abs_diff <= self.tolerance or not self.alone_decides


def default_tolerance(dtype, scale: float = 1.0) -> float:
    """Logit tolerance between a packed and an unpacked forward: float noise, far below a leak.

    ``scale`` is the largest logit magnitude; half precision's rounding grows with it (a leak moves
    the first logits of a sequence by whole units). fp32: max(1e-3, 1e-4 x scale); bf16/fp16:
    max(0.1, 0.02 x scale). ``dtype`` is the precision the forward computed in
    (:func:`compute_dtype`), not the logits' own: Beam soft-caps its logits in float32.

    >>> import torch
    >>> default_tolerance(torch.float32), default_tolerance(torch.bfloat16, scale=30.0)
    (0.001, 0.6)
    """
    import torch

    if dtype in (torch.float32, torch.float64):
        return max(1e-3, 1e-4 * scale)
    return max(0.1, 0.02 * scale)


def compute_dtype(model, logits_dtype):
    """The precision ``model``'s forward ran in: autocast's dtype when autocast is on, else half
    precision when its weights are, else ``logits_dtype``. The logits alone cannot say: Beam casts
    them to float32 before its soft cap, and a bf16 model's noise is bf16's."""
    import itertools

    import torch

    half = (torch.bfloat16, torch.float16)
    for device_type in ("cuda", "cpu"):
        if torch.is_autocast_enabled(device_type):
            dtype = torch.get_autocast_dtype(device_type)
            if dtype in half:
                return dtype
    weights = [p.dtype for p in itertools.islice(model.parameters(), 64) if p.is_floating_point()]
    return next((d for d in weights if d in half), logits_dtype)


def isolation_diff(model, batch: dict, *, pad_token_id: int, max_sequences: int = 4,
                   tolerance: float | None = None, precision=None) -> IsolationResult:
    """Prove that the packed sequences in ``batch`` do not see each other, two ways.

    ``batch`` is a packed (padding-free) batch as the trainer's dataloader yields it. Every process
    runs exactly three forwards, so the call is safe under ZeRO-3/FSDP, where a forward is a
    collective:

    1. the packed batch;
    2. the same packed batch with the tokens of sequences 0, 2, 4, ... changed (each id + 1, modulo
       the largest id in the batch + 1): the logits of sequences 1, 3, ... must not move. Same
       shapes, same kernels: without a leak they are bit for bit equal in any precision, and a leak
       moves them by whole units (``leak_diff``);
    3. the sequences alone, one right-padded batch: each later sequence must give the logits it
       gives alone, which also proves its positions restart (``max_abs_diff``).

    The first sequence has nothing before it to leak from, so (3) compares the later ones. In
    float32, and in half precision for a dense model, both must hold. In half precision for an MoE
    model, (3) is reported and (2) decides: the two shapes round differently, the differences flip
    routing choices, and a flipped choice moves logits by whole units. Measured on an H100 with a
    random Beam (768 wide, 12 layers, 256 experts, top-8) in bf16: packed against alone differs by
    up to 1.2 to 1.5 on the *first* sequence, which cannot leak, while in float32 the same
    comparison is exactly 0 on every sequence's first 64 positions (README, "Measured on a GPU").

    ``precision``: the dtype training computes in, when the caller knows it (the trainer's
    ``bf16``/``fp16``): accelerate enters autocast inside the wrapped forward, and FSDP2 keeps fp32
    master weights, so neither the weights nor the autocast state seen from here would say bf16.
    """
    import torch

    device = batch["input_ids"].device
    input_ids = batch["input_ids"][0]
    spans = [s for s in segments(batch["position_ids"][0]) if s[1] - s[0] > 1][: max_sequences + 1]
    if not spans:
        spans = [(0, int(input_ids.numel()))]
    keeps = [min(COMPARE_POSITIONS, e - s) for s, e in spans]
    packed_positions = torch.cat([torch.arange(s, s + k, device=device) for (s, _), k in zip(spans, keeps, strict=True)])

    packed_inputs = {k: v for k, v in batch.items() if k != "labels"}
    changed_ids = batch["input_ids"].clone()
    top = int(input_ids.max()) + 1
    for s, e in spans[0::2]:
        changed_ids[0, s:e] = (changed_ids[0, s:e] + 1) % top
    alone_len = max(e - s for s, e in spans)
    alone_ids = torch.full((len(spans), alone_len), pad_token_id, dtype=input_ids.dtype, device=device)
    alone_mask = torch.zeros((len(spans), alone_len), dtype=torch.long, device=device)
    for row, (s, e) in enumerate(spans):
        alone_ids[row, : e - s] = input_ids[s:e]
        alone_mask[row, : e - s] = 1

    was_training = model.training
    model.eval()  # dropout (LoRA's included) would make the forwards differ for no reason
    try:
        with torch.no_grad():
            packed = model(**packed_inputs, use_cache=False, logits_to_keep=packed_positions).logits
            changed = model(**{**packed_inputs, "input_ids": changed_ids}, use_cache=False,
                            logits_to_keep=packed_positions).logits
            alone = model(input_ids=alone_ids, attention_mask=alone_mask, use_cache=False,
                          logits_to_keep=torch.arange(max(keeps), device=device)).logits
    finally:
        model.train(was_training)
    chunks = packed[0].float().split(keeps)
    changed_chunks = changed[0].float().split(keeps)
    diff = max((float((chunks[row] - alone[row, : keeps[row]].float()).abs().max()) for row in range(1, len(spans))),
               default=0.0)
    leak = max((float((chunks[row] - changed_chunks[row]).abs().max()) for row in range(1, len(spans), 2)),
               default=0.0)
    scale = float(alone.float().abs().max())
    dtype = precision if precision is not None else compute_dtype(model, alone.dtype)
    half = dtype not in (torch.float32, torch.float64)
    tol = default_tolerance(dtype, scale) if tolerance is None else tolerance
    leak_tol = default_tolerance(torch.float32, scale) if tolerance is None else tolerance
    return IsolationResult(max_abs_diff=diff, compared_sequences=len(spans) - 1, tolerance=tol, leak_diff=leak,
                           leak_tolerance=leak_tol, compute_dtype=str(dtype).removeprefix("torch."),
                           alone_decides=not (half and moe_layout(model).is_moe))


def check_isolation(model, batch: dict, *, pad_token_id: int, attn_implementation: str,
                    tolerance: float | None = None, precision=None) -> IsolationResult:
    """Raise PreflightError when a packed sequence's logits differ from the same sequence alone, or
    when the model cannot run ``attn_implementation`` here at all (gpt-oss's sinks under
    flex_attention on the CPU)."""
    try:
        result = isolation_diff(model, batch, pad_token_id=pad_token_id, tolerance=tolerance, precision=precision)
    except (ValueError, RuntimeError, NotImplementedError) as exc:
        raise PreflightError(
            f"packing cannot be proven isolated with attn_implementation={attn_implementation!r}: the packed "
            f"forward failed ({type(exc).__name__}: {exc}). Choose another model.attn_implementation."
        ) from exc
    if result.leaks:
        raise PreflightError(
            f"packing leaks attention across sequences with attn_implementation={attn_implementation!r}: "
            f"changing the tokens of one packed sequence moves the logits of the next by "
            f"{result.leak_diff:.4g} (tolerance {result.leak_tolerance:g}). Turn packing off "
            "(--sft.packing false) or use an attention implementation that honours sequence boundaries."
        )
    if not result.ok:
        raise PreflightError(
            f"packing leaks attention across sequences with attn_implementation={attn_implementation!r}: "
            f"the logits of a sequence packed after another differ from the same sequence alone by "
            f"{result.max_abs_diff:.4g} (tolerance {result.tolerance:g}). Turn packing off "
            "(--sft.packing false) or use an attention implementation that honours sequence boundaries."
        )
    return result
