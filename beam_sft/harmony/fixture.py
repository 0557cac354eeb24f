"""Build the offline test/demo checkpoint: a small byte-level BPE tokenizer with the Harmony
markers, beam-sft's chat and response templates, and a tiny random causal LM that matches it.

Four architectures (``ARCHES``), all sharing the tokenizer:

* ``llama``: a dense Llama (the default; the demo and most tests).
* ``beam``: Beam itself (``transformers.BeamForCausalLM``, the model code transformers ships), tiny:
  6 layers in BeamConfig's own pattern (five sliding-window layers with RoPE, then one full-attention
  layer without positional encoding), a window (16 tokens) shorter than the test rows so the sliding
  layers really slide, one dense SwiGLU layer first and then mixture-of-experts layers (8 experts,
  top-2, in 2 groups of which each token may use 1), the sigmoid router with its
  ``e_score_correction_bias``, the per-head sigmoid output gate, q/k norms, logits soft-capped at 30,
  an untied head. The MoE fixture of the tests.
* ``gpt_oss``: mixture of experts with a softmax router and its load-balancing aux loss, and
  attention sinks (what Beam does not have), 3 sliding : 1 full layers, all with RoPE.
* ``deepseek_v3``: mixture of experts with a shared expert and multi-head latent attention (MLA),
  one dense layer first.

Everything is built in-process from text that ships with the package, so tests and the demo never
touch a hub. The build is deterministic: the same beam-sft version writes the same files.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from beam_sft.harmony import markers

PAD_TOKEN = "<|endoftext|>"


@dataclass(frozen=True)
class FixtureOptions:
    vocab_size: int = 1024
    hidden_size: int = 64
    intermediate_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    max_positions: int = 4096
    seed: int = 0
    arch: str = "llama"  # one of ARCHES
    num_experts: int = 4
    experts_per_token: int = 2
    expert_size: int = 64  # intermediate size of one expert
    sliding_window: int = 16
    moe_layers: int = 4  # gpt_oss: 3 sliding : 1 full
    beam_layers: int = 6  # beam: BeamConfig's pattern gives 5 sliding + 1 full (NoPE) at 6
    beam_experts: int = 8
    beam_groups: int = 2  # n_group; each token may route into topk_group (1) of them
    # More lines for the BPE to learn from (the demo's: its cities, words and numbers, so that each is one
    # token; with a larger vocab_size). Empty: the fixture every test uses, unchanged.
    extra_corpus: tuple[str, ...] = ()


ARCHES = ("llama", "beam", "gpt_oss", "deepseek_v3")


def _training_text() -> list[str]:
    # Sentences, code, JSON and the Harmony wire words (at line starts, where they follow markers),
    # so that common text is a few tokens: rows stay short and tests fast.
    text = resources.files("beam_sft.harmony").joinpath("fixture_corpus.txt").read_text(encoding="utf-8")
    return text.splitlines()


def build_tokenizer(options: FixtureOptions = FixtureOptions()):
    """Train the fixture tokenizer and return a ``PreTrainedTokenizerFast`` with both templates."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from beam_sft.harmony.response import response_template
    from beam_sft.harmony.template import load_chat_template

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=options.vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[PAD_TOKEN],
        show_progress=False,
    )
    core.train_from_iterator(_training_text() + list(options.extra_corpus), trainer=trainer)

    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, clean_up_tokenization_spaces=False)
    # Markers are added tokens, so text is split on them before BPE; only <|return|> is special.
    tokenizer.add_tokens(
        [
            AddedToken(m, special=False, normalized=False)
            for m in markers.ALL_MARKERS
            if m not in markers.SPECIAL_MARKERS
        ]
    )
    tokenizer.add_special_tokens(
        {
            "eos_token": AddedToken(markers.EOS, special=True, normalized=False),
            "pad_token": AddedToken(PAD_TOKEN, special=True, normalized=False),
        }
    )
    tokenizer.chat_template = load_chat_template()
    tokenizer.response_template = response_template()
    tokenizer.model_max_length = options.max_positions
    return tokenizer


