"""Which encoder a run uses: the fast one when it is supported here and its start-up probe matches
``apply_chat_template`` on awkward rows and the run's first rows; otherwise the template encoder."""

from __future__ import annotations

import logging

from beam_sft.compat import chat_template
from beam_sft.encode.fast import encoder as fast_encoder
from beam_sft.encode.fast import probe as fast_probe
from beam_sft.encode.template_encode import TemplateEncoder
from beam_sft.errors import ConfigError

logger = logging.getLogger("beam_sft.encode")


def choose_encoder(choice: str, tokenizer, sample: list[dict]):
    """(kind, encoder, report section). ``auto`` falls back to the template encoder on any doubt;
    ``fast`` raises ConfigError where ``auto`` would fall back; ``template`` is always the reference."""
    if choice == "template":
        return "template", TemplateEncoder(tokenizer), {"name": "template", "reason": "requested"}
    reasons = chat_template.encoder_problems()
    if not reasons:
        reasons = fast_encoder.unsupported_reasons(tokenizer)
    if reasons:
        problem = "; ".join(reasons)
    else:
        try:
            fast = fast_encoder.FastEncoder(tokenizer)
            result = fast_probe.probe(fast, TemplateEncoder(tokenizer), fast_probe.probe_rows() + sample)
        except Exception as exc:  # e.g. a transformers version whose internals moved: be slow, not wrong
            result = None
            problem = f"fast encoder failed to start: {type(exc).__name__}: {exc}"
        if result is not None and result.ok:
            return "fast", fast, {"name": "fast", "probe": result.to_json(), "word_path": fast.words is not None}
        if result is not None:
            problem = f"start-up probe mismatch: {result.mismatch}"
    if choice == "fast":
        raise ConfigError("encoder", f"the fast encoder cannot be used here: {problem}")
    logger.warning("falling back to the template encoder: %s", problem)
    return "template", TemplateEncoder(tokenizer), {"name": "template", "fallback_reason": problem}


def make_encoder(kind: str, tokenizer):
    """A fresh encoder of ``kind`` (a spawned worker that did not inherit the parent's)."""
    if kind == "fast":
        return fast_encoder.FastEncoder(tokenizer)
    return TemplateEncoder(tokenizer)
