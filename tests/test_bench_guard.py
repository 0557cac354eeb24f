"""The CI guard against a slower prepare (``benchmarks/guard.py``) and ``benchmarks/compare.py``.

The guard judges ratios (prepare vs TRL, encode vs the floor) against the committed baseline and
fails on a fall of more than 30%. Fast tests judge planted run records through the guard's own
command line; the slow one plants a real slowdown in the measured prepare and runs the whole guard.
Like ``tests/test_gpu_check.py``, the benchmarks run as scripts (no test imports a benchmark).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUARD = ROOT / "benchmarks" / "guard.py"
COMPARE = ROOT / "benchmarks" / "compare.py"


def _record(ratio_vs_trl: float, ratio_vs_floor: float, rows: int = 300) -> dict:
    return {"commit": "0" * 40, "machine": {"cpu": "test", "cores_used": 2}, "load_average": {"before": [0.0]},
            "results": [{"row_set": "synthetic", "tokenizer": "fixture", "rows": rows, "ratio_vs_trl": ratio_vs_trl,
                         "ratio_vs_floor": ratio_vs_floor, "verify_vs_encode": 0.3, "beam_s": 1.0, "fixed_s": 0.5,
                         "ids_equal_floor": True, "labels_equal_trl": True}]}


def _judge(tmp_path: Path, baseline: dict, record: dict) -> subprocess.CompletedProcess:
    (tmp_path / "baseline.json").write_text(json.dumps(baseline), encoding="utf-8")
    (tmp_path / "run.json").write_text(json.dumps(record), encoding="utf-8")
    return subprocess.run([sys.executable, str(GUARD), "--baseline", str(tmp_path / "baseline.json"),
                           "--measured", str(tmp_path / "run.json")], capture_output=True, text=True, timeout=60)


def test_the_committed_baseline_is_one_the_guard_reads():
    baseline = json.loads((ROOT / "benchmarks" / "results" / "ci-baseline.json").read_text(encoding="utf-8"))
    assert baseline["rows"] and baseline["ratio_vs_trl"] > 0 and baseline["ratio_vs_floor"] > 0


def test_the_guard_fails_on_a_planted_fall_and_passes_within_the_tolerance(tmp_path):
    baseline = {"rows": 300, "ratio_vs_trl": 2.0, "ratio_vs_floor": 1.5}
    slower = _judge(tmp_path, baseline, _record(2.0 * 0.65, 1.5))  # prepare 35% slower against TRL
    assert slower.returncode == 1, slower.stdout + slower.stderr
    assert "FAIL: ratio_vs_trl fell to 1.30 from 2.00" in slower.stdout
    encode = _judge(tmp_path, baseline, _record(2.0, 1.5 * 0.6))
    assert encode.returncode == 1 and "FAIL: ratio_vs_floor" in encode.stdout
    within = _judge(tmp_path, baseline, _record(2.0 * 0.75, 1.5 * 0.75))  # noise-sized: passes
    assert within.returncode == 0, within.stdout + within.stderr
    faster = _judge(tmp_path, baseline, _record(3.0, 2.0))
    assert faster.returncode == 0 and "guard: ok" in faster.stdout


@pytest.mark.parametrize("key", ["ids_equal_floor", "labels_equal_trl"])
def test_the_guard_fails_a_fast_run_whose_rows_differ(tmp_path, key):
    """A ratio is a comparison only of the same work: rows that differ from the floor's or TRL's fail,
    however fast, and so does a record that does not say (a proof missing is no proof)."""
    baseline = {"rows": 300, "ratio_vs_trl": 2.0, "ratio_vs_floor": 1.5}
    for value in (False, None):
        record = _record(3.0, 2.0)
        if value is None:
            del record["results"][0][key]
        else:
            record["results"][0][key] = value
        done = _judge(tmp_path, baseline, record)
        assert done.returncode == 1, done.stdout + done.stderr
        assert f"FAIL: {key} is {value!r}" in done.stdout and "guard: ok" not in done.stdout


def test_the_guard_refuses_a_ratio_measured_at_another_size(tmp_path):
    done = _judge(tmp_path, {"rows": 300, "ratio_vs_trl": 2.0, "ratio_vs_floor": 1.5}, _record(2.0, 1.5, rows=4000))
    assert done.returncode != 0 and "measured at 300 rows, this at 4000" in done.stderr


def test_compare_prints_both_runs_side_by_side(tmp_path):
    (tmp_path / "old.json").write_text(json.dumps(_record(1.63, 1.04)), encoding="utf-8")
    (tmp_path / "new.json").write_text(json.dumps(_record(2.10, 1.40)), encoding="utf-8")
    done = subprocess.run([sys.executable, str(COMPARE), str(tmp_path / "old.json"), str(tmp_path / "new.json")],
                          capture_output=True, text=True, timeout=60, check=True)
    line = next(x for x in done.stdout.splitlines() if x.strip().startswith("ratio_vs_trl"))
    assert line.split() == ["ratio_vs_trl", "1.63", "2.10", "new/old", "1.29x"]
    assert "synthetic / fixture / 300 rows" in done.stdout


@pytest.mark.slow
def test_the_guard_fails_on_a_real_planted_slowdown(tmp_path):
    """The whole guard, measuring: a baseline from this tree, then the same prepare with a delay
    planted in its measured time fails (both tries), naming the ratio. The delay is twice the
    baseline's own prepare time (at least 3 s), so the ratio falls to a third or less however busy
    the machine: a fixed 10 s was a fall of only 30% on a machine busy enough to make the 60-row
    prepare take 30 s, and the guard rightly let it pass. The baseline's run is also the benchmark's
    own end-to-end run: its script, its record, and rows identical to the floor's and TRL's."""
    baseline = tmp_path / "baseline.json"
    common = [sys.executable, str(GUARD), "--rows", "60", "--baseline", str(baseline)]
    subprocess.run([*common, "--update"], check=True, timeout=600, capture_output=True)
    written = json.loads(baseline.read_text(encoding="utf-8"))
    assert written["rows"] == 60 and written["ids_equal_floor"] is True and written["labels_equal_trl"] is True
    assert written["ratio_vs_trl"] > 0 and written["ratio_vs_floor"] > 0
    delay = max(3.0, 2 * written["beam_s"])
    done = subprocess.run([*common, "--plant-delay", f"{delay:.1f}"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL: ratio_vs_trl" in done.stdout and "measuring again once" in done.stdout


def _alive(pid: int) -> bool:
    """Running, not gone and not a zombie waiting for a reaper."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_a_hung_measurement_is_killed_with_its_workers():
    """``bench_prepare``'s limit on one measurement: past it the whole process group goes (a TRL map's
    forked workers too), and the caller gets no exit code, only what was printed."""
    sys.path.insert(0, str(GUARD.parent))
    import bench_prepare

    script = ("import subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
              "print(child.pid, flush=True)\n"
              "time.sleep(120)\n")
    started = time.monotonic()
    code, out = bench_prepare._run_limited([sys.executable, "-c", script], 3.0)
    assert code is None and time.monotonic() - started < 60
    worker = int(out.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(worker):
        time.sleep(0.1)
    if _alive(worker):
        raise AssertionError(f"the measurement's worker {worker} outlived the limit")
    assert bench_prepare._run_limited([sys.executable, "-c", "print('BENCH-RESULT {}')"], 30.0) == (0, "BENCH-RESULT {}\n")
