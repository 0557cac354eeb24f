#!/usr/bin/env python
"""Peak memory of the whole process tree of a ``beam-sft`` command and rows/s, at several row
counts: memory must not grow with rows, nor rows/s fall.

    python benchmarks/peak_rss.py --rows 10000 100000 [--row-set realtext] [--tokenizer DIR]
        [--command prepare|verify|merge-shards|convert|inspect]

``prepare`` (the default) is measured with verification on (``--no-verify`` turns it off). The
other commands run on what an unmeasured step made first: ``verify`` and ``inspect`` (the last row)
on a folder prepared without verification, ``merge-shards`` (verification on) on two shards
prepared without it, ``convert`` on the raw rows.

The tree (the CLI process, its map workers and their helpers) is polled from /proc every 50 ms:
``rss`` is the sum of the processes' VmRSS (counts pages shared by forked workers once per process,
so it overstates), ``pss`` the sum of their proportional set sizes (shared pages split between the
sharers), ``pss_anon`` the anonymous part of it: memory the process holds, as opposed to pages of
memory-mapped Arrow files that the kernel can drop at any time (they count in RSS once touched);
``largest_process_rss`` the highest VmRSS of any one process of the tree. The last line compares
the largest row count with the smallest.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _tree(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(parents.get(pid, ()))
    return out


def _kib(path: str, key: str) -> int:
    try:
        with open(path, encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(cmd: list[str], env: dict) -> dict:
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak_rss = peak_pss = peak_anon = processes = largest = 0
    start = time.perf_counter()
    while proc.poll() is None:
        pids = _tree(proc.pid)
        processes = max(processes, len(pids))
        each = [_kib(f"/proc/{p}/status", "VmRSS:") for p in pids]
        largest = max([largest, *each])
        peak_rss = max(peak_rss, sum(each))
        peak_pss = max(peak_pss, sum(_kib(f"/proc/{p}/smaps_rollup", "Pss:") for p in pids))
        peak_anon = max(peak_anon, sum(_kib(f"/proc/{p}/smaps_rollup", "Pss_Anon:") for p in pids))
        time.sleep(0.05)
    seconds = time.perf_counter() - start
    err = proc.stderr.read()
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-3000:]}")
    return {"seconds": round(seconds, 2), "peak_rss_mib": round(peak_rss / 1024, 1),
            "peak_pss_mib": round(peak_pss / 1024, 1), "peak_pss_anon_mib": round(peak_anon / 1024, 1),
            "largest_process_rss_mib": round(largest / 1024, 1), "max_processes": processes}


def write_rows(path: Path, n: int, row_set: str, seed: int = 0) -> None:
    if row_set == "realtext":
        from realtext import real_text_rows

        rows = iter(real_text_rows(n, seed=seed))
    else:
        from beam_sft.data.synthetic import synthetic_rows

        rows = synthetic_rows(n, seed=seed)
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            row.pop("meta", None)
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def _run(cmd: list[str], env: dict) -> None:
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def _prepare_cmd(data: Path, tokenizer: str, out: Path, args, *extra: str) -> list[str]:
    cmd = [sys.executable, "-m", "beam_sft", "prepare", "--data", str(data), "--format", "openai",
           "--tokenizer", tokenizer, "--output", str(out), "--no-cache", *extra]
    return cmd + (["--num-proc", str(args.num_proc)] if args.num_proc else [])


def command_for(args, data: Path, tokenizer: str, scratch: Path, n: int, env: dict) -> list[str]:
    """The measured command line for ``args.command`` (after the unmeasured steps it needs)."""
    beam = [sys.executable, "-m", "beam_sft"]
    procs = ["--num-proc", str(args.num_proc)] if args.num_proc else []
    out = scratch / f"out-{n}"
    if args.command == "prepare":
        return _prepare_cmd(data, tokenizer, out, args, *(["--no-verify"] if args.no_verify else []))
    if args.command == "convert":
        return [*beam, "convert", str(data), "--format", "openai", "-o", str(out / "rows.jsonl"),
                "--rejects", str(out / "rejects.jsonl")]
    if args.command in ("verify", "inspect"):
        _run(_prepare_cmd(data, tokenizer, out, args, "--no-verify"), env)
        if args.command == "inspect":
            return [*beam, "inspect", str(out), "--row", str(n - 1), "--no-color"]
        return [*beam, "verify", str(out), *procs]
    if args.command == "merge-shards":
        shards = [scratch / f"shard-{n}-{i}" for i in range(2)]
        for i, shard in enumerate(shards):
            _run(_prepare_cmd(data, tokenizer, shard, args, "--no-verify", "--num-shards", "2",
                              "--shard-index", str(i)), env)
        return [*beam, "merge-shards", *map(str, shards), "--output", str(out), *procs]
    raise SystemExit(f"unknown command {args.command}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--row-set", choices=("synthetic", "realtext"), default="synthetic")
    parser.add_argument("--tokenizer", default=None, help="default: the fixture tokenizer")
    parser.add_argument("--num-proc", type=int, default=None)
    parser.add_argument("--no-verify", action="store_true", help="prepare without verification")
    parser.add_argument("--command", default="prepare",
                        choices=("prepare", "verify", "merge-shards", "convert", "inspect"))
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="beam-rss-"))
    results = []
    try:
        tokenizer = args.tokenizer
        if tokenizer is None:
            from beam_sft.harmony.fixture import build_tokenizer

            tokenizer = str(scratch / "tokenizer")
            build_tokenizer().save_pretrained(tokenizer)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        for n in sorted(args.rows):
            data = scratch / f"rows-{n}.jsonl"
            write_rows(data, n, args.row_set)
            (scratch / f"out-{n}").mkdir(exist_ok=True) if args.command == "convert" else None
            cmd = command_for(args, data, tokenizer, scratch, n, env)
            result = {"rows": n, "command": args.command, "row_set": args.row_set,
                      "verify": not args.no_verify, **measure(cmd, env)}
            result["rows_per_s"] = round(n / result["seconds"], 1)
            results.append(result)
            print(json.dumps(result), flush=True)
            for leftover in [scratch / f"out-{n}", *scratch.glob(f"shard-{n}-*")]:
                shutil.rmtree(leftover, ignore_errors=True)
            data.unlink(missing_ok=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    small, large = results[0], results[-1]
    print(f"pss_anon_ratio={large['peak_pss_anon_mib'] / small['peak_pss_anon_mib']:.2f} "
          f"pss_ratio={large['peak_pss_mib'] / small['peak_pss_mib']:.2f} "
          f"rss_ratio={large['peak_rss_mib'] / small['peak_rss_mib']:.2f} "
          f"rate_ratio={large['rows_per_s'] / small['rows_per_s']:.2f} "
          f"({large['rows']} vs {small['rows']} rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
