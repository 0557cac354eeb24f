"""``make demo``: the main job end to end on the CPU, and a model that learns Beam Harmony.

1. fixture checkpoint: the offline tokenizer and a tiny random Llama (``DEMO_MODEL``)
2. rows: seeded demo rows (``beam_sft.data.demo_rows``: chat, multi-turn, tool calls, three
   reasoning efforts) plus the shipped samples (OpenAI, ShareGPT, Hermes, with rows that are rejected)
3. prepare (convert, encode, masks, verify every row, report page) the training folder and a
   held-out folder whose rows never ask a question a training row asked first
4. train ``recipes/demo.yaml`` with 2 CPU processes (``accelerate launch``); eval loss and format
   health (greedy turns on held-out prompts, parsed with the response template) as it trains
5. generate from the trained model on held-out prompts and parse each turn back into a message

Every stage is a public entry point of the package; ``scripts/demo.py`` only calls ``main``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from beam_sft.cli_args import count
from beam_sft.dataset_folder.layout import REPORT_FILE

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "demo.yaml"
SAMPLES = REPO / "beam_sft" / "data" / "samples"
# glibc hands any block over its mmap threshold (at most 32 MiB by default) to mmap and back at free:
# a step's logits and their gradients (8 x 1024 x 1600 floats, 52 MB each) were fresh zeroed pages
# every step, a quarter of the training's CPU time in page faults (sys 24 of 118 CPU s over 80 steps).
# Above these sizes they stay in the heap and are reused; peak memory unchanged (951 against 962 MB).
# A user's own values win.
TRAINING_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(128 << 20), "MALLOC_TRIM_THRESHOLD_": str(512 << 20)}
SAMPLE_SOURCES = (("chat_openai.jsonl", "openai", "samples/openai"), ("chat_sharegpt.json", "sharegpt", "samples/sharegpt"),
                  ("tools_hermes.jsonl", "hermes", "samples/hermes"))


@dataclass(frozen=True)
class DemoSettings:
    """What the demo trains on and how long (the figures in the README were measured with these)."""

    train_rows: int = 1200
    heldout_rows: int = 64
    seed: int = 0
    hidden_size: int = 128  # the fixture's default (64) learns the tool calls more slowly (README: What it takes)
    intermediate_size: int = 256
    # A key and value per attention head (the fixture's default shares two among its four heads). With two,
    # whether the copy of a call's second value forms by step 800 turned on the CPU's arithmetic: 0.62 of
    # the held-out calls on one machine, 0.00 on another (0.19 at 1,200 steps); with four, 1.00 by step 600
    # on the second (README: What `make demo` shows).
    num_kv_heads: int = 4
    # The fixture tokenizer, trained also on the demo's copied values so that each is one token (demo_rows.
    # tokenizer_corpus); 1600 leaves room for them beside the fixture's own 1024.
    vocab_size: int = 1600
    steps: int | None = None  # None: the recipe's
    processes: int = 2
    arch: str = "llama"  # "beam": the MoE path, a tiny transformers BeamForCausalLM (fixture --arch beam)


def fixture_options(settings: DemoSettings):
    from beam_sft.data.demo_rows import tokenizer_corpus
    from beam_sft.harmony.fixture import FixtureOptions

    return FixtureOptions(hidden_size=settings.hidden_size, intermediate_size=settings.intermediate_size,
                          num_kv_heads=settings.num_kv_heads, arch=settings.arch, vocab_size=settings.vocab_size,
                          extra_corpus=tokenizer_corpus())


def write_rows(out: Path, settings: DemoSettings) -> tuple[Path, Path]:
    """The demo's training and held-out rows as JSONL files (BeamRows: the ``openai`` reader takes them)."""
    from beam_sft.data.demo_rows import demo_split

    train, held = demo_split(settings.train_rows, settings.heldout_rows, seed=settings.seed)
    paths = []
    for name, rows in (("demo_train.jsonl", train), ("demo_heldout.jsonl", held)):
        path = out / name
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        paths.append(path)
    return paths[0], paths[1]


