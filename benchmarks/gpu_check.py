"""One prepared check on one CUDA GPU: throughput (padded TRL default vs the packed recipe), MFU,
peak memory against `beam-sft plan`, and packing isolation in bf16 for every attention implementation.

    make gpu-check                                   # = python benchmarks/gpu_check.py
    python benchmarks/gpu_check.py --dry-run         # CPU, tiny config, two steps: the default tests run it

What it does, on the same prepared rows (multi-turn conversations with reasoning and tool calls,
lengths log-uniform from a few hundred to 16k tokens, prepared by `beam-sft prepare` with the
offline fixture tokenizer):

1. Picks the largest Beam config of a ladder (``--arch beam``, the default: ``BeamForCausalLM`` from
   transformers' own ``BeamConfig``, with Beam's 256 experts, top-8 grouped sigmoid routing
   (8 groups, 4 chosen), head_dim 128, 151,936-entry vocabulary, sliding-window and full NoPE
   layers, the output gate and soft-capped logits; only the width and the depth are scaled down;
   ``--arch llama`` or ``gpt_oss`` for the look-alikes) whose full bf16 fine-tune with AdamW fits
   this GPU by `beam-sft plan` (capped by ``--max-params``, so the whole check stays under 8
   minutes), builds it from the config
   with random weights (no download) and trains it ``--steps`` steps through `beam-sft train`'s own
   trainer twice: (a) TRL's default, padded batches without packing, pre-flight off; (b) the
   project's recipe, packing (bfd, padding-free) with the pre-flight and the isolation check on.
   For each: non-padding tokens/s, MFU (6 x active parameters x tokens/s over the GPU's dense bf16
   peak, the peak stated), step time, peak memory; and the ratio (b)/(a).
2. ``torch.cuda.max_memory_allocated()`` of each run against the plan's figure for the same config,
   micro-batch and length.
3. The pre-flight's packed-versus-alone logits comparison in bf16 for every attention implementation
   available here (sdpa, eager, flex_attention, flash_attention_2/3 when installed), with the
   tolerance it uses and the largest difference seen.

It writes one JSON file (``--out``, default ``benchmarks/results/gpu-check-<gpu>.json``) and prints
a table. Nothing goes to the network.

Bringing it to an offline GPU machine (nothing but the CUDA build of torch needs to be there):

    # on a machine with network, same OS/CPU architecture and Python as the GPU machine:
    pip download -d wheels/ -r <(pip freeze --exclude-editable | grep -v -E '^(torch|nvidia-|triton)')
    pip wheel --no-deps -w wheels/ .            # beam-sft itself
    # copy the repository and wheels/ over, then on the GPU machine (its CUDA torch already installed):
    pip install --no-index --find-links wheels/ beam-sft[deepspeed]
    python benchmarks/gpu_check.py             # or: make gpu-check
    # optional, to include it in the isolation check: a flash-attn wheel built for that torch/CUDA.

Where the GPU machine's image already has torch, numpy, pandas, pyarrow >= 24, tokenizers 0.23,
huggingface_hub >= 1.31, safetensors, jinja2, pyyaml, regex and tqdm (the 2026-12-05 H100 run: torch
2.11.0+cu130, Python 3.12), eight pure-Python wheels at the pinned versions are enough, about 17 MB:
transformers, trl, peft, accelerate, datasets, dill, multiprocess, fsspec
(``pip download --no-deps --only-binary=:all: --python-version 3.12 ...``), installed with
``pip install --no-index --no-deps --target /tmp/site`` and ``PYTHONPATH=/tmp/site:$PWD``.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# Dense bf16 peak, TFLOPS (no sparsity), by a substring of torch.cuda.get_device_name().
BF16_PEAK_TFLOPS = {"H200": 989.0, "H100 SXM": 989.0, "H100 NVL": 835.0, "H100 PCIe": 756.0, "H100": 989.0,
                    "H20": 148.0, "B200": 2250.0, "GH200": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 70.0,
                    "L4": 121.0}
WORDS = ("the model reads each tool result before it answers and checks the units twice so that "
         "weather in paris is eighteen degrees while the sum of seven and five is twelve which "
         "means we call the function again with the next city and report back briefly").split()


# ---------------------------------------------------------------- rows, prepared once

def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(max(1, words)))


def synth_rows(n: int, *, min_tokens: int, max_tokens: int, seed: int = 0) -> list[dict]:
    """Multi-turn rows with reasoning on every assistant turn and tool calls, lengths log-uniform."""
    rng = random.Random(seed)
    weather = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    rows = []
    for i in range(n):
        target = int(math.exp(rng.uniform(math.log(min_tokens), math.log(max_tokens))))
        turns = max(1, min(6, target // 400 + 1))
        per_turn = max(8, target // (turns * 3))  # about a word a token with the fixture tokenizer
        messages = [{"role": "system", "content": "Answer briefly. Think first."}]
        for t in range(turns):
            messages.append({"role": "user", "content": _text(rng, per_turn // 4)})
            if t % 2 == 1:
                call = {"id": f"call_{i}_{t}", "type": "function",
                        "function": {"name": "get_weather", "arguments": {"city": rng.choice(["Paris", "Oslo"])}}}
                messages.append({"role": "assistant", "reasoning_content": _text(rng, per_turn), "tool_calls": [call]})
                messages.append({"role": "tool", "tool_call_id": call["id"], "name": "get_weather",
                                 "content": _text(rng, per_turn // 4)})
            messages.append({"role": "assistant", "reasoning_content": _text(rng, per_turn),
                             "content": _text(rng, per_turn // 2)})
        rows.append({"messages": messages, "tools": [weather]})
    return rows


def prepare(work: Path, rows: list[dict], tokenizer_dir: Path, max_length: int) -> Path:
    from beam_sft.cli import main as beam_sft

    source = work / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = work / "prepared"
    code = beam_sft(["prepare", "--data", str(source), "--format", "openai", "--tokenizer", str(tokenizer_dir),
                     "--output", str(out), "--max-length", str(max_length), "--num-proc", "1"])
    if code:
        raise SystemExit(f"gpu_check: beam-sft prepare failed ({code})")
    return out


# ---------------------------------------------------------------- the model, sized by the plan

def model_config(arch: str, *, hidden: int, layers: int, vocab: int, experts: int = 8, top_k: int = 2,
                 heads: int | None = None):
    """A config built directly from transformers (not through the fixture), random init, no download."""
    import transformers

    if arch == "beam":
        return beam_config(hidden=hidden, layers=layers, vocab=vocab, experts=experts, top_k=top_k, heads=heads)
    heads = heads or max(4, hidden // 64)
    kv = max(1, heads // 8) if heads >= 8 else 2
    if arch == "gpt_oss":
        return transformers.GptOssConfig(
            vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden, num_hidden_layers=layers,
            num_attention_heads=heads, num_key_value_heads=kv, head_dim=64, num_local_experts=experts,
            num_experts_per_tok=top_k, sliding_window=128,
            layer_types=(["sliding_attention"] * 3 + ["full_attention"]) * (layers // 4) + ["full_attention"] * (layers % 4),
            tie_word_embeddings=False, max_position_embeddings=32768)
    return transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=int(hidden * 8 / 3) // 64 * 64,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
        tie_word_embeddings=False, max_position_embeddings=32768)


def beam_config(*, hidden: int, layers: int, vocab: int, experts: int, top_k: int, heads: int | None = None):
    """Beam's own config with its released proportions, narrower and shallower: BeamConfig() is
    hidden 5120, 48 heads of 128 over 8 KV heads, dense MLP 4x hidden, experts hidden/2, 3 dense
    layers of 52, 256 experts in 8 groups (4 chosen), top-8. Layer types, RoPE per layer type and the
    soft cap are BeamConfig's own defaults, so every sixth layer and the last are full NoPE layers."""
    import transformers

    heads = heads or max(4, hidden // 128)
    groups = 8 if experts % 8 == 0 and experts >= 64 else 2
    dense = max(1, round(layers * 3 / 52))
    return transformers.BeamConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=4 * hidden, moe_intermediate_size=hidden // 2,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=max(1, heads // 6),
        head_dim=128 if hidden >= 512 else hidden // heads, num_experts=experts, num_experts_per_tok=top_k,
        n_group=groups, topk_group=groups // 2, mlp_layer_types=["dense"] * dense + ["sparse"] * (layers - dense),
        tie_word_embeddings=False, max_position_embeddings=32768)


