#!/usr/bin/env python
"""``benchmarks/bench_prepare.py`` (``make bench``): beam-sft prepare against TRL's own preparation and against the floor.

On two row sets, each on the same cores, in one run:

- ``synthetic``: ``beam_sft.data.synthetic`` (multi-turn, reasoning, tool calls; small shared pools of
  system prompts and tool sets, which flatter every cache);
- ``realtext``: ``benchmarks/realtext.py``: docstrings of the installed Python's standard library and
  packages, with a system prompt and a tool set of its own on every row.

and three ways of preparing them:

- **trl**: ``SFTTrainer`` building its training dataset from the raw messages, through its public
  API (a conversational dataset, ``SFTConfig(assistant_only_loss=True, dataset_num_proc=cores)``):
  the constructor is timed, minus the same constructor on a one-row dataset.
- **beam**: ``beam-sft prepare`` as a user runs it: the CLI in its own process, verification on,
  no cache. Its report's ``timing.phases`` give the encode and verify phases.
- **floor**: the tokenizer's batch call alone on the already rendered texts (its own thread pool
  over the same cores): the cost of the tokens themselves, with nothing else.

Each row set and tokenizer is measured in a fresh interpreter (``_bench_fresh``): ``tokenizers`` turns
its thread pool off for good in a process that used it and then forked, so a later floor (and TRL)
measured in the same process would run on one thread.

All three must agree: the benchmark checks that beam's ids equal the floor's, and that its masks give
TRL's labels. Per set it prints ``ratio_vs_trl`` (TRL's seconds / the whole prepare's),
``ratio_vs_floor`` (the floor's seconds / the encode phase's) and ``verify_vs_encode`` (verify
phase / encode phase), for each tokenizer (fixture, and the realistic gpt-oss one when installed:
``scripts/get_realistic_tokenizer.sh``); the last line is that of the last one benchmarked. On the
synthetic set it also times the fixed cost of a run: ``fixed_s``, the CLI from start to exit on 10
rows (the best of two), what every small job pays whatever its size.

Every run writes its figures, with the commit and a description of the machine (cores, CPU, load
average before and after, library versions), to ``benchmarks/results/<date>-<commit>.json``
(``--no-save``: not); ``benchmarks/compare.py OLD NEW`` prints two of them side by side, and
``benchmarks/guard.py`` (CI) fails on a fall of a ratio against the committed one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from beam_sft.harmony.gptoss_tokenizer import DEFAULT_DIR as REALISTIC_DIR  # noqa: E402


def _cores(requested: int | None) -> int:
    available = sorted(os.sched_getaffinity(0))
    n = min(requested or len(available), len(available))
    if n < len(available):  # children (map workers) and the tokenizer's thread pool inherit this
        os.sched_setaffinity(0, available[:n])
    os.environ["RAYON_NUM_THREADS"] = str(n)
    return n


def _tokenizers(args, scratch: Path) -> list[tuple[str, Path]]:
    out = []
    if not args.skip_fixture:
        from beam_sft.harmony.fixture import build_tokenizer

        path = scratch / "fixture-tokenizer"
        build_tokenizer().save_pretrained(path)
        out.append(("fixture", path))
    realistic = Path(args.realistic or os.environ.get("BEAM_REALISTIC_TOKENIZER") or REALISTIC_DIR)
    if realistic.is_dir():
        out.append(("gpt-oss", realistic))
    elif args.realistic:
        raise SystemExit(f"--realistic {realistic}: not a directory")
    else:
        print(f"(realistic tokenizer not installed at {realistic}: scripts/get_realistic_tokenizer.sh)")
    return out


def _rows(n: int, seed: int, row_set: str = "synthetic") -> list[dict]:
    if row_set == "realtext":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from realtext import real_text_rows

        return real_text_rows(n, seed=seed)
    from beam_sft.data.synthetic import synthetic_rows

    rows = []
    for row in synthetic_rows(n, seed=seed):
        row.pop("meta", None)
        rows.append(row)
    return rows


def time_floor(tokenizer, texts: list[str]) -> tuple[float, list[list[int]]]:
    start = time.perf_counter()
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return time.perf_counter() - start, ids


def _tiny_model(tokenizer):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                         num_attention_heads=1, num_key_value_heads=1, pad_token_id=tokenizer.pad_token_id)
    return LlamaForCausalLM(config)


def _trl_args(out: Path, cores: int):
    from trl import SFTConfig

    return SFTConfig(output_dir=str(out), assistant_only_loss=True, dataset_num_proc=cores, max_length=None,
                     report_to="none", bf16=False, fp16=False, use_cpu=True, per_device_train_batch_size=1,
                     save_strategy="no", logging_strategy="no")


def time_trl(tokenizer, rows: list[dict], cores: int, scratch: Path):
    """(seconds preparing, constructor overhead subtracted, TRL's prepared dataset)."""
    import datasets
    from datasets import Dataset, Features, Json, List
    from trl import SFTTrainer

    datasets.disable_progress_bars()
    # Json columns keep free-form values (tool schemas, arguments) exactly; plain Arrow structs would
    # fill every row with the union of all keys, set to None, and change what the template renders.
    features = Features({"messages": List(Json()), "tools": Json(), "chat_template_kwargs": Json()})
    dataset = Dataset.from_list(
        [{"messages": r["messages"], "tools": r.get("tools"), "chat_template_kwargs": r.get("chat_template_kwargs") or {}}
         for r in rows], features=features)
    model = _tiny_model(tokenizer)
    args = _trl_args(scratch / "trl", cores)
    start = time.perf_counter()  # the constructor's own cost: the same call on one row
    SFTTrainer(model=model, args=args, train_dataset=dataset.select([0]), processing_class=tokenizer)
    overhead = time.perf_counter() - start
    start = time.perf_counter()
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    seconds = time.perf_counter() - start
    return seconds, overhead, trainer.train_dataset


def time_beam(tokenizer_dir: Path, data: Path, cores: int, scratch: Path, plant_delay: float = 0.0):
    """``beam-sft prepare`` in its own process, verification on: (seconds, dataset, report).
    ``plant_delay``: seconds added to the measured time (the guard's test plants a slowdown so)."""
    out = scratch / "beam"
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    cmd = [sys.executable, "-m", "beam_sft", "prepare", "--data", str(data), "--format", "openai",
           "--tokenizer", str(tokenizer_dir), "--output", str(out), "--num-proc", str(cores), "--no-cache"]
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    time.sleep(plant_delay)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"beam-sft prepare failed ({done.returncode}):\n{done.stderr[-3000:]}")
    from datasets import load_from_disk

    dataset = load_from_disk(str(out))
    report = json.loads((out / "report.json").read_text())
    return seconds, dataset, report


