#!/usr/bin/env python
"""Thin shim: the benchmark lives in benchmarks/bench_prepare.py (``make bench``)."""

import runpy
from pathlib import Path

if __name__ == "__main__":
    runpy.run_path(str(Path(__file__).resolve().parents[1] / "benchmarks" / "bench_prepare.py"), run_name="__main__")
