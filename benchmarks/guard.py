#!/usr/bin/env python
"""``benchmarks/guard.py`` (CI): prepare must not get slower. Cheap: the synthetic set at a small
size with the fixture tokenizer (well under a minute on 2 cores), through ``bench_prepare.py``.

It compares ratios, never absolute times (a ratio measured against TRL and the floor on the same
cores in the same run moves little from machine to machine): a run fails only when a guarded ratio
falls by more than ``--tolerance`` (30%) below the committed one in ``benchmarks/results/ci-baseline.json``.
A measurement that fails is taken again once, and each ratio's best of the two counts (one busy
moment must not fail CI; a real slowdown fails both).

    python benchmarks/guard.py                 # measure, compare, exit 1 on a fall
    python benchmarks/guard.py --update        # measure and write the baseline (commit it)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASELINE = HERE / "results" / "ci-baseline.json"
GUARDED = ("ratio_vs_trl", "ratio_vs_floor")  # whole prepare vs TRL; encode phase vs the floor
# A ratio compares like work only where prepare's tokens are the floor's and its labels TRL's.
IDENTICAL = ("ids_equal_floor", "labels_equal_trl")
ROWS = 300
TOLERANCE = 0.30


def falls(baseline: dict, measured: dict, tolerance: float = TOLERANCE) -> list[str]:
    """One line per guarded ratio that fell by more than ``tolerance`` below the baseline's.

    >>> falls({"ratio_vs_trl": 2.0, "ratio_vs_floor": 1.0}, {"ratio_vs_trl": 1.5, "ratio_vs_floor": 0.69})
    ['ratio_vs_floor fell to 0.69 from 1.00 (0.69x; the guard allows down to 0.70x)']
    """
    out = []
    for key in GUARDED:
        old, new = baseline.get(key), measured.get(key)
        if not isinstance(old, (int, float)) or old <= 0:
            continue
        if not isinstance(new, (int, float)) or new < old * (1 - tolerance):
            shown = f"{new:.2f}" if isinstance(new, (int, float)) else repr(new)
            share = f"{new / old:.2f}x" if isinstance(new, (int, float)) else "none"
            out.append(f"{key} fell to {shown} from {old:.2f} ({share}; the guard allows down to {1 - tolerance:.2f}x)")
    return out


def differs(measured: dict) -> list[str]:
    """One line per output the run did not prove identical (a missing proof counts as a difference).

    >>> differs({"ids_equal_floor": True, "labels_equal_trl": False})
    ['labels_equal_trl is False: the timed runs did not produce the same rows']
    """
    return [f"{key} is {measured.get(key)!r}: the timed runs did not produce the same rows"
            for key in IDENTICAL if measured.get(key) is not True]


def best(a: dict, b: dict) -> dict:
    """Each guarded ratio's better value of two measurements."""
    return {key: max((m[key] for m in (a, b) if isinstance(m.get(key), (int, float))), default=None)
            for key in GUARDED}


def guarded_result(record: dict) -> dict:
    """The figures the guard reads from a ``bench_prepare.py`` run record: its synthetic, fixture result."""
    (result,) = [r for r in record["results"] if r["tokenizer"] == "fixture" and r["row_set"] == "synthetic"]
    return {key: result.get(key) for key in (*GUARDED, *IDENTICAL, "rows", "fixed_s", "beam_s", "trl_s", "floor_s")}


def measure(rows: int, cores: int | None, plant_delay: float = 0.0) -> dict:
    """One ``bench_prepare.py`` run (synthetic, fixture tokenizer, nothing saved): its result."""
    with tempfile.TemporaryDirectory(prefix="beam-guard-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, str(HERE / "bench_prepare.py"), "--rows", str(rows), "--row-set", "synthetic",
               "--skip-realistic", "--no-save", "--json", str(out), "--plant-delay", str(plant_delay),
               # the fixed cost is not a guarded ratio: two 10-row prepares per measurement it need not wait for
               "--skip-fixed"]
        cmd += ["--cores", str(cores)] if cores else []
        done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        if done.returncode != 0 or not out.is_file():
            raise SystemExit(f"guard: the benchmark failed ({done.returncode}):\n{done.stdout[-2000:]}")
        return guarded_result(json.loads(out.read_text(encoding="utf-8")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fail when prepare's ratios fell against the committed ones.")
    parser.add_argument("--rows", type=int, default=None, help=f"rows (default: the baseline's, else {ROWS})")
    parser.add_argument("--cores", type=int, default=None)
    parser.add_argument("--baseline", type=Path, default=BASELINE)
    parser.add_argument("--tolerance", type=float, default=TOLERANCE)
    parser.add_argument("--update", action="store_true", help="write the measured ratios as the baseline")
    parser.add_argument("--measured", type=Path, default=None,
                        help="judge this bench_prepare.py --json record instead of measuring (no second try)")
    parser.add_argument("--plant-delay", type=float, default=0.0, help=argparse.SUPPRESS)  # the guard's own test
    args = parser.parse_args(argv)

    baseline = json.loads(args.baseline.read_text(encoding="utf-8")) if args.baseline.is_file() else None
    rows = args.rows or (baseline or {}).get("rows") or ROWS
    if args.measured is not None:
        measured = guarded_result(json.loads(args.measured.read_text(encoding="utf-8")))
        rows = measured["rows"]
    else:
        measured = measure(rows, args.cores, args.plant_delay)
    print(f"guard: {rows} synthetic rows, fixture tokenizer: " + " ".join(f"{k}={measured[k]}" for k in GUARDED))
    wrong = differs(measured)
    if wrong:  # not noise: a second measurement would not make the rows the same
        for line in wrong:
            print(f"guard: FAIL: {line}")
        return 1
    if args.update:
        args.baseline.parent.mkdir(parents=True, exist_ok=True)
        args.baseline.write_text(json.dumps({**measured, "rows": rows}, indent=2) + "\n", encoding="utf-8")
        print(f"guard: baseline written to {args.baseline}")
        return 0
    if baseline is None:
        raise SystemExit(f"guard: no baseline at {args.baseline} (write one with --update and commit it)")
    if baseline.get("rows") not in (None, rows):  # a ratio depends on the size: fixed cost weighs less
        raise SystemExit(f"guard: the baseline was measured at {baseline['rows']} rows, this at {rows}")
    found = falls(baseline, measured, args.tolerance)
    if found and args.measured is None:
        print("guard: " + "; ".join(found) + ": measuring again once", flush=True)
        measured = best(measured, measure(rows, args.cores, args.plant_delay))
        found = falls(baseline, measured, args.tolerance)
    for line in found:
        print(f"guard: FAIL: {line}")
    if not found:
        print("guard: ok (" + ", ".join(f"{k} {measured[k]} against {baseline.get(k)}" for k in GUARDED) + ")")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