LADDER = [(512, 8), (768, 12), (1024, 16), (1536, 16), (2048, 20), (2560, 24), (3072, 24), (4096, 28)]
# Beam's ladder keeps its 256 experts: a sparse layer is 384 x hidden^2 parameters (0.4B at 1024).
# Six layers hold five sliding-window layers and one full one, as BeamConfig lays them out.
BEAM_LADDER = [(512, 6), (768, 6), (1024, 6), (768, 12), (1024, 8), (1280, 8), (1536, 6)]
VOCAB = {"beam": 151936, "gpt_oss": 201088, "llama": 128256}
EXPERTS = {"beam": (256, 8), "gpt_oss": (8, 2), "llama": (8, 2)}


def pick_config(arch: str, *, gpu_gib: float, micro_batch: int, max_length: int, max_params: float):
    """The largest config of the ladder whose full bf16 AdamW fine-tune fits one GPU by plan."""
    from beam_sft.train.plan import PlanSetup, plan

    best = None
    experts, top_k = EXPERTS[arch]
    for hidden, layers in BEAM_LADDER if arch == "beam" else LADDER:
        config = model_config(arch, hidden=hidden, layers=layers, vocab=VOCAB[arch], experts=experts, top_k=top_k)
        result = plan(config, PlanSetup(gpus=1, gpus_per_node=1, gpu_memory_gib=gpu_gib, strategy="ddp",
                                        dtype="bfloat16", max_length=max_length, micro_batch=micro_batch,
                                        activation_checkpointing=True))
        fits = result.fits and result.parameters["total"] <= max_params
        if fits and (best is None or result.parameters["total"] > best[1].parameters["total"]):
            best = (config, result)
    if best is None:
        raise SystemExit(f"gpu_check: no {arch} config of the ladder fits {gpu_gib:.1f} GiB")
    return best


