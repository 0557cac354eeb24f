"""The main job end to end on the bundled sample data, on the CPU (``make demo``).

1. build the fixture checkpoint (tokenizer + tiny random Llama)      beam_sft.harmony.fixture
2. convert the shipped samples (OpenAI, ShareGPT, Hermes) to BeamRows beam_sft.convert
3. prepare them (encode, masks, length policy)                        beam_sft.encode.prepare
4. verify every row's masks                                           beam_sft.verify
5. train recipes/tiny-cpu.yaml with 2 CPU processes                   accelerate launch ... beam_sft train
   (a tenth of the rows held out: eval loss and format health as it trains)
6. generate from the trained model and parse the output with the response template

Every stage is a public entry point of the package; this script only wires them together and
prints where each artefact went. The model is tiny and random: after a few dozen steps it writes
the Beam Harmony layout (channels, markers), not sense.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a fresh clone without installing

GET_WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
PROMPTS = [
    ([{"role": "user", "content": "What is the capital of Portugal?"}], None),
    ([{"role": "user", "content": "What's the weather in Madrid?"}], [GET_WEATHER]),
]


def stage(title: str):
    print(f"\n== {title}", flush=True)
    return time.time()


def done(started: float, what: str, path: Path | None = None) -> None:
    where = f" -> {path}" if path is not None else ""
    print(f"   {what} ({time.time() - started:.1f} s){where}", flush=True)


def sample_files() -> list[Path]:
    samples = REPO / "beam_sft" / "data" / "samples"
    files = sorted(p for p in samples.iterdir() if p.suffix in (".jsonl", ".json"))
    if not files:
        raise SystemExit(f"no sample data in {samples}")
    return files


def train_command(out: Path, fixture: Path, prepared: Path, model_dir: Path, steps: int | None,
                  processes: int) -> list[str]:
    overrides = ["--model.path", str(fixture), "--data.prepare", "null", "--data.prepared", str(prepared),
                 "--sft.output_dir", str(model_dir)]
    if steps is not None:
        overrides += ["--sft.max_steps", str(steps)]
    train = ["-m", "beam_sft", "train", "--config", str(REPO / "recipes" / "tiny-cpu.yaml"), *overrides]
    if processes == 1:
        return [sys.executable, *train]
    config = REPO / "configs" / "accelerate" / "cpu-ddp.yaml"
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config),
            "--num_processes", str(processes), *train]


def generate(model_dir: Path, seed: int) -> list[dict]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    results = []
    for messages, tools in PROMPTS:
        prompt = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
        torch.manual_seed(seed)
        with torch.no_grad():  # stops at <|return|> or <|call|>: the generation config's eos ids
            output = model.generate(ids, max_new_tokens=160, do_sample=True, temperature=0.7, top_k=20)
        generated = tokenizer.decode(output[0, ids.shape[1]:], skip_special_tokens=False)
        try:
            parsed = tokenizer.parse_response(generated, prefix=prompt, tools=tools)
        except Exception as exc:  # a tiny model can write text the parser refuses; show it, do not hide it
            parsed = {"error": f"{type(exc).__name__}: {exc}"}
        results.append({"messages": messages, "tools": [t["function"]["name"] for t in tools or []],
                        "generated": generated, "parsed": parsed})
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="out/demo", help="where every artefact goes (default: out/demo)")
    parser.add_argument("--steps", type=int, help="training steps (default: the recipe's)")
    parser.add_argument("--processes", type=int, default=2, help="training processes on the CPU (default: 2)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed for the generation")
    args = parser.parse_args(argv)

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    begin = time.time()

    from beam_sft.harmony.fixture import build_fixture

    t = stage("1. fixture checkpoint")
    fixture = build_fixture(out / "fixture")
    done(t, "tokenizer with the Beam Harmony markers, chat and response templates, tiny Llama", fixture)

    from beam_sft.convert import convert_files

    t = stage("2. convert the shipped samples")
    rows, convert_rejects = out / "rows.jsonl", out / "convert_rejects.jsonl"
    report = convert_files(sample_files(), output=rows, rejects=convert_rejects)
    print(report.table())
    done(t, f"{report.kept} BeamRows from {report.read} source rows", rows)
    print(f"   rejected rows with their reason codes -> {convert_rejects}")

    from beam_sft.config_utils import from_dict
    from beam_sft.prepare import PrepareConfig, prepare

    t = stage("3. prepare (encode with the chat template, assistant masks, length policy)")
    config = from_dict(PrepareConfig, {"sources": [{"path": str(rows), "format": "openai", "name": "samples"}],
                                       "tokenizer": str(fixture), "output": str(out / "prepared"),
                                       "max_length": 1024, "verify": False})
    prepared = prepare(config)
    done(t, "dataset + tokenizer/ + report.json + rejects.jsonl", prepared)

    from beam_sft.verify import verify_prepared

    t = stage("4. verify every row")
    result = verify_prepared(prepared)
    if not result.ok:
        print(f"   {len(result.violations)} violations, first: {result.violations[:3]}")
        return 1
    stats = result.stats
    done(t, f"{stats.get('rows')} rows, {stats.get('tokens')} tokens, "
            f"{stats.get('trained_fraction')} of them trained; report", prepared / "report.json")

    t = stage("5. train recipes/tiny-cpu.yaml (pre-flight first)")
    model_dir = out / "model"
    command = train_command(out, fixture, prepared, model_dir, args.steps, args.processes)
    shown = " ".join(str(c) for c in command).replace(f"{sys.executable} -m accelerate.commands.launch", "accelerate launch")
    print("   $ " + shown.replace(sys.executable, "python").replace(f"{REPO}/", ""), flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    log = out / "train.log"
    with log.open("w", encoding="utf-8") as fh:
        code = subprocess.call(command, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)
    if code != 0:
        print(log.read_text(encoding="utf-8")[-4000:])
        print(f"   training failed (exit {code}); full log: {log}")
        return code
    from beam_sft.train.callbacks import read_losses
    from beam_sft.train.format_health import read_health
    from beam_sft.train.run_log import read_metrics

    losses = read_losses(model_dir)
    curve = ", ".join(f"{r['step']}: {r['loss']:.2f}" for r in losses)
    done(t, f"loss by step {curve}", model_dir)
    metrics = read_metrics(model_dir)
    evals = [r for r in metrics if "eval_loss" in r]
    health = read_health(model_dir)
    print("   eval loss by step " + (", ".join(f"{r['step']}: {r['eval_loss']:.2f}" for r in evals) or "-"))
    print("   format health (valid Beam turns from fixed eval prompts) by step "
          + (", ".join(f"{r['step']}: {r['format_health']:.2f}" for r in health) or "-"))
    if health:
        sample = health[-1]["outputs"][0]
        verdict = "valid" if sample["valid"] else f"invalid: {sample['problem']}"
        print(f"   sample at step {health[-1]['step']} ({verdict}): {sample['generated'][:200]!r}")
    print(f"   log -> {log}; run record (recipe, pre-flight, distribution) -> {model_dir / 'beam_run.json'}")

    t = stage("6. generate and parse with the response template")
    results = generate(model_dir, args.seed)
    for item in results:
        tools = f" (tools: {', '.join(item['tools'])})" if item["tools"] else ""
        print(f"   prompt: {item['messages'][-1]['content']!r}{tools}")
        print(f"   generated: {item['generated'][:300]!r}")
        print(f"   parsed: {json.dumps(item['parsed'], ensure_ascii=False)[:300]}")
    generations = out / "generations.json"
    generations.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    done(t, "generations with their parsed messages", generations)

    print(f"\nDone in {time.time() - begin:.0f} s.")
    if losses:
        print(f"  final train loss     {losses[-1]['loss']:.3f} (step {losses[-1]['step']})")
    if evals:
        print(f"  final eval loss      {evals[-1]['eval_loss']:.3f} (step {evals[-1]['step']})")
    if health:
        print(f"  format health        {health[-1]['format_health']:.2f} of "
              f"{len(health[-1]['outputs'])} turns valid (step {health[-1]['step']})")
    print("Artefacts:")
    for name, path in [("fixture checkpoint", fixture), ("converted rows", rows), ("convert rejects", convert_rejects),
                       ("prepared dataset", prepared), ("report", prepared / "report.json"),
                       ("trained model", model_dir), ("training log", log), ("generations", generations),
                       ("eval + health log", model_dir / "metrics.jsonl"),
                       ("health samples", model_dir / "format_health.jsonl")]:
        print(f"  {name:<20} {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
