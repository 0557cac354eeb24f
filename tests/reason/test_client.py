"""The client's retry rules, with the waits recorded instead of slept."""

from __future__ import annotations

import pytest

from beam_sft.reason.client import Budget, TeacherClient, TeacherError
from tests.reason.stub_server import Reply, StubServer


def _client(stub, waits, **kw):
    return TeacherClient(stub.base_url, "m", sleep=waits.append, **kw)


def test_retry_after_is_honoured_and_backoff_is_jittered_exponential():
    waits: list[float] = []
    plan = [Reply(status=429, headers={"Retry-After": "7"}), Reply(status=503), Reply(status=502), Reply()]
    with StubServer(lambda n, body: plan[n]) as stub:
        completion = _client(stub, waits, retries=3, backoff=1.0).complete([{"role": "user", "content": "q"}], {})
    assert completion.text == Reply().text and len(stub.requests) == 4
    assert waits[0] == 7.0  # the server's word, not the backoff
    assert 0 <= waits[1] <= 2.0 and 0 <= waits[2] <= 4.0  # full jitter under backoff * 2**attempt


def test_retries_run_out_and_count_against_the_budget():
    waits: list[float] = []
    budget = Budget(max_requests=3)
    with StubServer(lambda n, body: Reply(status=500)) as stub:
        client = _client(stub, waits, retries=5, budget=budget)
        with pytest.raises(TeacherError) as exc:
            client.complete([{"role": "user", "content": "q"}], {})
    assert exc.value.code == "teacher_budget_exhausted" and len(stub.requests) == 3 and budget.errors == 3


def test_a_reply_that_is_not_a_completion_fails_with_its_reason():
    with StubServer(lambda n, body: Reply()) as stub:
        client = _client(stub, [])
        with pytest.raises(TeacherError) as exc:
            client._parse(b'{"choices": []}', {})
    assert exc.value.code == "teacher_failed" and "not a chat completion" in exc.value.message
