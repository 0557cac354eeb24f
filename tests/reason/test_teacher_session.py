"""One set-up and tear-down of a teacher pass (reason/run.py:teacher_session): ``reason`` and
prepare's ``reasoning:`` pass both go through it, and it closes the clients however the pass ends."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from beam_sft.reason import run

PACKAGE = Path(run.__file__).resolve().parents[1]


def test_only_the_session_builds_closes_or_draws_an_asking_teacher():
    """Outside reason/run.py no module calls close_teacher or reason's progress, nor builds an
    asking teacher (build_teacher without ask=False): they would repeat the session's set-up."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ("reason/run.py", "reason/progress.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            cache_only = any(k.arg == "ask" and isinstance(k.value, ast.Constant) and k.value.value is False
                             for k in node.keywords)
            if name == "close_teacher" or (name == "build_teacher" and not cache_only):
                offenders.append(f"{rel}:{node.lineno} {name}")
            if name == "progress" and rel.startswith(("reason/", "prepare/teacher")):
                offenders.append(f"{rel}:{node.lineno} progress")
    assert not offenders


class _Client:
    closed = aborted = False
    budget = None

    def close(self):
        self.closed = True

    def abort(self):
        self.aborted = True


class _Teacher:
    def __init__(self):
        self.client, self.judge, self.stats = _Client(), None, None


def test_the_session_closes_the_client_when_the_pass_raises(monkeypatch):
    teacher = _Teacher()
    monkeypatch.setattr(run, "build_teacher", lambda config, options: teacher)
    with pytest.raises(RuntimeError), run.teacher_session(None, None, quiet=True):
        raise RuntimeError("the pass failed")
    assert teacher.client.closed and teacher.client.aborted  # in-flight requests and retry waits end at once


def test_ctrl_c_against_a_hanging_server_ends_in_seconds(tmp_path):
    """Found in a review: with a hung server, Ctrl-C waited out every in-flight request and retry
    (minutes at the defaults). abort() closes the connections and ends the backoff waits."""
    import signal
    import subprocess
    import sys
    import time

    from tests.reason.stub_server import Reply, StubServer, always

    src = tmp_path / "in.jsonl"
    import json

    src.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"q{i}"},
                                                    {"role": "assistant", "content": "a"}]}) + "\n" for i in range(20)))
    with StubServer(always(Reply(delay=60))) as stub:
        proc = subprocess.Popen([sys.executable, "-m", "beam_sft", "reason", str(src), "-o", str(tmp_path / "o.jsonl"),
                                 "--base-url", stub.base_url, "--model", "m", "--timeout", "60", "--retries", "3",
                                 "--concurrency", "4", "--cache-dir", str(tmp_path / "cache"), "-q"],
                                stderr=subprocess.PIPE, text=True)
        while len(stub.requests) < 4:
            time.sleep(0.1)
            assert proc.poll() is None
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    assert took < 10, (took, err)
    assert proc.returncode in (130, 2) and "Traceback" not in err, err
    assert not (tmp_path / "o.jsonl").exists()
