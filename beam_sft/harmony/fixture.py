"""Build the offline test/demo checkpoint: a small byte-level BPE tokenizer with the Harmony
markers, beam-sft's chat and response templates, and a tiny random causal LM that matches it.

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
    """A tiny random Llama whose vocabulary and special ids match ``tokenizer``."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    stop_ids = [tokenizer.convert_tokens_to_ids(m) for m in markers.STOP_MARKERS]
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=options.hidden_size,
        intermediate_size=options.intermediate_size,
        num_hidden_layers=options.num_layers,
        num_attention_heads=options.num_heads,
        num_key_value_heads=options.num_kv_heads,
        max_position_embeddings=options.max_positions,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=stop_ids,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(options.seed)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=stop_ids, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    return model


def build_fixture(
    out_dir: str | Path, *, with_model: bool = True, options: FixtureOptions = FixtureOptions()
) -> Path:
    """Write the fixture checkpoint to ``out_dir`` and return it."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(options)
    tokenizer.save_pretrained(out)
    if with_model:
        build_model(tokenizer, options).save_pretrained(out)
    return out
