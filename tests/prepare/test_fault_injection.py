"""Fault injection (slow tier): ``beam-sft prepare`` killed (SIGKILL) or terminated (SIGTERM) at a
random point, then run again: the final folder equals an uninterrupted run's, no process and no
staging folder is left, and nothing outside the output folder's parent is touched (issue 9)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.encode.conftest import write_jsonl

pytestmark = pytest.mark.slow
REPO_ROOT = Path(__file__).resolve().parents[2]


def _cmd(data: Path, tokenizer: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "beam_sft", "prepare", "--data", str(data), "--tokenizer", str(tokenizer),
            "--output", str(out), "--num-proc", "2", "--quiet"]


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


def _tree(root: int) -> set[int]:
    out, stack = set(), [root]
    while stack:
        pid = stack.pop()
        out.add(pid)
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                stack += [int(p) for p in (task / "children").read_text().split()]
            except OSError:
                pass
    return out


def _content(folder: Path) -> dict:
    from datasets import load_from_disk

    dataset = load_from_disk(str(folder))
    report = json.loads((folder / "report.json").read_text())
    return {
        "rows": [(r["source"], r["row_index"], tuple(r["input_ids"]), tuple(r["assistant_masks"]), r["row"])
                 for r in dataset],
        "rejects": (folder / "rejects.jsonl").read_text(),
        "report": {k: report[k] for k in ("sources", "tokens", "mix", "length_policy", "rejects", "fingerprint")},
        "verified": report["verify"]["ok"],
    }


@pytest.fixture(scope="module")
def baseline(tmp_path_factory, fixture_dir):
    from beam_sft.data.synthetic import synthetic_rows

    root = tmp_path_factory.mktemp("faults")
    rows = list(synthetic_rows(1500, seed=3, scale=0.3))
    rows[7] = {"messages": [{"role": "user", "content": "no answer"}]}  # a reject too
    data = write_jsonl(root / "rows.jsonl", rows)
    started = time.time()
    subprocess.run(_cmd(data, fixture_dir, root / "whole"), env=_env(), check=True, capture_output=True)
    return data, _content(root / "whole"), time.time() - started


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "term"])
@pytest.mark.parametrize("seed", range(5))
def test_interrupted_then_rerun_equals_uninterrupted(baseline, fixture_dir, tmp_path, seed, signum):
    data, expected, seconds = baseline
    work = tmp_path / "work"
    work.mkdir()
    out = work / "out"
    proc = subprocess.Popen(_cmd(data, fixture_dir, out), env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(random.Random(seed).uniform(0.5, max(1.0, 0.9 * seconds)))
    pids = _tree(proc.pid)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    if proc.returncode != 0:  # (it may have finished first)
        assert proc.returncode in (-signal.SIGKILL, 128 + signal.SIGTERM), err
        if signum == signal.SIGTERM:
            assert "Traceback" not in err
            assert not list(work.glob(".out.staging-*"))
    time.sleep(2)
    assert [p for p in pids if Path(f"/proc/{p}").exists() and "zombie" not in
            Path(f"/proc/{p}/status").read_text().lower()] == [], "processes left behind"
    subprocess.run(_cmd(data, fixture_dir, out), env=_env(), check=True, capture_output=True)
    assert _content(out) == expected
    assert sorted(p.name for p in work.iterdir()) == ["out"], "staging, lock or other files left behind"
