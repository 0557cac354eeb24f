"""Rows -> ``input_ids`` + ``assistant_masks``, identical to the tokenizer's chat template. Nothing else:
reading, mixing, saving and verifying are ``beam_sft.prepare``'s job.

- ``encode_row(row, tokenizer)``: one BeamRow, exactly as ``apply_chat_template`` encodes it, with
  weight-0 turns zeroed (the reference for everything else); ``TemplateEncoder`` the same in batches.
- ``beam_sft.encode.fast``: the batched encoder ``prepare`` uses once its start-up probe passes.
- ``choose_encoder``: which of the two a run uses, and why.
- ``length`` (the length policy), ``weights`` (per-turn weights), ``encoded`` (the ``Encoded`` value).
"""

from beam_sft.encode.encoded import Encoded
from beam_sft.encode.template_encode import TemplateEncoder, encode_row

__all__ = ["Encoded", "TemplateEncoder", "encode_row"]