def build_model(tokenizer, options: FixtureOptions = FixtureOptions()):
    """A tiny random causal LM of ``options.arch`` whose vocabulary and special ids match ``tokenizer``."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    if options.arch not in ARCHES:
        raise ValueError(f"unknown fixture arch {options.arch!r} (known: {', '.join(ARCHES)})")
    stop_ids = [tokenizer.convert_tokens_to_ids(m) for m in markers.STOP_MARKERS]
    special = {"vocab_size": len(tokenizer), "bos_token_id": None, "eos_token_id": stop_ids,
               "pad_token_id": tokenizer.pad_token_id, "max_position_embeddings": options.max_positions}
    config = _CONFIGS[options.arch](options, special)
    torch.manual_seed(options.seed)
    model = AutoModelForCausalLM.from_config(config)
    if options.arch == "gpt_oss":
        # The default init (std 0.02) leaves the sinks near zero; make them matter, as trained ones do,
        # so the packing check really exercises them.
        with torch.no_grad():
            for layer in model.model.layers:
                layer.self_attn.sinks.normal_(0.0, 1.0)
            # Spread the router logits so tokens really go to different experts.
            for layer in model.model.layers:
                layer.mlp.router.weight.normal_(0.0, 0.5)
    if options.arch == "beam":
        _spread_beam(model, options)
    model.generation_config = GenerationConfig(
        eos_token_id=stop_ids, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    return model


def _llama_config(options: FixtureOptions, special: dict):
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=options.hidden_size,
        intermediate_size=options.intermediate_size,
        num_hidden_layers=options.num_layers,
        num_attention_heads=options.num_heads,
        num_key_value_heads=options.num_kv_heads,
        tie_word_embeddings=True,
        **special,
    )


def _beam_config(options: FixtureOptions, special: dict):
    from transformers import BeamConfig

    layers = options.beam_layers
    return BeamConfig(
        hidden_size=options.hidden_size,
        intermediate_size=options.intermediate_size,
        moe_intermediate_size=options.expert_size // 2,
        head_dim=options.hidden_size // options.num_heads,
        num_hidden_layers=layers,
        num_attention_heads=options.num_heads,
        num_key_value_heads=options.num_kv_heads,
        num_experts=options.beam_experts,
        num_experts_per_tok=options.experts_per_token,
        n_group=options.beam_groups,
        topk_group=1,  # of 2 groups, so the group choice really restricts the experts a token may use
        sliding_window=options.sliding_window,
        # layer_types and rope_parameters are left to BeamConfig: every sixth layer and the last one
        # full attention without RoPE (rope_parameters["full_attention"] is None), the rest sliding.
        mlp_layer_types=["dense"] + ["sparse"] * (layers - 1),  # the real model: 3 dense of 52
        final_logit_softcapping=30.0,
        tie_word_embeddings=False,
        **special,
    )


def _spread_beam(model, options: FixtureOptions) -> None:
    """Make Beam's routing and gates matter in a tiny random model, as they do in a trained one.

    With the default init (router std 0.02, hidden 64) every sigmoid router score sits near 0.5, so
    the choice of experts hangs on noise; std 0.5 spreads the scores over (0, 1) and tokens really
    go to different experts (and groups). The ``e_score_correction_bias`` (zeros at init) gets
    values of the size a bias-balanced router learns (std 0.05) and that bf16 cannot hold exactly,
    so a bias that training moved, re-initialised or cast is seen bit for bit. The output gate's
    bias (zeros at init, every head gated by about 0.5) gets std 1, so heads are gated differently.
    Drawn from a generator of the fixture's own seed: the build stays byte-identical.
    """
    import torch

    generator = torch.Generator().manual_seed(options.seed + 1)
    with torch.no_grad():
        for layer in model.model.layers:
            gate = layer.self_attn.gate_bias
            gate.copy_(torch.randn(gate.shape, generator=generator))
            router = getattr(layer.mlp, "gate", None)
            if router is None or not hasattr(router, "e_score_correction_bias"):
                continue  # a dense layer: its mlp.gate_proj is a SwiGLU projection, not a router
            router.weight.copy_(torch.randn(router.weight.shape, generator=generator) * 0.5)
            bias = router.e_score_correction_bias
            bias.copy_(torch.randn(bias.shape, generator=generator) * 0.05)


def _gpt_oss_config(options: FixtureOptions, special: dict):
    from transformers import GptOssConfig

    layers = options.moe_layers
    return GptOssConfig(
        hidden_size=options.hidden_size,
        intermediate_size=options.expert_size,
        head_dim=options.hidden_size // options.num_heads,
        num_hidden_layers=layers,
        num_attention_heads=options.num_heads,
        num_key_value_heads=options.num_kv_heads,
        num_local_experts=options.num_experts,
        num_experts_per_tok=options.experts_per_token,
        sliding_window=options.sliding_window,
        # Beam's pattern: three sliding-window layers, then one full-attention layer.
        layer_types=["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(layers)],
        rope_parameters={"rope_type": "default", "rope_theta": 150000.0},
        router_aux_loss_coef=0.01,
        tie_word_embeddings=False,
        **special,
    )


def _deepseek_v3_config(options: FixtureOptions, special: dict):
    from transformers import DeepseekV3Config

    return DeepseekV3Config(
        hidden_size=options.hidden_size,
        intermediate_size=options.intermediate_size,
        moe_intermediate_size=options.expert_size // 2,
        num_hidden_layers=options.num_layers,
        first_k_dense_replace=1,  # layer 0 dense, layer 1 MoE (the real model has 3 dense layers first)
        num_attention_heads=options.num_heads,
        num_key_value_heads=options.num_heads,
        n_routed_experts=options.num_experts,
        n_shared_experts=1,
        num_experts_per_tok=options.experts_per_token,
        n_group=1,
        topk_group=1,
        # Multi-head latent attention: queries and keys/values through low-rank projections.
        q_lora_rank=32,
        kv_lora_rank=32,
        qk_rope_head_dim=8,
        qk_nope_head_dim=16,
        v_head_dim=16,
        num_nextn_predict_layers=0,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=False,
        **special,
    )


_CONFIGS = {"llama": _llama_config, "beam": _beam_config, "gpt_oss": _gpt_oss_config, "deepseek_v3": _deepseek_v3_config}


def build_fixture(
    out_dir: str | Path, *, with_model: bool = True, options: FixtureOptions = FixtureOptions(),
    arch: str | None = None,
) -> Path:
    """Write the fixture checkpoint to ``out_dir`` and return it (``arch`` overrides ``options.arch``)."""
    import dataclasses

    if arch is not None:
        options = dataclasses.replace(options, arch=arch)
    if options.arch not in ARCHES:
        raise ValueError(f"unknown fixture arch {options.arch!r} (known: {', '.join(ARCHES)})")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(options)
    tokenizer.save_pretrained(out)
    if with_model:
        build_model(tokenizer, options).save_pretrained(out)
    return out
