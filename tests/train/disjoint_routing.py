"""``accelerate launch ... tests/train/disjoint_routing.py --config R.yaml``: train with every rank
routing its tokens to experts no other rank uses (rank r -> experts 2r and 2r+1), then record which
experts each rank really used in ``$BEAM_ROUTING_DIR/rank<r>.json``.

The routers are patched (tests only) so that the routing is disjoint whatever the data: under ZeRO-3
or FSDP a rank that skipped an expert's parameters while the others gathered them would hang.
Beam's router (sigmoid scores, correction bias) keeps its own logits and weights the two chosen
experts by its own scores; gpt-oss's and DeepSeek-V3's by a softmax of their logits.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from pathlib import Path


def route_by_rank() -> None:
    import torch
    from transformers.models.beam import modeling_beam
    from transformers.models.deepseek_v3 import modeling_deepseek_v3
    from transformers.models.gpt_oss import modeling_gpt_oss

    rank = int(os.environ.get("RANK", "0"))
    used: set[int] = set()

    def chosen_for(flat):
        chosen = torch.tensor([2 * rank, 2 * rank + 1], device=flat.device).expand(flat.shape[0], 2)
        used.update(chosen.unique().tolist())
        return chosen

    def patch(cls):
        def forward(self, hidden_states):
            flat = hidden_states.reshape(-1, hidden_states.shape[-1])
            logits = torch.nn.functional.linear(flat.float(), self.weight.float(),
                                                getattr(self, "bias", None) if getattr(self, "bias", None) is None
                                                else self.bias.float()).to(flat.dtype)
            chosen = chosen_for(flat)
            weights = torch.softmax(logits.gather(1, chosen), dim=-1)  # differentiable: the router trains
            return logits, weights.to(flat.dtype), chosen

        cls.forward = forward

    def beam_forward(self, hidden_states):
        flat = hidden_states.view(-1, self.hidden_dim)
        logits = torch.nn.functional.linear(flat.float(), self.weight.float())
        chosen = chosen_for(flat)
        weights = logits.sigmoid().gather(1, chosen)  # Beam's own weighting: normalised sigmoid scores
        return logits, weights / (weights.sum(dim=-1, keepdim=True) + 1e-20), chosen

    patch(modeling_gpt_oss.GptOssTopKRouter)
    patch(modeling_deepseek_v3.DeepseekV3TopkRouter)
    modeling_beam.BeamTopKRouter.forward = beam_forward

    def record():
        out = Path(os.environ["BEAM_ROUTING_DIR"])
        out.mkdir(parents=True, exist_ok=True)
        (out / f"rank{rank}.json").write_text(json.dumps(sorted(used)))

    atexit.register(record)


if __name__ == "__main__":
    route_by_rank()
    from beam_sft.cli import main

    sys.exit(main(["train", *sys.argv[1:]]))