def prepare_folders(out: Path, fixture: Path, train_rows: Path, heldout_rows: Path) -> tuple[Path, Path]:
    """The training folder (demo rows + the samples) and the held-out folder (verified, with report pages)."""
    from beam_sft.config_utils import from_dict
    from beam_sft.prepare import PrepareConfig, prepare

    sources = [{"path": str(train_rows), "format": "openai", "name": "demo"}]
    sources += [{"path": str(SAMPLES / file), "format": fmt, "name": name} for file, fmt, name in SAMPLE_SOURCES]
    folders = []
    for name, srcs in (("prepared", sources), ("heldout", [{"path": str(heldout_rows), "format": "openai",
                                                             "name": "demo-heldout"}])):
        config = from_dict(PrepareConfig, {"sources": srcs, "tokenizer": str(fixture), "output": str(out / name),
                                           "max_length": 1024})
        folders.append(Path(prepare(config)))
    return folders[0], folders[1]


def train_command(fixture: Path, prepared: Path, heldout: Path, model_dir: Path, steps: int | None,
                  processes: int) -> list[str]:
    overrides = ["--model.path", str(fixture), "--data.prepared", str(prepared), "--data.eval.prepared", str(heldout),
                 "--sft.output_dir", str(model_dir)]
    if steps is not None:
        overrides += ["--sft.max_steps", str(steps)]
    train = ["-m", "beam_sft", "train", "--config", str(RECIPE), *overrides]
    if processes == 1:
        return [sys.executable, *train]
    config = REPO / "configs" / "accelerate" / "cpu-ddp.yaml"
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config),
            "--num_processes", str(processes), *train]


def run_training(command: list[str], log: Path) -> int:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.update({k: v for k, v in TRAINING_MALLOC.items() if k not in os.environ})
    with log.open("w", encoding="utf-8") as fh:
        return subprocess.call(command, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)


def heldout_prompts(heldout: Path, count: int = 2):
    """The first held-out prompts, with and without tools (format health's own choice of prompts)."""
    from datasets import load_from_disk

    from beam_sft.train.format_health import select_prompts

    rows = [json.loads(t) for t in load_from_disk(str(heldout)).select_columns(["row"])["row"][:256]]
    return select_prompts(rows, count)


def print_task_curve(health: list[dict]) -> None:
    """The task metrics by step, as the training callback measured them (all turns, tool / plain)."""
    from beam_sft.evaluate.metrics import KINDS, METRICS

    if not any(h.get("counts") for h in health):
        return
    print("   task metrics on the held-out prompts, all turns (tool turns / plain turns):")
    print("   step  " + "  ".join(f"{name:>22}" for name in METRICS))
    for h in health:
        counts = h.get("counts") or {}
        cells = []
        for name in METRICS:
            parts = [counts.get(name), *(counts.get(f"{name}_{k}") for k in KINDS)]
            shown = [f"{p['value']:.2f}" if p and p.get("denominator") else "-" for p in parts]
            cells.append(f"{shown[0]} ({' / '.join(shown[1:])})")
        print(f"   {h['step']:>4}  " + "  ".join(f"{c:>22}" for c in cells))