def available_arch(requested: str) -> str:
    import transformers

    if requested == "gpt_oss" and not hasattr(transformers, "GptOssConfig"):
        raise SystemExit(f"gpu_check: transformers {transformers.__version__} has no GptOssConfig; use --arch llama")
    return requested


def training_attention(arch: str, device: str, requested: str | None) -> str:
    # transformers 5.24's gpt_oss refuses sdpa (attention sinks), and flex_attention with sinks on the CPU.
    if requested:
        return requested
    if arch == "gpt_oss":
        return "flex_attention" if device == "cuda" else "eager"
    return "sdpa"  # Beam's recipes train under sdpa (sliding windows and NoPE full layers run there)


# ---------------------------------------------------------------- the two training runs

class StepProfile:
    """torch.profiler over two whole training steps (the third and fourth: past warm-up), through
    the trainer's own loop; the operators that took the most device time (CPU time on the CPU)."""

    def __init__(self, device, first: int = 2, steps: int = 2, top: int = 25):
        self.device, self.first, self.last, self.top = device, first, first + steps, top
        self.profiler, self.table = None, None

    def callback(self):
        from transformers import TrainerCallback

        outer = self

        class _Profile(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                if state.global_step == outer.first and outer.profiler is None:
                    from torch.profiler import ProfilerActivity, profile

                    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if outer.device == "cuda" else [])
                    outer.profiler = profile(activities=activities)
                    outer.profiler.__enter__()

            def on_step_end(self, args, state, control, **kwargs):
                if outer.profiler is not None and outer.table is None and state.global_step >= outer.last:
                    outer.profiler.__exit__(None, None, None)
                    outer.table = outer.summary()

        return _Profile()

    def summary(self) -> dict:
        events = self.profiler.key_averages()
        key = "self_device_time_total" if self.device == "cuda" else "self_cpu_time_total"
        if events and not hasattr(events[0], key):  # torch before 2.4 named the device time after CUDA
            key = "self_cuda_time_total"
        total = sum(getattr(e, key, 0) for e in events) or 1
        rows = sorted(events, key=lambda e: getattr(e, key, 0), reverse=True)[: self.top]
        return {"steps": self.last - self.first, "measured": key, "total_ms": round(total / 1000, 3),
                "top": [{"name": e.key, "ms": round(getattr(e, key, 0) / 1000, 3),
                         "share": round(getattr(e, key, 0) / total, 4), "calls": e.count} for e in rows]}


