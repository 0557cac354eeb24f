"""Local greedy generation for ``beam-sft eval``: each prompt continued by the model, special tokens kept.

One prompt at a time: no padding, so no left/right padding mistake can change a generation, and the
result is what ``transformers serve`` computes for the same prompt (one request, one sequence). The
model stops at its generation config's end tokens (the fixture's: ``<|return|>`` and ``<|call|>``).
torch is imported inside the functions: ``beam-sft --help`` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from beam_sft.evaluate.turns import EvalTurn, render_prompt


def load_model(model_dir: str | Path):
    """The model and tokenizer of a local folder (``dtype="auto"``: the dtype it was saved in, as
    ``transformers serve`` loads it), in eval mode on the CPU."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype="auto")
    model.eval()
    return model, tokenizer


def generate(model, tokenizer, turns: Sequence[EvalTurn], *, max_new_tokens: int,
             progress: Callable[[int], None] | None = None) -> list[str]:
    """The greedy continuation of each turn's prompt (the text after its ``<|start|>assistant``)."""
    import torch

    device = next(model.parameters()).device
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    outputs = []
    for i, turn in enumerate(turns):
        ids = tokenizer(render_prompt(tokenizer, turn), return_tensors="pt", add_special_tokens=False).input_ids
        ids = ids.to(device)
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                                 do_sample=False, use_cache=True, eos_token_id=eos,
                                 pad_token_id=tokenizer.pad_token_id)
        outputs.append(tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=False))
        if progress is not None:
            progress(i + 1)
    return outputs
