"""The answer cache: an entry of the wrong shape is a miss (asked again, rewritten), never kept as
whatever ``str()`` makes of it nor a ``converter_error``; an entry records where its answer came from,
and a cached answer's provenance names that, not the endpoint of the run that reads it."""

from __future__ import annotations

import json

import pytest

from tests.reason.stub_server import Reply, StubServer
from tests.reason.test_reason import ROWS, run_reason, write_rows


def _entries(cache):
    return [p for p in cache.rglob("*.json") if not p.name.startswith(".")]


GOOD = {"text": "I add them.", "finish_reason": "stop", "tokens": 5}


@pytest.mark.parametrize("entry", [
    '{"text": ["not", "a", "string"], "finish_reason": "stop", "tokens": 5}',
    '{"text": {"a": 1}, "finish_reason": "stop", "tokens": 5}',
    '{"text": "t", "finish_reason": "stop", "tokens": 1e400}',
    '{"text": "t", "finish_reason": "stop", "tokens": NaN}',
    '{"text": "t", "finish_reason": "stop", "tokens": -3}',
    '{"text": "t", "finish_reason": "stop", "tokens": 2.5}',
    '{"text": "t", "finish_reason": "stop", "tokens": "5"}',
    '{"text": "t", "finish_reason": "stop", "tokens": true}',
    '{"text": "t", "finish_reason": 7, "tokens": 5}',
    '{"text": "t", "finish_reason": "stop", "tokens": 5, "extra": 1}',
    '{"text": "t", "tokens": 5}',
    '{"text": "t", "text": "u", "finish_reason": "stop", "tokens": 5}',
    '{"text": "t", "finish_reason": "stop", "tokens": 5, "origin": {"endpoint_host": 1, "model": "m", "at": "x"}}',
    '{"text": "t", "finish_reason": "stop", "tokens": 5, "origin": "somewhere"}',
    '{"text": "t \\ud800", "finish_reason": "stop", "tokens": 5}',  # a lone surrogate: no row can hold it
    '["t"]',
    'not json',
])
def test_a_cache_entry_of_the_wrong_shape_is_asked_again(tmp_path, entry, capsys):
    src = write_rows(tmp_path / "one.jsonl", ROWS[:1])
    with StubServer() as stub:
        run_reason(tmp_path, stub.base_url, src=src)
        (path,) = _entries(tmp_path / "cache")
        path.write_text(entry, encoding="utf-8")
        status, kept, rejected = run_reason(tmp_path, stub.base_url, src=src)
    assert len(stub.requests) == 2 and not rejected and status == 0
    assert kept[0]["messages"][1]["reasoning_content"] == Reply().text
    assert json.loads(path.read_text())["text"] == Reply().text  # rewritten
    assert "1 cache entry of the wrong shape (edited or damaged) was asked again" in capsys.readouterr().err


def test_an_entry_from_before_origins_is_read_and_says_so(tmp_path):
    src = write_rows(tmp_path / "one.jsonl", ROWS[:1])
    with StubServer() as stub:
        run_reason(tmp_path, stub.base_url, src=src)
        (path,) = _entries(tmp_path / "cache")
        path.write_text(json.dumps(GOOD), encoding="utf-8")
        status, kept, rejected = run_reason(tmp_path, stub.base_url, src=src)
    assert len(stub.requests) == 1 and kept[0]["messages"][1]["reasoning_content"] == "I add them."
    entry = kept[0]["meta"]["reasoning"][0]
    assert entry["cached"] is True and entry["endpoint_host"] is None and entry["answered_at"] is None


def test_a_cached_answer_names_the_endpoint_that_gave_it(tmp_path):
    """Asked at one server, read back by a run pointed at another (where nothing listens): the
    provenance names the first, with when it answered."""
    src = write_rows(tmp_path / "one.jsonl", ROWS[:1])
    with StubServer() as stub:
        status, first, _ = run_reason(tmp_path, stub.base_url, src=src)
    asked = first[0]["meta"]["reasoning"][0]
    assert asked["endpoint_host"] == f"127.0.0.1:{stub.port}" and asked["cached"] is False
    record = json.loads(_entries(tmp_path / "cache")[0].read_text())
    assert record["origin"]["endpoint_host"] == f"127.0.0.1:{stub.port}" and record["origin"]["model"] == "teacher"
    status, again, rejected = run_reason(tmp_path, "http://127.0.0.1:9/v1", src=src)
    entry = again[0]["meta"]["reasoning"][0]
    assert status == 0 and not rejected
    assert entry["endpoint_host"] == f"127.0.0.1:{stub.port}" and entry["cached"] is True
    assert entry["answered_at"] == record["origin"]["at"] == asked["answered_at"]
