"""Run under ``torchrun --nproc_per_node 2`` on the CPU (gloo): what transformers' expert parallelism
(``from_pretrained(..., distributed_config=DistributedConfig(ep_size=...))``) does with a tiny
``BeamForCausalLM`` (Beam's own ``base_model_ep_plan``: grouped GEMM, ``ep_dispatch_experts``).

Per mode it loads the model sharded that way, compares the logits with the unsharded model's, and
tries one backward + SGD step. Rank 0 writes
``OUT/results-MODE.json``. ``python tests/train/beam_ep_probe.py OUT --build`` (one process) first
writes the tiny model and its reference logits.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from parallel_probe import IDS, _full, _held_fraction, run  # noqa: E402  (a script run by torchrun: its own folder)


def tiny_beam_config():
    """Beam's pattern, tiny: one dense layer first, sliding layers with RoPE, a full NoPE last layer,
    8 experts top-2 in 2 groups, the output gate, the soft cap, an untied head."""
    from transformers import BeamConfig

    return BeamConfig(vocab_size=512, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                      num_hidden_layers=4, mlp_layer_types=["dense", "sparse", "sparse", "sparse"], num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                      num_experts=8, num_experts_per_tok=2, n_group=2, topk_group=1, sliding_window=4,
                      max_position_embeddings=64)


# Each rank feeds its own batch (two data-parallel ranks see different tokens), so a mode whose
# expert dispatch sends a token to the wrong rank's experts cannot match the reference by chance.
RANK_IDS = (IDS, torch.tensor([[9, 400, 33, 8, 120, 6, 77, 501, 2, 45, 310, 14]]))
# Plain SGD, not AdamW: AdamW's first step is about lr * sign(gradient) per parameter, blind to a
# gradient off by any factor (an expert's gradient summed where it should be averaged over the
# data-parallel ranks reads the same) and sensitive instead to the sign of gradients that are zero
# but for rounding. SGD's step is linear in the gradient, so a scale error shows and rounding does not.
LR = 1.0


def _optimizer(params):
    return torch.optim.SGD(params, lr=LR)


def _reference_step(model):
    """One SGD step on the mean of both ranks' losses: what data parallelism over 2 ranks computes."""
    optimizer = _optimizer(model.parameters())
    loss = sum(model(ids, labels=ids).loss for ids in RANK_IDS) / len(RANK_IDS)
    loss.backward()
    optimizer.step()


def build(out: Path) -> None:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_beam_config())
    model.save_pretrained(out / "beam")
    with torch.no_grad():
        before = [model(ids).logits for ids in RANK_IDS]
    _reference_step(model)
    with torch.no_grad():
        after = [model(ids).logits for ids in RANK_IDS]
    torch.save({"before": before, "after": after}, out / "beam-reference.pt")


def try_mode(out: Path, **kwargs) -> dict:
    """Load sharded per ``kwargs``; logits before and after one SGD step against the unsharded
    model's (each rank its own batch when the mode is data-parallel, else both the first)."""
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM
    from transformers.distributed import DistributedConfig

    config = DistributedConfig(**kwargs)
    model = AutoModelForCausalLM.from_pretrained(out / "beam", distributed_config=config)
    held = _held_fraction(model)
    # Made before any forward: FSDP2 leaves the root's parameters unsharded after one, and an
    # optimizer made then would step on those (discarded) tensors instead of the shards.
    optimizer = _optimizer(model.parameters())
    rank = dist.get_rank()
    which = rank if config.dp_size > 1 else 0
    ids = RANK_IDS[which]
    reference = torch.load(out / "beam-reference.pt")
    model.eval()
    with torch.no_grad():
        before = float((_full(model(ids).logits) - reference["before"][which]).abs().max())
    model.train()
    if config.dp_size > 1:
        model(ids, labels=ids).loss.backward()  # FSDP averages the gradients over the data-parallel ranks
    else:  # one data-parallel rank: it computes both batches' mean itself
        (sum(model(i, labels=i).loss for i in RANK_IDS) / len(RANK_IDS)).backward()
    optimizer.step()
    model.eval()
    with torch.no_grad():
        after = float((_full(model(ids).logits) - reference["after"][which]).abs().max())
    router = model.model.layers[1].mlp.gate
    worst = torch.tensor([before, after])
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)  # every rank's batch, not only rank 0's
    before, after = (float(x) for x in worst)
    # How far the step itself moved the reference logits: a comparison after a step that moved
    # nothing would prove nothing.
    step_change = float((reference["after"][which] - reference["before"][which]).abs().max())
    return {"ok": before < 1e-4 and after < 1e-4, "max_logit_diff": before, "max_logit_diff_after_step": after,
            "step_change": step_change, "backward": True, "dp_size": config.dp_size, "router_dtype": str(router.weight.dtype), **held}


MODES = {
    "ep_size=2 fsdp_size=2 all_to_all": {"ep_size": 2, "fsdp_size": 2, "ep_implementation": "all_to_all"},
    "ep_size=2 fsdp_size=2": {"ep_size": 2, "fsdp_size": 2},
    "ep_size=2 tp_size=2": {"ep_size": 2, "tp_size": 2},
    "ep_size=2": {"ep_size": 2},
    "fsdp_size=2": {"fsdp_size": 2},
    "tp_size=2": {"tp_size": 2},
}


def main() -> int:
    from functools import partial

    return run(build, lambda out: {mode: partial(try_mode, out, **kwargs) for mode, kwargs in MODES.items()})


if __name__ == "__main__":
    sys.exit(main())
