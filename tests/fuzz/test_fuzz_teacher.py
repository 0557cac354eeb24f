"""Fuzz tier: a hostile teacher server. Generated per request: the reply's shape (parts, reasoning
only, wrong types, a key twice, 1e400, not JSON), its usage, its status (401/403/404 stop the run;
429/5xx retried; 4xx refused), a trickle, a size past the bound, an echo of the Authorization header
and URL. For each run of ``beam-sft reason``: the exit code its statuses call for, at most one error
line, every row accounted for (kept + rejected = read) unless the run stopped, no planted secret in
any file written or any line printed, and a bounded time.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_sft.cli import main
from tests.reason import hostile
from tests.reason.stub_server import Reply, StubServer

pytestmark = pytest.mark.fuzz

KEY = "sk-FUZZ-planted-9f8e7d6c5b4a"
URL_PASSWORD = "PW-fuzz-13579-xyz"
QUERY_KEY = "QK-fuzz-24680-abc"
SECRETS = (KEY, URL_PASSWORD, QUERY_KEY)
STOP = (401, 403, 404)
TIMEOUT = 1.0

USAGE = st.sampled_from([None, "absent", {"total_tokens": -5}, {"total_tokens": "9"}, {"total_tokens": 2.5},
                         {"total_tokens": True}, {"total_tokens": None}, {"total_tokens": 7}, [], "x"])
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
CONTENT = st.one_of(
    TEXT, st.none(), st.integers(), st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "output_text",
                                                                                               "image_url", 3]),
                                                                     "text": st.one_of(TEXT, st.none())}), max_size=3),
)


@st.composite
def replies(draw) -> Reply:
    kind = draw(st.sampled_from(["shape", "shape", "shape", "status", "echo", "echo200", "dup", "huge", "inf",
                                 "notjson", "trickle", "trickle", "reasoning_only"]))
    if kind == "status":
        return Reply(status=draw(st.sampled_from([400, 401, 403, 404, 408, 422, 429, 500, 503])))
    if kind == "echo":
        return Reply(write=hostile.echo(draw(st.sampled_from([400, 401, 403, 500]))))
    if kind == "echo200":
        return Reply(write=hostile.echo(as_content=True))
    if kind == "dup":
        return Reply(write=hostile.send(b'{"choices": [{"message": {"content": "a", "content": "b"}}]}'))
    if kind == "inf":
        return Reply(write=hostile.send(hostile.completion().replace(b'"total_tokens": 10', b'"total_tokens": 1e400')))
    if kind == "notjson":
        return Reply(write=hostile.send(draw(st.binary(max_size=60))))
    if kind == "huge":
        return Reply(write=hostile.huge(draw(st.integers(300_000, 3_000_000))))
    if kind == "trickle":
        return Reply(write=hostile.send(hostile.completion(), trickle=0.3,
                                        trickle_headers=draw(st.booleans())))
    if kind == "reasoning_only":
        return Reply(write=hostile.send(hostile.completion(draw(st.sampled_from([None, ""])),
                                                           reasoning_content=draw(TEXT) or "thinking")))
    body = hostile.completion(draw(CONTENT), usage=draw(USAGE), finish=draw(st.sampled_from(["stop", "length", None])))
    return Reply(write=hostile.send(body))


def _leaks(root: Path, texts: list[str], skip: Path) -> list[str]:
    found = [f"{p.name}: {s}" for p in root.rglob("*") if p.is_file() and p != skip
             for s in SECRETS if s.encode() in p.read_bytes()]
    return found + [f"printed: {s}" for t in texts for s in SECRETS if s in t]


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(plan=st.lists(replies(), min_size=1, max_size=4), userinfo=st.booleans(),
       policy=st.sampled_from(["drop", "unmask", "truncate"]))
def test_a_hostile_server_cannot_break_the_rules(plan, userinfo, policy, capsys, monkeypatch):
    monkeypatch.setenv("BEAM_TEACHER_API_KEY", KEY)
    rows = [{"messages": [{"role": "user", "content": f"Q{i}?"}, {"role": "assistant", "content": f"A{i}"}]}
            for i in range(4)]
    with tempfile.TemporaryDirectory() as tmp, StubServer(lambda n, body: plan[n % len(plan)]) as stub:
        root = Path(tmp)
        src = root / "rows.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        creds = f"u:{URL_PASSWORD}@" if userinfo else ""
        base = f"http://{creds}127.0.0.1:{stub.port}/v1?api-key={QUERY_KEY}"
        started = time.monotonic()
        code = main(["reason", str(src), "-o", str(root / "out.jsonl"), "--rejects", str(root / "rej.jsonl"),
                     "--base-url", base, "--model", "m", "--cache-dir", str(root / "cache"), "--timeout", str(TIMEOUT),
                     "--retries", "1", "--concurrency", "1", "--missing-reasoning", policy,
                     "--summary-json", str(root / "s.json")])
        took = time.monotonic() - started
        captured = capsys.readouterr()
        errors = [line for line in captured.err.splitlines() if line.startswith("beam-sft reason: error")]
        assert len(errors) <= 1 and "Traceback" not in captured.err, captured.err
        if code == 2:  # only a 401/403/404 ends a run (the stop statuses), in one line naming it
            assert errors and any(f"HTTP {s}" in errors[0] for s in STOP) and "run stops" in errors[0], errors
        else:
            assert code in (0, 1) and not errors, captured.err
            kept = (root / "out.jsonl").read_text().splitlines()
            rejected = (root / "rej.jsonl").read_text().splitlines()
            assert len(kept) + len(rejected) == len(rows)
            for line in rejected:
                assert json.loads(line)["code"].startswith(("teacher_", "missing_reasoning"))
        # 4 rows, 2 attempts each, each at most TIMEOUT, one backoff wait each (at most 1 s), and slack
        # (a trickle the deadline did not cut would hold a request for the writer's 30 s)
        assert took < len(rows) * (2 * TIMEOUT + 1.0) + 6, took
        assert _leaks(root, [captured.out, captured.err], skip=src) == []
