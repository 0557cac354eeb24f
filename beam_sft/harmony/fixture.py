"""Build the offline test/demo checkpoint: a small byte-level BPE tokenizer with the Harmony
markers, beam-sft's chat and response templates, and a tiny random causal LM that matches it.

Three architectures (``ARCHES``), all sharing the tokenizer:

* ``llama``: a dense Llama (the default; the demo and most tests).
* ``gpt_oss``: the closest public stand-in for Beam: mixture of experts with fused expert tensors
  (4 experts, top-2, a router with a load-balancing aux loss), attention sinks, and ``layer_types``
  three sliding-window layers to one full layer, with a window (16 tokens) shorter than the test
  rows so the sliding layers really slide.
* ``deepseek_v3``: mixture of experts with a shared expert and multi-head latent attention (MLA),
  one dense layer first as in the real model.

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


ARCHES = ("llama", "gpt_oss", "deepseek_v3")


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
    core.train_from_iterator(_training_text(), trainer=trainer)

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


_CONFIGS = {"llama": _llama_config, "gpt_oss": _gpt_oss_config, "deepseek_v3": _deepseek_v3_config}


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