def generate_and_parse(model_dir: Path, prompts) -> list[dict]:
    """Greedy turns from the trained model, each parsed with the response template (``parse_response``),
    checked as format health checks it and scored against the held-out row's own turn (task scorer)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from beam_sft.evaluate.metrics import score_turn as score_task
    from beam_sft.train.format_health import score_turn

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    results = []
    for prompt in prompts:
        text = tokenizer.apply_chat_template(prompt.messages, tools=prompt.tools, tokenize=False,
                                             add_generation_prompt=True, **prompt.chat_template_kwargs)
        ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids
        with torch.no_grad():  # stops at <|return|> or <|call|>: the generation config's eos ids
            output = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=160, do_sample=False)
        generated = tokenizer.decode(output[0, ids.shape[1]:], skip_special_tokens=False)
        try:
            parsed = tokenizer.parse_response(generated, prefix=text, tools=prompt.tools)
        except Exception as exc:  # noqa: BLE001 (a model can write text the parser refuses: show it)
            parsed = {"error": f"{type(exc).__name__}: {exc}"}
        verdict = score_turn(generated, prompt.tools)
        task = score_task(generated, prompt.reference, prompt.tools) if prompt.reference is not None else None
        results.append({"prompt": prompt.messages, "tools": [t["function"]["name"] for t in prompt.tools or []],
                        "reasoning_effort": prompt.chat_template_kwargs.get("reasoning_effort"),
                        "generated": generated, "parsed": parsed, "valid": verdict.valid, "problem": verdict.problem,
                        "arguments_match": task.arguments if task else None,
                        "answer_match": task.answer_exact if task else None})
    return results


class Clock:
    """Wall and CPU seconds (this process and its finished children) since start."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = self._cpu()

    @staticmethod
    def _cpu() -> float:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    def since(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, self._cpu() - self.cpu


def _stage(title: str) -> Clock:
    print(f"\n== {title}", flush=True)
    return Clock()


def _done(clock: Clock, what: str, path: Path | None = None) -> None:
    wall, cpu = clock.since()
    where = f" -> {path}" if path is not None else ""
    print(f"   {what} ({wall:.1f} s, CPU {cpu:.1f} s){where}", flush=True)


def _relative(command: list[str]) -> str:
    shown = " ".join(command).replace(f"{sys.executable} -m accelerate.commands.launch", "accelerate launch")
    return shown.replace(sys.executable, "python").replace(f"{REPO}/", "")


def run(out: Path, settings: DemoSettings) -> int:
    """The demo into ``out``; returns the exit code."""
    out.mkdir(parents=True, exist_ok=True)
    begin = Clock()

    from beam_sft.harmony.fixture import build_fixture

    t = _stage("1. fixture checkpoint")
    options = fixture_options(settings)
    fixture = build_fixture(out / "fixture", options=options)
    model_kind = ("tiny BeamForCausalLM (sliding + NoPE full layers, sigmoid-routed experts, soft cap)"
                  if options.arch == "beam" else f"tiny Llama ({options.num_layers} layers)")
    _done(t, f"tokenizer with the Beam Harmony markers, chat and response templates; {model_kind}, "
             f"hidden {options.hidden_size}", fixture)

    t = _stage("2. rows: seeded demo rows + the shipped samples")
    train_rows, heldout_rows = write_rows(out, settings)
    _done(t, f"{settings.train_rows} training rows, {settings.heldout_rows} held-out rows (no held-out row asks a "
             "question a training row asked first); samples in beam_sft/data/samples", train_rows.parent)

    t = _stage("3. prepare: convert, encode with the chat template, masks, verify every row, report page")
    prepared, heldout = prepare_folders(out, fixture, train_rows, heldout_rows)
    report = json.loads((prepared / REPORT_FILE).read_text(encoding="utf-8"))
    for name, entry in report["sources"].items():
        rejected = ", ".join(f"{c} {n}" for c, n in sorted(entry["rejected"].items())) or "-"
        print(f"   {name:<18} {entry['format']:<9} read {entry['read']:>5}  kept {entry['kept']:>5}  rejected: {rejected}")
    tokens, verify = report["tokens"], report.get("verify") or {}
    print(f"   {tokens['rows']} rows, {tokens['total']} tokens, {tokens['trained_fraction']:.1%} trained; "
          f"verify: {'every rule holds' if verify.get('ok') else 'FAILED'} on {verify.get('rows_checked')} rows")
    _done(t, "training and held-out folders; open report.html in a browser", prepared / "report.html")

    t = _stage("4. train recipes/demo.yaml (2 CPU processes; pre-flight first)")
    model_dir = out / "model"
    command = train_command(fixture, prepared, heldout, model_dir, settings.steps, settings.processes)
    print("   $ " + _relative(command), flush=True)
    log = out / "train.log"
    code = run_training(command, log)
    if code != 0:
        print(log.read_text(encoding="utf-8")[-4000:])
        print(f"   training failed (exit {code}); full log: {log}")
        return code
    from beam_sft.train.callbacks import read_losses
    from beam_sft.train.format_health import read_health
    from beam_sft.train.run_log import read_metrics

    losses = read_losses(model_dir)
    evals = [r for r in read_metrics(model_dir) if "eval_loss" in r]
    health = read_health(model_dir)
    _done(t, "trained; model card README.md, run record beam_run.json", model_dir)
    print("   step  train loss  eval loss  format health (held-out prompts: all / with tools / plain)")
    by_step = {r["step"]: r for r in losses}
    for e, h in zip(evals, health, strict=False):
        train = by_step.get(e["step"], {}).get("loss")
        print(f"   {e['step']:>4}  {train if train is None else f'{train:10.3f}'}  {e['eval_loss']:9.3f}  "
              f"{h['format_health']:.2f} / {h.get('format_health_tools', float('nan')):.2f} / "
              f"{h.get('format_health_plain', float('nan')):.2f}  ({len(h['outputs'])} turns)")
    print_task_curve(health)

    t = _stage("5. generate on held-out prompts and parse with the response template")
    results = generate_and_parse(model_dir, heldout_prompts(heldout))
    for item in results:
        tools = f" (tools: {', '.join(item['tools'])})" if item["tools"] else ""
        effort = item["reasoning_effort"] or "the template's default"
        print(f"   prompt: {item['prompt'][-1]['content']!r}{tools}, reasoning effort {effort}")
        print(f"   generated: {item['generated']!r}")
        print(f"   parsed:    {json.dumps(item['parsed'], ensure_ascii=False)}")
        print(f"   {'valid Beam turn' if item['valid'] else 'invalid: ' + str(item['problem'])}"
              + ("" if item["arguments_match"] is None else
                 f"; arguments {'as' if item['arguments_match'] else 'NOT as'} in the held-out row")
              + ("" if item["answer_match"] is None else
                 f"; answer {'as' if item['answer_match'] else 'not as'} in the held-out row"))
    generations = out / "generations.json"
    generations.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    _done(t, "generations with their parsed messages", generations)

    wall, cpu = begin.since()
    print(f"\nDone in {wall:.0f} s (CPU {cpu:.0f} s over all processes).")
    if losses:
        print(f"  final train loss     {losses[-1]['loss']:.3f} (step {losses[-1]['step']})")
    if evals:
        print(f"  final eval loss      {evals[-1]['eval_loss']:.3f} (step {evals[-1]['step']}; held-out rows)")
    if health:
        last = health[-1]
        print(f"  format health        {last['format_health']:.2f} of {len(last['outputs'])} held-out turns valid "
              f"(step {last['step']})")
        counts = last.get("counts") or {}
        for name in ("argument_exact_match_tool", "distinct_ratio_tool", "tool_name_accuracy_tool",
                     "stop_accuracy", "answer_token_f1_plain"):
            if (counts.get(name) or {}).get("denominator"):
                c = counts[name]
                n = f"{c['numerator']:g}" if float(c["numerator"]).is_integer() else f"{c['numerator']:.2f}"
                print(f"  {name:<26} {c['value']:.2f} ({n} of {c['denominator']}, step {last['step']})")
    print("Artefacts:")
    for name, path in [("fixture checkpoint", fixture), ("demo rows", train_rows), ("prepared (train)", prepared),
                       ("report page", prepared / "report.html"), ("prepared (held-out)", heldout),
                       ("trained model", model_dir), ("model card", model_dir / "README.md"), ("training log", log),
                       ("eval + health log", model_dir / "metrics.jsonl"),
                       ("health samples", model_dir / "format_health.jsonl"), ("generations", generations)]:
        print(f"  {name:<20} {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="demo", description=__doc__.splitlines()[0])
    defaults = DemoSettings()
    parser.add_argument("--out", default="out/demo", help="where every artefact goes (default: out/demo)")
    parser.add_argument("--steps", type=count(1), help="training steps (default: the recipe's)")
    parser.add_argument("--rows", type=count(1), default=defaults.train_rows,
                        help=f"demo training rows (default {defaults.train_rows})")
    parser.add_argument("--processes", type=count(1), default=defaults.processes,
                        help=f"training processes on the CPU (default: {defaults.processes})")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="seed of the demo rows")
    parser.add_argument("--arch", choices=("llama", "beam"), default=defaults.arch,
                        help="the fixture model: llama (default, the measured figures) or beam (Beam's own "
                             "MoE architecture from transformers: the same recipe, format health and parsing)")
    args = parser.parse_args(argv)
    settings = DemoSettings(train_rows=args.rows, seed=args.seed, steps=args.steps, processes=args.processes,
                            arch=args.arch)
    return run(Path(args.out).resolve(), settings)
