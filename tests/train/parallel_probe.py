"""Run under ``torchrun --nproc_per_node 2`` on the CPU (gloo): which of transformers'
``DistributedConfig`` (tensor / expert / FSDP parallelism inside ``from_pretrained``) and accelerate's
``ParallelismConfig`` work here. For each mode it loads a tiny model sharded that way, compares the
logits with the unsharded model's, and tries one backward + optimizer step. Rank 0 writes
``OUT/results.json``: mode -> {"ok", "max_logit_diff", "backward", "error"}.

``python tests/train/parallel_probe.py OUT --build`` (one process) first writes the tiny models.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import torch

IDS = torch.tensor([[5, 17, 300, 42, 7, 99, 3, 250, 11, 64, 2, 180]])


def build(out: Path) -> None:
    from transformers import AutoModelForCausalLM, GptOssConfig, LlamaConfig

    torch.manual_seed(0)
    llama = LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
    gpt_oss = GptOssConfig(vocab_size=512, hidden_size=64, intermediate_size=48, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=4,
                           num_experts_per_tok=2, sliding_window=8, layer_types=["sliding_attention", "full_attention"])
    for name, config in (("llama", llama), ("gpt_oss", gpt_oss)):
        model = AutoModelForCausalLM.from_config(config)
        model.save_pretrained(out / name)
        model.eval()
        with torch.no_grad():
            torch.save(model(IDS).logits, out / f"{name}-logits.pt")


def _full(t):
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def try_transformers(out: Path, name: str, **kwargs) -> dict:
    from transformers import AutoModelForCausalLM
    from transformers.distributed import DistributedConfig

    model = AutoModelForCausalLM.from_pretrained(out / name, distributed_config=DistributedConfig(**kwargs))
    held = _held_fraction(model)
    model.eval()
    with torch.no_grad():
        logits = _full(model(IDS).logits)
    diff = float((logits - torch.load(out / f"{name}-logits.pt")).abs().max())
    model.train()
    loss = model(IDS, labels=IDS).loss
    loss.backward()
    torch.optim.AdamW(model.parameters(), lr=1e-3).step()
    return {"ok": diff < 1e-4, "max_logit_diff": diff, "backward": True, **held}


def _held_fraction(model) -> dict:
    """The fraction of all parameters, and of the expert parameters, this rank holds locally."""
    def local(p):
        return p.to_local().numel() if hasattr(p, "to_local") else p.numel()

    params = list(model.named_parameters())
    experts = [(n, p) for n, p in params if ".experts." in n]
    out = {"held_fraction": sum(local(p) for _, p in params) / sum(p.numel() for _, p in params)}
    if experts:
        out["expert_held_fraction"] = sum(local(p) for _, p in experts) / sum(p.numel() for _, p in experts)
    return out


def try_accelerate(out: Path, name: str, **kwargs) -> dict:
    from accelerate import Accelerator
    from accelerate.parallelism_config import ParallelismConfig
    from transformers import AutoModelForCausalLM

    accelerator = Accelerator(cpu=True, parallelism_config=ParallelismConfig(**kwargs))
    model = AutoModelForCausalLM.from_pretrained(out / name, device_mesh=accelerator.torch_device_mesh,
                                                 tp_plan="auto" if kwargs.get("tp_size", 1) > 1 else None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    model.eval()
    with torch.no_grad():
        logits = _full(model(IDS).logits)
    diff = float((logits - torch.load(out / f"{name}-logits.pt")).abs().max())
    model.train()
    accelerator.backward(model(IDS, labels=IDS).loss)
    optimizer.step()
    return {"ok": diff < 1e-4, "max_logit_diff": diff, "backward": True}


MODES = {
    "transformers tp_size=2 (llama)": (try_transformers, "llama", {"tp_size": 2}),
    "transformers tp_size=2 (gpt_oss)": (try_transformers, "gpt_oss", {"tp_size": 2}),
    "transformers ep_size=2 (gpt_oss)": (try_transformers, "gpt_oss", {"ep_size": 2}),
    "transformers ep_size=2 fsdp_size=2 (gpt_oss)": (try_transformers, "gpt_oss", {"ep_size": 2, "fsdp_size": 2}),
    "transformers ep_size=2 tp_size=2 (gpt_oss)": (try_transformers, "gpt_oss", {"ep_size": 2, "tp_size": 2}),
    "transformers fsdp_size=2 (llama)": (try_transformers, "llama", {"fsdp_size": 2}),
    "transformers fsdp_size=2 (gpt_oss)": (try_transformers, "gpt_oss", {"fsdp_size": 2}),
    "accelerate tp_size=2 (llama)": (try_accelerate, "llama", {"tp_size": 2}),
    "accelerate dp_shard_size=2 (llama)": (try_accelerate, "llama", {"dp_shard_size": 2}),
}


def failure(exc: Exception) -> dict:
    """A mode that raised, recorded with where (file:line, inside site-packages) it was refused."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = [f"{Path(f.filename).as_posix().split('site-packages/')[-1]}:{f.lineno}" for f in frames]
    return {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:400]}", "where": where[-1] if where else "",
            "stack": where[-6:]}


def run(build_fn, modes_fn) -> int:
    """``SCRIPT OUT --build`` builds; ``SCRIPT OUT`` runs each mode of ``modes_fn(OUT)`` (name -> a
    call returning its result), or only ``$PROBE_MODE``; rank 0 writes the results as JSON."""
    import os

    out = Path(sys.argv[1])
    if "--build" in sys.argv:
        build_fn(out)
        return 0
    only = os.environ.get("PROBE_MODE")
    rank = int(os.environ.get("RANK", "0"))
    results = {}
    for mode, call in modes_fn(out).items():
        if only and only != mode:
            continue
        try:
            results[mode] = call()
        except Exception as exc:  # recorded: the point is to find out what runs, and where it stops
            results[mode] = failure(exc)
    if rank == 0:
        name = f"results-{only.replace(' ', '_')}.json" if only else "results.json"
        (out / name).write_text(json.dumps(results, indent=2))
    return 0


def main() -> int:
    from functools import partial

    return run(build, lambda out: {mode: partial(fn, out, name, **kwargs)
                                   for mode, (fn, name, kwargs) in MODES.items()})


if __name__ == "__main__":
    sys.exit(main())
