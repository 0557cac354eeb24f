"""Packed against alone, per packed sequence, on Beam: rounding or a leak?

The first packed sequence has nothing before it to leak from, so its difference from itself alone is
the rounding of the two shapes (the noise floor); the later ones add any leak. Runs float32 and bf16,
Beam's default router init and one spread as a trained router's, sdpa / eager / flex_attention, with
and without the trainer's per-layer-type masks (``keep_packed_sequences_apart``). README, "Measured on
a GPU", quotes its H100 run (``benchmarks/results/gpu-isolation-noise-h100.json``).

    python benchmarks/gpu_isolation_noise.py --out result.json            # one CUDA GPU (about 2 minutes)
    python benchmarks/gpu_isolation_noise.py --dry-run --out result.json  # CPU, tiny Beam (the tests run it)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
LENGTHS = (700, 900, 650, 800, 600)  # longer than Beam's 512-token window: the windows slide


def _gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def spread_routers(model, seed: int = 7) -> None:
    """Router weights std 0.5 and correction biases std 0.05: scores spread over (0, 1) as a trained
    router's are, instead of all near 0.5 (the default init), so fewer choices are near ties."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in model.model.layers:
            router = getattr(layer.mlp, "gate", None)
            if router is None or not hasattr(router, "e_score_correction_bias"):
                continue
            router.weight.copy_(torch.randn(router.weight.shape, generator=generator).to(router.weight) * 0.5)
            bias = router.e_score_correction_bias
            bias.copy_(torch.randn(bias.shape, generator=generator).to(bias) * 0.05)


def per_sequence(model, ids, positions, lengths) -> list[dict]:
    import torch

    starts = [sum(lengths[:i]) for i in range(len(lengths))]
    with torch.no_grad():
        packed = model(input_ids=ids[None], position_ids=positions[None], use_cache=False).logits[0].float()
        rows = []
        for start, n in zip(starts, lengths, strict=True):
            alone = model(input_ids=ids[None, start:start + n], use_cache=False).logits[0].float()
            diff = (packed[start:start + n] - alone).abs()
            rows.append({"max_first64": round(float(diff[:64].max()), 4),
                         "median_first64": round(float(diff[:64].max(-1).values.median()), 4),
                         "max_all": round(float(diff.max()), 4), "mean_all": round(float(diff.mean()), 5),
                         "top1_agree": round(float((packed[start:start + n].argmax(-1) == alone.argmax(-1)).float().mean()), 4)})
    return rows


def run(dry_run: bool) -> list[dict]:
    import torch
    from transformers import AutoModelForCausalLM

    from beam_sft.train.packing import disable_cache, keep_packed_sequences_apart

    device = "cpu" if dry_run else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_isolation_noise: no CUDA device; --dry-run runs a tiny Beam on the CPU")
    g = _gpu_check()
    vocab = 4096 if dry_run else 151936
    config = (g.model_config("beam", hidden=64, layers=6, vocab=vocab, experts=8, top_k=2, heads=4) if dry_run
              else g.model_config("beam", hidden=768, layers=12, vocab=vocab, experts=256, top_k=8))
    lengths = tuple(n // 4 for n in LENGTHS) if dry_run else LENGTHS
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(*((10, vocab) if dry_run else (1000, 150000)), (sum(lengths),), generator=generator).to(device)
    positions = torch.cat([torch.arange(n) for n in lengths]).to(device)
    out, start = [], time.time()
    for init in ("default", "spread"):
        for dtype in (torch.float32, torch.bfloat16):
            torch.manual_seed(0)
            with torch.device(device):
                model = AutoModelForCausalLM.from_config(config, dtype=dtype)
            if init == "spread":
                spread_routers(model)
            disable_cache(model)
            model.eval()
            impls = ["sdpa", "eager"] + (["flex_attention"] if init == "default" and device == "cuda" else [])
            for impl in impls:
                model.set_attn_implementation(impl)
                for masks in (True, False):
                    decoder = model.model
                    if masks:
                        keep_packed_sequences_apart(model)
                    elif getattr(decoder, "_beam_packed_mask_hook", None) is not None:
                        decoder._beam_packed_mask_hook.remove()
                        decoder._beam_packed_mask_hook = None
                    record = {"init": init, "dtype": str(dtype).removeprefix("torch."), "impl": impl,
                              "our_masks": masks, "per_sequence": per_sequence(model, ids, positions, lengths)}
                    out.append(record)
                    print(json.dumps(record), f"t={time.time() - start:.0f}s", flush=True)
            del model
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny Beam (8 experts), short sequences")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    records = run(args.dry_run)
    Path(args.out).write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