class StepTimer:
    def __init__(self, device):
        self.device, self.times, self._start = device, [], None

    def _sync(self):
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def callback(self):
        from transformers import TrainerCallback

        timer = self

        class _Timer(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                timer._sync()
                timer._start = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                timer._sync()
                timer.times.append(time.perf_counter() - timer._start)

        return _Timer()


def train_run(name: str, *, model_dir: Path, prepared: Path, work: Path, packed: bool, steps: int,
              micro_batch: int, max_length: int, device: str, dtype: str, attn: str,
              profile: bool = False) -> dict:
    import torch

    from beam_sft.train.recipe import recipe_from_dict
    from beam_sft.train.trainer import build, preflight

    sft = {"output_dir": str(work / name), "max_steps": steps, "per_device_train_batch_size": micro_batch,
           "max_length": max_length, "packing": packed, "learning_rate": 1e-5, "lr_scheduler_type": "constant",
           "warmup_steps": 0, "logging_steps": 1, "save_strategy": "no", "report_to": "none",
           "bf16": dtype == "bfloat16", "activation_checkpointing": True, "disable_tqdm": True, "seed": 0,
           "dataloader_num_workers": 0, "dataloader_pin_memory": device == "cuda", "use_cpu": device == "cpu"}
    if packed:
        sft["packing_strategy"] = "bfd"
    recipe = recipe_from_dict({"model": {"path": str(model_dir), "dtype": dtype, "attn_implementation": attn},
                               "data": {"prepared": str(prepared)}, "sft": sft,
                               "preflight": {"enabled": packed}})
    timer = StepTimer(device)
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    first = min(2, max(0, steps - 2))  # past warm-up where the run is long enough (the dry run is not)
    profiler = StepProfile(device, first=first, steps=min(2, steps - first)) if profile else None
    run = build(recipe, callbacks=[timer.callback()] + ([profiler.callback()] if profiler else []))
    report = preflight(run) if packed else None
    run.trainer.train()
    logs = [e for e in run.trainer.state.log_history if "num_tokens" in e]
    tokens = [int(float(e["num_tokens"])) for e in logs]
    per_step = [b - a for a, b in zip([0, *tokens], tokens, strict=False)]
    # The first step carries compilation and allocator warm-up: time the rest when there is a rest.
    timed = slice(1, None) if len(timer.times) > 2 else slice(None)
    seconds, counted = sum(timer.times[timed]), sum(per_step[timed])
    result = {
        "packed": packed, "preflight": packed, "attn_implementation": attn, "steps": len(timer.times), "micro_batch": micro_batch,
        "max_length": max_length, "non_padding_tokens": counted, "seconds": round(seconds, 4),
        "tokens_per_s": round(counted / seconds, 2) if seconds else None,
        "step_time_s": round(seconds / max(1, len(timer.times[timed])), 4),
        "peak_memory_bytes": torch.cuda.max_memory_allocated() if device == "cuda" else None,
        "losses": [e["loss"] for e in run.trainer.state.log_history if "loss" in e],
    }
    if report is not None:
        result["preflight_report"] = report.to_dict()
    if profiler is not None and profiler.table is not None:
        result["profile"] = profiler.table
    del run
    if device == "cuda":
        torch.cuda.empty_cache()
    return result


# ---------------------------------------------------------------- isolation in bf16

def attention_implementations(device: str) -> list[str]:
    import importlib.util

    impls = ["sdpa", "eager"]
    if device == "cuda":
        impls.append("flex_attention")
        if importlib.util.find_spec("flash_attn") is not None:
            impls.append("flash_attention_2")
        if importlib.util.find_spec("flash_attn_interface") is not None:
            impls.append("flash_attention_3")
    return impls


def packed_batch(prepared: Path, device: str, *, sequences: int = 4, max_tokens: int = 4096) -> dict:
    """A padding-free packed batch as TRL's collator yields it: sequences end to end, positions restart."""
    import torch
    from datasets import load_from_disk

    dataset = load_from_disk(str(prepared))
    ids, positions = [], []
    for row in dataset.sort("num_tokens"):
        if len(ids) + row["num_tokens"] > max_tokens or len(positions) >= sequences:
            break
        positions.append(len(ids))
        ids.extend(row["input_ids"])
    position_ids = torch.cat([torch.arange(e - s) for s, e in zip(positions, [*positions[1:], len(ids)], strict=True)])
    return {"input_ids": torch.tensor([ids], device=device), "position_ids": position_ids[None].to(device)}


def isolation(model_dir: Path, prepared: Path, device: str, pad_token_id: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    from beam_sft.train.packing import isolation_diff
    from beam_sft.train.trainer import MODEL_CHANGES, apply_model_changes

    # the model as training changes it (cache off, masks per layer type, fp32 routing), adapters aside
    changes = tuple(c for c in MODEL_CHANGES if c.name != "lora_adapters")
    batch = packed_batch(prepared, device)
    out = {}
    for impl in attention_implementations(device):
        try:
            model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16, attn_implementation=impl)
            apply_model_changes(model, None, changes)
            result = isolation_diff(model.to(device), batch, pad_token_id=pad_token_id)
            out[impl] = {"max_abs_diff": result.max_abs_diff, "tolerance": result.tolerance, "ok": result.ok,
                         "leak_diff": result.leak_diff, "leak_tolerance": result.leak_tolerance,
                         "alone_decides": result.alone_decides, "compute_dtype": result.compute_dtype,
                         "compared_sequences": result.compared_sequences, "dtype": "bfloat16"}
            del model
        except Exception as exc:  # an implementation that cannot run here is reported, not fatal
            out[impl] = {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        if device == "cuda":
            torch.cuda.empty_cache()
    return out


# ---------------------------------------------------------------- main

def gpu_name(device: str) -> str:
    import torch

    return torch.cuda.get_device_name(0) if device == "cuda" else f"cpu ({platform.processor() or platform.machine()})"


def peak_tflops(name: str, override: float | None) -> float | None:
    if override:
        return override
    return next((v for k, v in BF16_PEAK_TFLOPS.items() if k in name), None)


def run(args) -> dict:
    import torch
    import transformers
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from beam_sft.harmony.fixture import build_fixture
    from beam_sft.train.plan import GIB, PlanSetup, plan

    device = "cuda" if torch.cuda.is_available() and not args.dry_run else "cpu"
    if device == "cpu" and not args.dry_run:
        raise SystemExit("gpu_check: no CUDA device; run with --dry-run for the CPU check of the script itself")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    arch = available_arch(args.arch)
    dtype = "float32" if args.dry_run else "bfloat16"
    tokenizer_dir = build_fixture(work / "tokenizer", with_model=False)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)

    if args.dry_run:
        rows = synth_rows(args.rows or 24, min_tokens=60, max_tokens=400)
        max_length, micro_batch = 512, 2
        # Beam at 6 layers keeps its sliding/full pattern; 8 experts in 2 groups, top-2, on the CPU.
        config = model_config(arch, hidden=64, layers=6 if arch == "beam" else 4, vocab=len(tokenizer),
                              experts=8 if arch == "beam" else 4, heads=4)
        gpu_gib = None
    else:
        max_length, micro_batch = args.max_length or (8192 if arch == "beam" else 16384), 2
        rows = synth_rows(args.rows or 256, min_tokens=300, max_tokens=max_length)
        gpu_gib = torch.cuda.get_device_properties(0).total_memory / GIB
        config, _ = pick_config(arch, gpu_gib=gpu_gib - 3, micro_batch=micro_batch, max_length=max_length,
                                max_params=args.max_params)
    prepared = prepare(work, rows, tokenizer_dir, max_length)

    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    experts_implementation = getattr(model.config, "_experts_implementation", None)
    model.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids("<|return|>")
    model_dir = work / "model"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    del model
    counts = plan(config).parameters

    runs = {}
    for name, packed in (("padded_trl_default", False), ("packed_recipe", True)):
        try:
            runs[name] = train_run(name, model_dir=model_dir, prepared=prepared, work=work, packed=packed,
                                   steps=args.steps, micro_batch=1 if packed else micro_batch,
                                   max_length=max_length, device=device, dtype=dtype,
                                   attn=training_attention(arch, device, args.attn), profile=packed)
        except Exception as exc:
            runs[name] = {"error": f"{type(exc).__name__}: {str(exc)[:500]}"}
    name = gpu_name(device)
    peak = peak_tflops(name, args.peak_tflops)
    memory = {}
    for key, result in runs.items():
        if "tokens_per_s" in result and result["tokens_per_s"]:
            result["mfu"] = (6 * counts["active"] * result["tokens_per_s"] / (peak * 1e12)) if peak else None
        if "micro_batch" in result:
            expected = plan(config, PlanSetup(gpus=1, gpus_per_node=1, gpu_memory_gib=gpu_gib or 1.0, strategy="ddp",
                                              dtype=dtype, max_length=max_length, micro_batch=result["micro_batch"],
                                              activation_checkpointing=True, reserve_gib=0.0))
            measured = result.get("peak_memory_bytes")
            memory[key] = {"plan_bytes": expected.total_bytes, "measured_bytes": measured,
                           "plan_components": expected.per_gpu_bytes,
                           "ratio_measured_over_plan": round(measured / expected.total_bytes, 4) if measured else None}
    a, b = runs.get("padded_trl_default", {}), runs.get("packed_recipe", {})
    ratio = (b["tokens_per_s"] / a["tokens_per_s"]) if a.get("tokens_per_s") and b.get("tokens_per_s") else None
    return {
        "dry_run": args.dry_run, "gpu": name, "bf16_peak_tflops": peak, "device": device,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__,
                     "cuda": torch.version.cuda},
        "arch": arch, "config": {k: v for k, v in config.to_dict().items()
                                 if k in ("hidden_size", "num_hidden_layers", "num_local_experts", "num_experts",
                                          "num_experts_per_tok", "n_group", "topk_group", "intermediate_size",
                                          "moe_intermediate_size", "vocab_size", "layer_types", "mlp_layer_types",
                                          "final_logit_softcapping", "sliding_window")},
        "experts_implementation": experts_implementation,
        "parameters": {"total": counts["total"], "active": counts["active"]},
        "rows": len(rows), "max_length": max_length,
        "runs": runs, "ratio_packed_over_padded": round(ratio, 3) if ratio else None,
        "memory_vs_plan": memory,
        "isolation": isolation(model_dir, prepared, device, tokenizer.pad_token_id),
    }