FIXED_ROWS = 10


def time_fixed(tokenizer_dir: Path, cores: int, scratch: Path, plant_delay: float = 0.0) -> float:
    """The fixed cost of a run: ``beam-sft prepare`` (CLI, verified) from start to exit on FIXED_ROWS
    synthetic rows, the best of two (the first also warms the file cache)."""
    data = scratch / "fixed-rows.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _rows(FIXED_ROWS, 0)),
                    encoding="utf-8")
    return round(min(time_beam(tokenizer_dir, data, cores, scratch, plant_delay)[0] for _ in range(2)), 3)


def bench_one(name: str, tokenizer_dir: Path, rows: list[dict], cores: int, scratch: Path, skip_trl: bool,
              row_set: str = "synthetic", plant_delay: float = 0.0, skip_fixed: bool = False) -> dict:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    data = scratch / f"{name}-{row_set}-rows.jsonl"
    with open(data, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    texts = [tokenizer.apply_chat_template(r["messages"], tools=r.get("tools"), tokenize=False,
                                           **(r.get("chat_template_kwargs") or {})) for r in rows]
    n = len(rows)
    result = {"tokenizer": name, "row_set": row_set, "rows": n, "cores": cores,
              "tokens": None, "floor_s": None, "trl_s": None, "beam_s": None}

    floor_s, floor_ids = time_floor(tokenizer, texts)
    result["floor_s"] = floor_s
    result["tokens"] = sum(map(len, floor_ids))

    beam_s, dataset, report = time_beam(tokenizer_dir, data, cores, scratch, plant_delay)
    phases = report["timing"]["phases"]
    result["beam_s"] = beam_s
    result["beam_phases"] = phases
    result["encode_s"] = phases["encode"]
    result["verify_s"] = phases.get("verify")
    result["beam_encoder"] = report["encoder"]["name"]
    result["beam_kept"] = len(dataset)
    result["ids_equal_floor"] = len(dataset) == n and all(
        batch["input_ids"] == floor_ids[start:start + 1000] for start, batch in _batches(dataset))
    del floor_ids, texts

    if not skip_trl:
        trl_s, overhead, trl_dataset = time_trl(tokenizer, rows, cores, scratch)
        result["trl_s"] = trl_s - overhead
        result["trl_constructor_overhead_s"] = overhead
        result["labels_equal_trl"] = len(trl_dataset) == len(dataset) and all(
            _labels(batch) == trl_dataset[start:start + 1000]["labels"] for start, batch in _batches(dataset))
    for key in ("floor", "trl", "beam"):
        seconds = result[f"{key}_s"]
        result[f"{key}_rows_per_s"] = round(n / seconds, 1) if seconds else None
    result["ratio_vs_floor"] = round(floor_s / result["encode_s"], 2) if result["encode_s"] else None
    # The whole verified prepare (CLI start to exit) against the floor: the "tokenizer's own speed".
    result["prepare_vs_floor"] = round(floor_s / beam_s, 2)
    result["verify_vs_encode"] = (round(result["verify_s"] / result["encode_s"], 2)
                                  if result["verify_s"] is not None and result["encode_s"] else None)
    if result["trl_s"]:
        result["ratio_vs_trl"] = round(result["trl_s"] / beam_s, 2)
    if row_set == "synthetic" and not skip_fixed:
        result["fixed_s"] = time_fixed(tokenizer_dir, cores, scratch, plant_delay)
    return result


def _bench_fresh(name: str, tokenizer_dir: Path, n: int, seed: int, cores: int, scratch: Path, skip_trl: bool,
                 row_set: str, plant_delay: float = 0.0, skip_fixed: bool = False,
                 timeout: float | None = None) -> dict:
    """``bench_one`` in a fresh interpreter, one per row set and tokenizer: a process that has used the
    tokenizer's thread pool and then forked (TRL's and prepare's workers do) runs ``tokenizers``
    single-threaded from then on, which would slow every later floor and TRL measurement in the run."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", row_set, name, str(tokenizer_dir),
           "--rows", str(n), "--seed", str(seed), "--cores", str(cores), "--scratch", str(scratch),
           "--plant-delay", str(plant_delay)]
    cmd += ["--skip-trl"] if skip_trl else []
    cmd += ["--skip-fixed"] if skip_fixed else []
    limit = timeout if timeout is not None else measurement_timeout(n)
    for attempt in (1, 2):
        returncode, stdout = _run_limited(cmd, limit)
        if returncode is not None:
            break
        # Seen once: TRL's ``datasets.map(num_proc=2)`` waiting 35 minutes in multiprocess's Manager after
        # forking, with nothing on the machine to do. A hang is not a measurement: once more, then fail.
        print(f"benchmark of {row_set}/{name}: no result in {limit:.0f} s (attempt {attempt} of 2), "
              f"its process group killed", file=sys.stderr, flush=True)
    else:
        raise SystemExit(f"benchmark of {row_set}/{name} hung twice (no result in {limit:.0f} s each)")
    lines = [line for line in stdout.splitlines() if line.startswith(_RESULT)]
    if returncode or not lines:
        raise SystemExit(f"benchmark of {row_set}/{name} failed ({returncode})")
    return json.loads(lines[-1][len(_RESULT):])


def _compile_bytecode() -> None:
    """beam-sft's modules compiled, as a pip install leaves them (this checkout is installed editable):
    where PYTHONDONTWRITEBYTECODE is set, every measured CLI start would compile them again (0.5 to
    0.8 s of a 4 s fixed cost), which no installed package pays. ``make bytecode`` does the same."""
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "beam_sft"), quiet=1)


def measurement_timeout(rows: int) -> float:
    """Seconds one fresh measurement may take: generous (TRL, the floor and prepare at 10,000 real rows
    took about 60 s on 2 cores), so only a hang reaches it.

    >>> measurement_timeout(300), measurement_timeout(10000)
    (330.0, 1300.0)
    """
    return 300.0 + 0.1 * rows


def _run_limited(cmd: list[str], limit: float) -> tuple[int | None, str]:
    """(exit code, stdout), or (None, what it printed) when it ran past ``limit``: then its whole process
    group (TRL's and prepare's workers) is killed, not only the child."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True) as child:
        try:
            out, _ = child.communicate(timeout=limit)
            return child.returncode, out
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            out, _ = child.communicate()
            return None, out


_RESULT = "BENCH-RESULT "


RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def machine(cores: int) -> dict:
    """What the figures were measured on: a ratio means little without it."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for package in ("tokenizers", "transformers", "trl", "datasets", "pyarrow", "torch"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = None
    return {"host": platform.node(), "platform": platform.platform(), "python": platform.python_version(),
            "cpu": _cpu_model(), "cores_used": cores, "cores_online": os.cpu_count(), "versions": versions}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_record(results: list[dict], args: argparse.Namespace, cores: int, load_before: list[float]) -> dict:
    """One run's figures, with the commit and the machine (``benchmarks/results/*.json``)."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"kind": "bench_prepare", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "commit": _git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None else None,
            "command": " ".join(["benchmarks/bench_prepare.py", *(args.argv or [])]),
            "rows": args.rows, "seed": args.seed, "machine": machine(cores),
            "load_average": {"before": load_before, "after": _load()}, "results": results}


