#!/usr/bin/env python
"""The fixed cost of a run, compared across checkouts on one machine, and the cost of the exit.

``python benchmarks/fixed_cost.py TREE [TREE ...] --runs 8``: ``python -m beam_sft prepare`` (10
synthetic rows, ``--num-proc 2 --no-cache``, every check on) from start to exit in each checkout in
turn, ``--runs`` rounds, so a machine that drifts drifts for every tree alike; prints each tree's
median and best wall seconds. Every tree runs with this interpreter (its own modules first on the
path, compiled to bytecode first, as an installed package is).

``python benchmarks/fixed_cost.py --exit --runs 8``: this checkout only; seconds from the prepare
command's return to the process's end, the plain interpreter exit against ``cli.quick_exit``.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

EXIT_CHILD = r"""
import sys, time
from beam_sft import cli
mode, stamp = sys.argv[1], sys.argv[2]
args = cli.build_parser().parse_args(sys.argv[3:])
code = cli.dispatch(args)
spent = 0.0
if mode == "quick":
    start = time.time()
    cli.quick_exit()
    spent = time.time() - start
with open(stamp, "w") as fh:
    fh.write(repr((time.time(), spent)))
raise SystemExit(code)
"""


def prepare_args(data: Path, tokenizer: Path, out: Path) -> list[str]:
    return ["prepare", "--data", str(data), "--format", "openai", "--tokenizer", str(tokenizer),
            "--output", str(out), "--num-proc", "2", "--no-cache", "-q"]


def write_rows(scratch: Path) -> Path:
    sys.path.insert(0, str(HERE))
    from bench_prepare import FIXED_ROWS, _rows

    data = scratch / "fixed-rows.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _rows(FIXED_ROWS, 0)), encoding="utf-8")
    return data


def time_trees(trees: list[Path], runs: int, data: Path, tokenizer: Path, scratch: Path) -> dict[str, list[float]]:
    for tree in trees:
        compileall.compile_dir(str(tree / "beam_sft"), quiet=1, workers=0)
    seconds: dict[str, list[float]] = {str(t): [] for t in trees}
    for _ in range(runs):
        for tree in trees:
            out = scratch / "out"
            shutil.rmtree(out, ignore_errors=True)
            env = {**os.environ, "PYTHONPATH": str(tree)}
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "beam_sft", *prepare_args(data, tokenizer, out)], cwd=tree,
                                  env=env, capture_output=True, text=True)
            seconds[str(tree)].append(time.perf_counter() - start)
            if done.returncode != 0:
                raise SystemExit(f"{tree}: prepare exited {done.returncode}\n{done.stderr}")
    return seconds


def time_exit(runs: int, data: Path, tokenizer: Path, scratch: Path) -> dict[str, list[tuple[float, float]]]:
    found: dict[str, list[tuple[float, float]]] = {"plain": [], "quick": []}
    stamp = scratch / "stamp"
    for _ in range(runs):
        for mode in found:
            out = scratch / "out"
            shutil.rmtree(out, ignore_errors=True)
            done = subprocess.run([sys.executable, "-c", EXIT_CHILD, mode, str(stamp),
                                   *prepare_args(data, tokenizer, out)], cwd=ROOT, capture_output=True, text=True)
            end = time.time()
            if done.returncode != 0:
                raise SystemExit(f"prepare exited {done.returncode}\n{done.stderr}")
            returned, spent = eval(stamp.read_text())  # noqa: S307 - our own child's repr of two floats
            found[mode].append((end - returned + spent, spent))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", type=Path, help="checkouts to compare (default: this one)")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--tokenizer", type=Path, default=ROOT / ".cache/gptoss-tokenizer/beam")
    parser.add_argument("--exit", action="store_true", help="time the exit instead: plain against quick_exit")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        data = write_rows(scratch)
        if args.exit:
            for mode, values in time_exit(args.runs, data, args.tokenizer, scratch).items():
                total = [t for t, _ in values]
                print(f"{mode}: exit median {statistics.median(total):.3f} s (min {min(total):.3f}, max "
                      f"{max(total):.3f}); quick_exit itself {statistics.median(s for _, s in values):.3f} s")
            return
        trees = [t.resolve() for t in (args.trees or [ROOT])]
        for tree, values in time_trees(trees, args.runs, data, args.tokenizer, scratch).items():
            print(f"{tree}: median {statistics.median(values):.3f} s, best {min(values):.3f} s, "
                  f"runs {' '.join(f'{v:.2f}' for v in values)}")


if __name__ == "__main__":
    main()
