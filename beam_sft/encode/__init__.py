"""Rows -> ``input_ids`` + ``assistant_masks``, identical to the tokenizer's chat template.

- ``encode_row(row, tokenizer)``: one BeamRow, exactly as ``apply_chat_template`` encodes it, with
  weight-0 turns zeroed (the reference for everything else).
- ``prepare(config)``: sources -> a prepared dataset directory (``beam-sft prepare``).
- ``PrepareConfig`` / ``SourceSpec``: its typed configuration.
- ``FastEncoder``: the batched encoder ``prepare`` uses once its start-up probe passes.
"""

from beam_sft.encode.config import PrepareConfig, SourceSpec, load_prepare_config
from beam_sft.encode.pipeline import prepare
from beam_sft.encode.template_encode import encode_row


def __getattr__(name: str):
    if name == "FastEncoder":  # imports numpy-heavy code only when asked for
        from beam_sft.encode.fast import FastEncoder

        return FastEncoder
    raise AttributeError(name)


__all__ = ["FastEncoder", "PrepareConfig", "SourceSpec", "encode_row", "load_prepare_config", "prepare"]
