#!/usr/bin/env python
"""``benchmarks/bench_ray.py``: ``beam-sft prepare --engine local`` against ``--engine ray`` on this machine.

Both are the CLI as a user runs it (verification on, no cache) on the same synthetic rows
(``beam_sft.data.synthetic``), one after the other; ``--engine ray`` starts its own local cluster
(``ray.init``) with ``--shards S``, one process per shard. Per run it prints rows/s, wall seconds,
the CPU seconds of the whole process tree (psutil, sampled every 0.2 s: the last 0.2 s of a process
that exits between samples is missed) and the load average before and after (the machine may be
shared). From the Ray run's report: each shard's own seconds (its ``timing``), the driver's
share (wall minus the slowest shard: Ray's start, the counting pass, the merge and its verify),
and the estimate for ``N`` nodes the README quotes:
``driver + rows / N / (rows per second of one shard process * processes per node)``.

    python benchmarks/bench_ray.py --rows 10000 --shards 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing


def _tree_cpu(root: int, stop: threading.Event, seen: dict) -> None:
    import psutil

    while not stop.is_set():
        try:
            procs = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        for proc in procs:
            try:
                times = proc.cpu_times()
                seen[proc.pid] = times.user + times.system
            except psutil.Error:
                continue
        stop.wait(0.2)


def measure(cmd: list[str], env: dict) -> dict:
    load_before = os.getloadavg()[0]
    started = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen: dict = {}
    stop = threading.Event()
    sampler = threading.Thread(target=_tree_cpu, args=(proc.pid, stop, seen), daemon=True)
    sampler.start()
    _, err = proc.communicate()
    seconds = time.time() - started
    stop.set()
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-3000:]}")
    return {"seconds": round(seconds, 2), "cpu_seconds": round(sum(seen.values()), 1),
            "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--tokenizer", help="tokenizer folder (default: the fixture tokenizer, built here)")
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--cores-per-node", type=int, default=32)
    args = parser.parse_args()

    from beam_sft.data.synthetic import synthetic_rows

    scratch = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    try:
        tokenizer = args.tokenizer
        if tokenizer is None:
            from beam_sft.harmony.fixture import build_fixture

            tokenizer = str(build_fixture(scratch / "fixture", with_model=False))
        data = scratch / "rows.jsonl"
        with open(data, "w", encoding="utf-8") as fh:
            for row in synthetic_rows(args.rows, seed=0):
                row.pop("meta", None)
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")) if p)}
        base = [sys.executable, "-m", "beam_sft", "prepare", "--data", str(data), "--format", "openai",
                "--tokenizer", tokenizer, "--no-cache", "-q"]
        local = measure([*base, "--num-proc", str(args.shards), "--output", str(scratch / "local")], env)
        ray = measure([*base, "--engine", "ray", "--shards", str(args.shards), "--output", str(scratch / "ray")], env)
        report = json.loads((scratch / "ray" / "report.json").read_text())
        shard_seconds = [t["seconds"] for t in report["timing"]["shards"]]
        shard_records = [t["records"] for t in report["timing"]["shards"]]
        per_process = sum(shard_records) / sum(shard_seconds)  # rows/s of one shard process
        driver = ray["seconds"] - max(shard_seconds)
        for name, run in (("local", local), ("ray", ray)):
            run["rows_per_second"] = round(args.rows / run["seconds"], 1)
            print(f"{name}: {json.dumps(run)}")
        print(f"ray shards: {args.shards}, each {json.dumps(shard_seconds)} s for {json.dumps(shard_records)} records "
              f"({per_process:.0f} rows/s per shard process); driver and Ray overhead {driver:.1f} s "
              f"(ray wall {ray['seconds']} s vs local {local['seconds']} s)")
        # The estimate takes the CPU cost of a row (local run: prepare + verify, CPU seconds of the
        # whole tree per row) rather than this shared machine's wall clock: on an idle core a shard
        # process does 1 / that rows per second. The driver's part (Ray's start, the counting pass,
        # the merge and its verify of every row) is serial on one machine and comes on top.
        cpu_per_row = local["cpu_seconds"] / args.rows
        verify = report["timing"].get("phases", {}).get("verify")
        print(f"cpu per row: local {1000 * cpu_per_row:.2f} ms, ray {1000 * ray['cpu_seconds'] / args.rows:.2f} ms; "
              f"driver here: verify of the merged folder {verify} s, the rest {driver - (verify or 0):.1f} s")
        for nodes in args.nodes:
            shards_part = 50_000_000 * cpu_per_row / (nodes * args.cores_per_node)
            print(f"estimate: 50M rows on {nodes} node(s) of {args.cores_per_node} idle cores: shards "
                  f"{shards_part / 3600:.2f} h, plus the driver's merge and verify")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
