"""beam_sft/timing.py is the one phase clock: no other module of prepare, reason or verify, and no
benchmark, reads a clock to time a phase itself."""

from __future__ import annotations

import ast
from pathlib import Path

from beam_sft.timing import PhaseClock, timed

ROOT = Path(__file__).resolve().parents[1]
# Clocks read for something other than a phase's seconds: request deadlines (reason/client.py,
# reason/transport.py), a server's start deadline (local_server.py), cache-unique keys (time_ns).
_NOT_PHASES = {"reason/client.py", "reason/transport.py", "reason/local_server.py", "prepare/progress.py",
               "prepare/ray_engine.py"}


def test_phases_in_order_and_rounded():
    ticks = iter([10.0, 10.0004, 12.5])
    clock = PhaseClock(now=lambda: next(ticks))
    assert clock.phase("a") == 0.0 and clock.phase("b") == 2.5 and list(clock.phases) == ["a", "b"]


def test_timed_records_even_when_the_block_raises():
    try:
        with timed() as took:
            raise ValueError
    except ValueError:
        pass
    assert took.phases["total"] >= 0


def test_no_second_phase_clock():
    files = [p for d in ("prepare", "reason", "verify") for p in (ROOT / "beam_sft" / d).rglob("*.py")]
    files += [ROOT / "benchmarks" / n for n in ("bench_verify.py", "bench_reason.py")]
    offenders = []
    for path in files:
        rel = path.relative_to(ROOT / "beam_sft").as_posix() if "beam_sft" in path.parts else path.name
        if rel in _NOT_PHASES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and getattr(node.func.value, "id", "") == "time"
                    and node.func.attr in ("time", "perf_counter", "monotonic")):
                offenders.append(f"{rel}:{node.lineno}")
    assert not offenders