def save_record(record: dict, directory: Path = RESULTS_DIR) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    stamp = record["date"].replace(":", "").replace("-", "")
    path = directory / f"{stamp}-{(record['commit'] or 'nogit')[:10]}.json"
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


def _batches(dataset, size: int = 1000):
    """Compare a thousand rows at a time: 20,000 rows of ids as Python lists would take gigabytes."""
    for start in range(0, len(dataset), size):
        yield start, dataset[start:start + size]


def _labels(batch) -> list[list[int]]:
    return [[t if m else -100 for t, m in zip(ids, mask, strict=True)]
            for ids, mask in zip(batch["input_ids"], batch["assistant_masks"], strict=True)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark beam-sft prepare against TRL and the tokenization floor.")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--cores", type=int, default=None, help="cores for all three (default: all available)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--realistic", default=None, help="the gpt-oss Beam tokenizer (default: .cache/gptoss-tokenizer/beam)")
    parser.add_argument("--skip-fixture", action="store_true", help="only the realistic tokenizer")
    parser.add_argument("--skip-realistic", action="store_true", help="only the fixture tokenizer")
    parser.add_argument("--no-save", action="store_true", help="do not write benchmarks/results/<date>-<commit>.json")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--plant-delay", type=float, default=0.0, help=argparse.SUPPRESS)  # the guard's test
    parser.add_argument("--skip-trl", action="store_true")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds one measurement (a row set and tokenizer) may take before it counts as hung "
                             "(killed, then tried once more; default 300 + 0.1 per row)")
    parser.add_argument("--skip-fixed", action="store_true",
                        help="do not time the fixed cost (two 10-row prepares; the CI guard does not judge it)")
    parser.add_argument("--row-set", choices=("synthetic", "realtext", "both"), default="both")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--one", nargs=3, metavar=("ROW_SET", "NAME", "TOKENIZER"), help=argparse.SUPPRESS)
    parser.add_argument("--scratch", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)

    load_before = _load()
    cores = _cores(args.cores)
    if args.one:  # one measurement, in this fresh process (``_bench_fresh``)
        row_set, name, path = args.one
        result = bench_one(name, Path(path), _rows(args.rows, args.seed, row_set), cores, Path(args.scratch),
                           args.skip_trl, row_set, args.plant_delay, args.skip_fixed)
        print(_RESULT + json.dumps(result), flush=True)
        return 0
    _compile_bytecode()
    scratch = Path(tempfile.mkdtemp(prefix="beam-bench-"))
    results = []
    try:
        sets = ("synthetic", "realtext") if args.row_set == "both" else (args.row_set,)
        tokenizers = [t for t in _tokenizers(args, scratch) if not (args.skip_realistic and t[0] != "fixture")]
        for row_set in sets:
            for name, path in tokenizers:
                result = _bench_fresh(name, path, args.rows, args.seed, cores, scratch, args.skip_trl, row_set,
                                      args.plant_delay, args.skip_fixed, args.timeout)
                results.append(result)
                print(json.dumps(result), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not results:
        return 1
    record = run_record(results, args, cores, load_before)
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=2) + "\n")
    if not args.no_save:
        print(f"figures written to {save_record(record, args.results_dir)}")
    for r in results:
        print(f"{r['row_set']:>9} {r['tokenizer']:>8}: {r['rows']} rows, {r['tokens']} tokens, {r['cores']} cores | "
              f"trl {r['trl_rows_per_s']} rows/s | beam (CLI, verified) {r['beam_rows_per_s']} rows/s | "
              f"encode {r['encode_s']}s verify {r['verify_s']}s | floor {r['floor_rows_per_s']} rows/s"
              f" | identical: ids={r['ids_equal_floor']} labels={r.get('labels_equal_trl')}")
        print(f"{r['row_set']} {r['tokenizer']}: ratio_vs_trl={r.get('ratio_vs_trl')} "
              f"ratio_vs_floor={r['ratio_vs_floor']} verify_vs_encode={r['verify_vs_encode']}"
              f" prepare_vs_floor={r.get('prepare_vs_floor')}"
              + (f" fixed_s={r['fixed_s']}" if "fixed_s" in r else ""))
    print(f"load average before {record['load_average']['before']} after {record['load_average']['after']} "
          f"({record['machine']['cores_online']} cores online)")
    last = results[-1]
    print(f"ratio_vs_trl={last.get('ratio_vs_trl')} ratio_vs_floor={last['ratio_vs_floor']} "
          f"verify_vs_encode={last['verify_vs_encode']}")
    ok = all(r["ids_equal_floor"] and r.get("labels_equal_trl", True) for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
