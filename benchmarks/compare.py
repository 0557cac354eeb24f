#!/usr/bin/env python
"""``benchmarks/compare.py OLD NEW``: two runs of ``make bench`` (``benchmarks/results/*.json``) side by side.

For each row set and tokenizer measured in both: the ratios (higher is better, except
``verify_vs_encode``), the seconds behind them, and NEW / OLD. Also reads the bare list of results
``bench_prepare.py --json`` wrote before it recorded the commit and the machine.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RATIOS = ("ratio_vs_trl", "ratio_vs_floor", "prepare_vs_floor", "verify_vs_encode")
SECONDS = ("beam_s", "trl_s", "floor_s", "encode_s", "verify_s", "fixed_s")


def load(path: str | Path) -> dict:
    """A run record (``{"commit", "machine", "results": [...]}``); a bare list is taken as its results."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {"results": data}


def by_key(record: dict) -> dict[tuple, dict]:
    return {(r["row_set"], r["tokenizer"], r["rows"]): r for r in record["results"]}


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def comparison(old: dict, new: dict) -> list[str]:
    """The lines ``main`` prints."""
    lines = []
    for label, record in (("old", old), ("new", new)):
        machine = record.get("machine") or {}
        lines.append(f"{label}: commit {str(record.get('commit'))[:10]}{' (dirty)' if record.get('dirty') else ''} "
                     f"{record.get('date', '?')} | {machine.get('cpu', '?')}, {machine.get('cores_used', '?')} cores | "
                     f"load {(record.get('load_average') or {}).get('before', '?')}")
    a, b = by_key(old), by_key(new)
    for key in [k for k in a if k in b] or []:
        lines.append(f"{key[0]} / {key[1]} / {key[2]} rows")
        for field in RATIOS + SECONDS:
            x, y = a[key].get(field), b[key].get(field)
            if x is None and y is None:
                continue
            change = f"{y / x:.2f}x" if isinstance(x, (int, float)) and isinstance(y, (int, float)) and x else "-"
            lines.append(f"  {field:<18} {_fmt(x):>8} {_fmt(y):>8}   new/old {change}")
    missing = sorted(set(a) ^ set(b))
    if missing:
        lines.append(f"measured in one run only: {missing}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print two make-bench runs' figures side by side.")
    parser.add_argument("old")
    parser.add_argument("new")
    args = parser.parse_args(argv)
    print("\n".join(comparison(load(args.old), load(args.new))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