def table(results: dict) -> str:
    lines = [f"GPU: {results['gpu']}  (bf16 peak {results['bf16_peak_tflops']} TFLOPS)   arch {results['arch']}: "
             f"{results['parameters']['total']:,} parameters, {results['parameters']['active']:,} active",
             f"{'run':<20}{'tokens/s':>12}{'MFU':>8}{'step s':>9}{'peak GiB':>10}{'plan GiB':>10}"]
    for name, r in results["runs"].items():
        if "error" in r:
            lines.append(f"{name:<20}  error: {r['error']}")
            continue
        mem = results["memory_vs_plan"].get(name, {})
        peak = f"{r['peak_memory_bytes'] / 2**30:.1f}" if r.get("peak_memory_bytes") else "-"
        planned = f"{mem['plan_bytes'] / 2**30:.1f}" if mem.get("plan_bytes") else "-"
        mfu = f"{r['mfu']:.1%}" if r.get("mfu") is not None else "-"
        lines.append(f"{name:<20}{r['tokens_per_s'] or 0:>12.0f}{mfu:>8}{r['step_time_s']:>9.3f}{peak:>10}{planned:>10}")
    lines.append(f"packed / padded throughput: {results['ratio_packed_over_padded']}")
    profile = results["runs"].get("packed_recipe", {}).get("profile")
    if profile:
        lines.append(f"packed recipe, {profile['steps']} steps profiled ({profile['measured']}, "
                     f"{profile['total_ms']:.1f} ms), top operators:")
        lines.extend(f"  {r['share']:>6.1%} {r['ms']:>10.1f} ms {r['calls']:>6}x  {r['name'][:70]}"
                     for r in profile["top"][:12])
    lines.append("isolation in bf16, max |logit diff| / tolerance: one sequence changed (decides) | packed vs alone")
    for impl, r in results["isolation"].items():
        if "error" in r:
            lines.append(f"  {impl:<20}not run: {r['error']}")
            continue
        alone = f"{r['max_abs_diff']:.4g} / {r['tolerance']:.4g}" + ("" if r["alone_decides"] else " (reported)")
        lines.append(f"  {impl:<20}{r['leak_diff']:.4g} / {r['leak_tolerance']:.4g} | {alone}  "
                     f"{'ok' if r['ok'] else 'LEAKS'}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny config, two steps (no CUDA needed)")
    parser.add_argument("--arch", default="beam", choices=["beam", "llama", "gpt_oss"],
                        help="model shape (default beam: transformers' BeamForCausalLM, scaled to one GPU; "
                             "llama and gpt_oss are look-alikes for comparison)")
    parser.add_argument("--attn", help="attention implementation for training (default: sdpa; gpt_oss: "
                                       "flex_attention on CUDA, eager on the CPU, since it refuses sdpa)")
    parser.add_argument("--steps", type=int, help="training steps per run (default 8; 2 with --dry-run)")
    parser.add_argument("--rows", type=int)
    parser.add_argument("--max-length", type=int, help="default 8192 for beam (its recipes), else 16384")
    parser.add_argument("--max-params", type=float, default=4e9, help="cap on the model size (time budget)")
    parser.add_argument("--peak-tflops", type=float, help="the GPU's dense bf16 peak, if not in the table")
    parser.add_argument("--work", default="out/gpu-check")
    parser.add_argument("--out", help="results JSON (default benchmarks/results/gpu-check-<gpu>.json)")
    args = parser.parse_args(argv)
    args.steps = args.steps or (2 if args.dry_run else 8)
    results = run(args)
    slug = "dry-run" if args.dry_run else "".join(c if c.isalnum() else "-" for c in results["gpu"]).strip("-").lower()
    out = Path(args.out or REPO / "benchmarks" / "results" / f"gpu-check-{slug}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    print(table(results))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
