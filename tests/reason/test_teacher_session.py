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
    closed = False
    budget = None

    def close(self):
        self.closed = True


class _Teacher:
    def __init__(self):
        self.client, self.judge, self.stats = _Client(), None, None


def test_the_session_closes_the_client_when_the_pass_raises(monkeypatch):
    teacher = _Teacher()
    monkeypatch.setattr(run, "build_teacher", lambda config, options: teacher)
    with pytest.raises(RuntimeError), run.teacher_session(None, None, quiet=True):
        raise RuntimeError("the pass failed")
    assert teacher.client.closed
