"""``beam-sft reason`` against a hostile server (the stub on 127.0.0.1, writing bytes by hand:
hostile.py): what is bounded (time, bytes), what is redacted (the key, URL credentials), what ends
a run (401/403/404), what the budget counts when ``usage`` lies, and how replies are decoded."""

from __future__ import annotations

import json
import logging
import time
import tracemalloc
from pathlib import Path

import pytest

from beam_sft.cli import main
from beam_sft.reason.client import Budget, TeacherClient, TeacherError
from beam_sft.reason.config import TeacherConfig
from tests.reason import hostile
from tests.reason.stub_server import Reply, StubServer, always
from tests.reason.test_reason import ROWS, read, run_reason, write_rows

ONE = ROWS[:1]
KEY = "sk-PLANTED-key-0123456789abcdef"
URL_PASSWORD = "URLPASS-c0ffee-4242"
QUERY_KEY = "QUERYKEY-5555-feed"
SECRETS = (KEY, URL_PASSWORD, QUERY_KEY)


def one_row(tmp_path: Path, rows=ONE) -> Path:
    return write_rows(tmp_path / "one.jsonl", rows)


# --- class: a request has a total deadline; a reply has a byte bound ------------------------------

@pytest.mark.parametrize("writer", [
    hostile.send(hostile.completion(), trickle=0.2, trickle_headers=True),  # headers, a byte each 0.2 s
    hostile.send(hostile.completion(), trickle=0.2),  # the body, a byte each 0.2 s
    hostile.endless(chunk=16, trickle=0.2),  # an endless body, trickled
    hostile.send(b"data: {}\n\n" * 50, trickle=0.1, content_type="text/event-stream"),  # SSE events, trickled
], ids=["headers", "body", "endless-trickle", "sse"])
def test_a_trickling_server_is_cut_at_the_timeout(tmp_path, writer):
    with StubServer(always(Reply(write=writer))) as stub:
        started = time.monotonic()
        status, kept, rejected = run_reason(tmp_path, stub.base_url, "--timeout", "1", "--retries", "0",
                                            src=one_row(tmp_path))
        took = time.monotonic() - started
    assert [r["code"] for r in rejected] == ["teacher_failed"] and "timed out" in rejected[0]["message"]
    assert took < 3.0, f"a 1 s timeout took {took:.1f} s"


def test_an_endless_body_is_refused_at_the_byte_bound_and_memory_stays_flat(tmp_path):
    with StubServer(always(Reply(write=hostile.endless()))) as stub:
        tracemalloc.start()
        try:
            started = time.monotonic()
            status, kept, rejected = run_reason(tmp_path, stub.base_url, "--max-response-bytes", "100000",
                                                "--timeout", "20", src=one_row(tmp_path))
            took = time.monotonic() - started
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert [r["code"] for r in rejected] == ["teacher_reply_too_large"] and "100000" in rejected[0]["message"]
    assert took < 10 and peak < 20 << 20, (took, peak)


def test_a_50_mb_reply_is_refused_and_cached_as_its_refusal_not_its_body(tmp_path, capsys):
    """The default bound (24 x --max-reasoning-chars + 64 KiB: 545536 bytes) stops the read; the
    cache holds the refusal (a few hundred bytes), and a rerun answers from it without asking."""
    with StubServer(always(Reply(write=hostile.huge(50 << 20)))) as stub:
        tracemalloc.start()
        try:
            status, kept, rejected = run_reason(tmp_path, stub.base_url, "--concurrency", "1")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert {r["code"] for r in rejected} == {"teacher_reply_too_large"} and len(stub.requests) == 3
        assert "545536" in rejected[0]["message"] and peak < 30 << 20, peak
        entries = list((tmp_path / "cache").rglob("*.json"))
        assert len(entries) == 3 and sum(p.stat().st_size for p in entries) < 3000
        assert json.loads(entries[0].read_text())["refusal"]["code"] == "teacher_reply_too_large"
        status, kept, rejected = run_reason(tmp_path, stub.base_url)
        assert len(stub.requests) == 3 and {r["code"] for r in rejected} == {"teacher_reply_too_large"}
        # a larger bound than the one that refused it: the turn is asked again
        run_reason(tmp_path, stub.base_url, "--max-response-bytes", "600000", src=one_row(tmp_path))
        assert len(stub.requests) == 4


def test_an_overlong_text_is_cached_as_its_refusal(tmp_path):
    with StubServer(always(Reply(text="y" * 5000))) as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, "--max-reasoning-chars", "100",
                                            src=one_row(tmp_path))
        assert [r["code"] for r in rejected] == ["teacher_too_long"]
        (entry,) = (tmp_path / "cache").rglob("*.json")
        assert "yyyy" not in entry.read_text() and json.loads(entry.read_text())["refusal"]["bound"] == 100
        run_reason(tmp_path, stub.base_url, "--max-reasoning-chars", "100", src=one_row(tmp_path))
        assert len(stub.requests) == 1  # the refusal stands under the same bound
        status, kept, rejected = run_reason(tmp_path, stub.base_url, "--max-reasoning-chars", "9000",
                                            src=one_row(tmp_path))
        assert len(stub.requests) == 2 and kept  # a larger bound asks again, and keeps it


# --- class: 401/403/404 end the run -----------------------------------------------------------------

@pytest.mark.parametrize("status", [401, 403, 404])
def test_an_auth_failure_stops_the_run_in_one_line(tmp_path, capsys, monkeypatch, status):
    monkeypatch.setenv("BEAM_TEACHER_API_KEY", KEY)
    rows = [{"messages": [{"role": "user", "content": f"Q{i}?"}, {"role": "assistant", "content": f"A{i}"}]}
            for i in range(20)]
    src = write_rows(tmp_path / "rows.jsonl", rows)
    with StubServer(always(Reply(write=hostile.echo(status)))) as stub:
        code = main(["reason", str(src), "-o", str(tmp_path / "out.jsonl"), "--rejects", str(tmp_path / "rej.jsonl"),
                     "--base-url", stub.base_url, "--model", "m", "--cache-dir", str(tmp_path / "c"), "-q",
                     "--missing-reasoning", "unmask", "--concurrency", "2"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"HTTP {status}" in err and "run stops" in err, err
    assert KEY not in err and "***" in err
    assert len(stub.requests) <= 2  # no turn asked after the answer (the two in flight at most)


def test_an_auth_failure_leaves_an_earlier_output_intact(tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    out.write_text('{"earlier": true}\n', encoding="utf-8")
    with StubServer(always(Reply(status=401))) as stub:
        code = main(["reason", str(one_row(tmp_path)), "-o", str(out), "--base-url", stub.base_url, "--model", "m",
                     "--cache-dir", str(tmp_path / "c"), "-q"])
    assert code == 2 and out.read_text() == '{"earlier": true}\n'


def _prepare_config(tmp_path, src, base_url, **teacher):
    import yaml

    path = tmp_path / "prepare.yaml"
    path.write_text(yaml.safe_dump({"sources": [{"path": str(src)}], "missing_reasoning": "unmask",
                                    "reasoning": {"base_url": base_url, "model": "t",
                                                  "cache_dir": str(tmp_path / "cache"), **teacher}}))
    return path


def test_an_auth_failure_stops_prepare_in_one_line(tmp_path, fixture_dir, capsys, monkeypatch):
    monkeypatch.setenv("BEAM_TEACHER_API_KEY", KEY)
    with StubServer(always(Reply(write=hostile.echo(403)))) as bad:
        cfg = _prepare_config(tmp_path, write_rows(tmp_path / "rows.jsonl"), bad.base_url, concurrency=1)
        code = main(["prepare", "--config", str(cfg), "--tokenizer", str(fixture_dir), "--output",
                     str(tmp_path / "prepared"), "--num-proc", "1", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "HTTP 403" in err and KEY not in err, err
    assert len(bad.requests) == 1 and not (tmp_path / "prepared").exists()
    assert [p.name for p in tmp_path.iterdir() if "staging" in p.name] == []


@pytest.mark.slow  # two prepares
def test_an_auth_failure_stops_prepare_and_publishes_nothing(tmp_path, fixture_dir, capsys, monkeypatch):
    monkeypatch.setenv("BEAM_TEACHER_API_KEY", KEY)
    src = write_rows(tmp_path / "rows.jsonl")
    out = tmp_path / "prepared"
    with StubServer() as good:
        args = ["prepare", "--config", str(_prepare_config(tmp_path, src, good.base_url)), "--tokenizer",
                str(fixture_dir), "--output", str(out), "--num-proc", "1", "--quiet"]
        assert main(args) == 0
    before = (out / "report.json").read_bytes()
    (tmp_path / "cache2").mkdir()
    with StubServer(always(Reply(write=hostile.echo(401)))) as bad:
        cfg = _prepare_config(tmp_path, src, bad.base_url, cache_dir=str(tmp_path / "cache2"), concurrency=1)
        capsys.readouterr()
        code = main(["prepare", "--config", str(cfg), "--tokenizer", str(fixture_dir), "--output", str(out),
                     "--num-proc", "1", "--quiet", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2 and "HTTP 401" in err and KEY not in err, err
    assert [line for line in err.splitlines() if "error" in line] == [err.strip().splitlines()[-1]]
    assert (out / "report.json").read_bytes() == before  # the earlier dataset, intact
    assert len(bad.requests) == 1


# --- class: the budget does not trust usage -----------------------------------------------------------

@pytest.mark.parametrize("usage", [{"total_tokens": -1000000}, {"total_tokens": "12"}, {"total_tokens": 12.5},
                                   {"total_tokens": True}, {"total_tokens": None}, None, "absent", [1]],
                         ids=["negative", "string", "float", "bool", "null", "usage-null", "absent", "list"])
def test_untrusted_usage_is_counted_at_max_tokens_and_said_once(tmp_path, caplog, usage):
    rows = [{"messages": [{"role": "user", "content": f"Q{i}?"}, {"role": "assistant", "content": f"A{i}"}]}
            for i in range(5)]
    body = hostile.completion(usage="absent" if usage == "absent" else usage)
    if usage is None:
        body = body.replace(b'"usage": {"total_tokens": 10}', b'"usage": null')
    with StubServer(always(Reply(write=hostile.send(body)))) as stub, caplog.at_level(logging.WARNING):
        status, kept, rejected = run_reason(
            tmp_path, stub.base_url, "--max-tokens", "100", "--max-tokens-total", "250", "--concurrency", "1",
            "--summary-json", str(tmp_path / "s.json"), src=write_rows(tmp_path / "r.jsonl", rows))
    assert len(stub.requests) == 3  # 100 + 100 < 250, the third is sent, then the budget is spent
    assert [r["code"] for r in rejected] == ["teacher_budget_exhausted"] * 2
    teacher = json.loads((tmp_path / "s.json").read_text())["teacher"]
    assert teacher["tokens"] == 300 and teacher["usage_estimated"] == 3
    warnings = [r for r in caplog.records if "usage.total_tokens" in r.getMessage()]
    assert len(warnings) == 1 and "max_tokens (100)" in warnings[0].getMessage()


def test_a_200_that_cannot_be_read_is_counted_at_max_tokens(tmp_path):
    """total_tokens 1e400 (the reply breaks the one JSON rule: teacher_failed) or a reply past the
    byte bound still cost the server its generation: each is counted at max_tokens, so the budget binds."""
    rows = [{"messages": [{"role": "user", "content": f"Q{i}?"}, {"role": "assistant", "content": f"A{i}"}]}
            for i in range(4)]
    inf = hostile.completion().replace(b'"total_tokens": 10', b'"total_tokens": 1e400')
    for writer, code, bound in ((hostile.send(inf), "teacher_failed", []), (hostile.endless(), "teacher_reply_too_large",
                                                                            ["--max-response-bytes", "1000"])):
        with StubServer(always(Reply(write=writer))) as stub:
            status, kept, rejected = run_reason(
                tmp_path, stub.base_url, "--max-tokens", "100", "--max-tokens-total", "150", "--concurrency", "1",
                "--retries", "0", *bound, src=write_rows(tmp_path / "r.jsonl", rows), cache=f"c-{code}")
        assert len(stub.requests) == 2 and [r["code"] for r in rejected] == [code] * 2 + ["teacher_budget_exhausted"] * 2


# --- class: the one JSON rule; content parts; reasoning only -----------------------------------------

@pytest.mark.parametrize("body, code, words", [
    (b'{"choices": [{"message": {"role": "assistant", "content": "a", "content": "b"}, "finish_reason": "stop"}]}',
     "teacher_failed", "duplicate_key"),
    (hostile.completion(usage={"total_tokens": 0}).replace(b'"total_tokens": 0', b'"total_tokens": 1e400'),
     "teacher_failed", "non_standard_number"),
    (hostile.completion().replace(b'"total_tokens": 10', b'"total_tokens": NaN'), "teacher_failed",
     "non_standard_number"),
    (hostile.completion(None, reasoning_content="I think it is 4."), "teacher_reasoning_only", "no content"),
    (hostile.completion("", reasoning="I think it is 4."), "teacher_reasoning_only", "no content"),
    # the "\n\n" a reasoning parser leaves in content beside what it took: no content either, not teacher_empty
    (hostile.completion("\n\n", reasoning_content="I think it is 4."), "teacher_reasoning_only", "no content"),
    (hostile.completion([{"type": "image_url", "image_url": {"url": "x"}}]), "teacher_failed", "not a text part"),
    (hostile.completion(7), "teacher_failed", "content is 7, not text"),
    (hostile.completion("x", finish=["stop"]), "teacher_failed", "finish_reason"),
    (b"\xff\xfe not utf-8", "teacher_failed", "not strict JSON"),
    # a lone surrogate escape: strict JSON, but no row (nor cache file) can hold it: refused, not converter_error
    (hostile.completion("I add \ud800 two."), "teacher_failed", "not valid Unicode text"),
])
def test_reply_decoding_refuses_with_the_rule(tmp_path, body, code, words):
    with StubServer(always(Reply(write=hostile.send(body)))) as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, src=one_row(tmp_path))
    assert [r["code"] for r in rejected] == [code] and words in rejected[0]["message"], rejected


def test_content_parts_are_joined(tmp_path):
    parts = [{"type": "text", "text": "I add "}, {"type": "output_text", "text": "two and two."}]
    with StubServer(always(Reply(write=hostile.send(hostile.completion(parts, reasoning_content="hm"))))) as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, src=one_row(tmp_path))
    assert not rejected and kept[0]["messages"][1]["reasoning_content"] == "I add two and two."


# --- class: the key over plain http -------------------------------------------------------------------

@pytest.mark.parametrize("url, key, allowed, ok", [
    ("http://10.1.2.3:8000/v1", KEY, False, False),
    ("http://teacher.example/v1", KEY, False, False),
    ("http://u:pw@teacher.example/v1", None, False, False),  # a credential in the URL is one too
    ("http://teacher.example/v1?api-key=abc", None, False, False),
    ("http://10.1.2.3:8000/v1", KEY, True, True),
    ("http://10.1.2.3:8000/v1", None, False, True),  # no key: nothing to leak
    ("https://10.1.2.3/v1", KEY, False, True),
    ("http://127.0.0.1:8000/v1", KEY, False, True),
    ("http://127.9.9.9/v1", KEY, False, True),
    ("http://[::1]:8000/v1", KEY, False, True),
    ("http://localhost:8000/v1", KEY, False, True),
    ("http://localhost.attacker.example/v1", KEY, False, False),
])
def test_plain_http_with_a_key_to_another_host_is_refused(url, key, allowed, ok):
    from beam_sft.errors import BeamError

    config = TeacherConfig(base_url=url, model="m", allow_insecure_http=allowed)
    if ok:
        config.check_transport(key)
    else:
        with pytest.raises(BeamError, match="refusing to send the API key over plain http"):
            config.check_transport(key)


def test_the_allow_insecure_http_flag_reaches_the_config():
    from beam_sft.cli import build_parser
    from beam_sft.reason.cli import teacher_config

    argv = ["reason", "x.jsonl", "-o", "o.jsonl", "--base-url", "http://10.1.2.3/v1", "--model", "m"]
    teacher_config(build_parser().parse_args([*argv, "--allow-insecure-http"])).check_transport(KEY)
    assert teacher_config(build_parser().parse_args(argv)).allow_insecure_http is False


def test_reason_refuses_plain_http_in_one_line_before_any_output(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BEAM_TEACHER_API_KEY", KEY)
    code = main(["reason", str(one_row(tmp_path)), "-o", str(tmp_path / "o.jsonl"), "--base-url",
                 "http://10.255.255.1:9/v1", "--model", "m", "--cache-dir", str(tmp_path / "c"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--allow-insecure-http" in err and KEY not in err
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("key", [KEY + "\n", KEY + "\r", " " + KEY, KEY[:6] + "\u00dc" + KEY[6:]],
                         ids=["newline", "cr", "space", "non-ascii"])
def test_a_key_no_header_can_carry_is_one_line_before_any_request(tmp_path, capsys, monkeypatch, key):
    """A key read from a file with its newline (or CRLF), or pasted with a blank or a non-ASCII
    character: one line, exit 2, nothing sent, nothing written, the key not quoted. (It made every
    turn teacher_failed, quoting the header, and a non-ASCII key a traceback.)"""
    monkeypatch.setenv("BEAM_TEACHER_API_KEY", key)
    with StubServer() as stub:
        code = main(["reason", str(one_row(tmp_path)), "-o", str(tmp_path / "o.jsonl"), "--base-url",
                     stub.base_url, "--model", "m", "--cache-dir", str(tmp_path / "c"), "-q", "--retries", "0"])
    captured = capsys.readouterr()
    assert code == 2 and captured.err.count("\n") == 1 and "API key" in captured.err, captured
    assert KEY[6:] not in captured.err + captured.out and not stub.requests
    assert not (tmp_path / "o.jsonl").exists()


def test_prepare_refuses_plain_http_and_names_the_config_key(tmp_path, fixture_dir, capsys, monkeypatch):
    monkeypatch.setenv("BEAM_TEACHER_API_KEY", KEY)
    cfg = _prepare_config(tmp_path, write_rows(tmp_path / "r.jsonl"), "http://10.255.255.1:9/v1")
    code = main(["prepare", "--config", str(cfg), "--tokenizer", str(fixture_dir), "--output",
                 str(tmp_path / "p"), "--num-proc", "1", "--quiet"])
    assert code == 2 and "reasoning.allow_insecure_http" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()


# --- class: no secret in anything written ---------------------------------------------------------

def _grep_all(tmp_path: Path, texts: list[str], skip: tuple[Path, ...]) -> list[str]:
    """Where a planted secret is found: every file under tmp_path (but the inputs), and the texts."""
    found = []
    for path in sorted(p for p in tmp_path.rglob("*") if p.is_file() and p not in skip):
        data = path.read_bytes()
        found += [f"{path.relative_to(tmp_path)}: {s}" for s in SECRETS if s.encode() in data]
    for i, text in enumerate(texts):
        found += [f"text {i}: {s}" for s in SECRETS if s in text]
    return found


def _hostile_plan(n, body):
    """Per request: an echo in a 500 body, an echo in a 400, a 200 whose text quotes the key, a good answer."""
    kinds = [Reply(write=hostile.echo(500)), Reply(write=hostile.echo(400)),
             Reply(write=hostile.echo(as_content=True)), Reply()]
    return kinds[n % len(kinds)]


@pytest.mark.parametrize("userinfo", [True, False], ids=["basic-from-url", "bearer-key"])
@pytest.mark.parametrize("policy", ["unmask", "drop", "truncate"])
def test_no_secret_in_any_output_of_reason(tmp_path, capsys, caplog, monkeypatch, policy, userinfo):
    monkeypatch.setenv("BEAM_TEACHER_API_KEY", KEY)
    rows = [{"messages": [{"role": "user", "content": f"Q{i}?"}, {"role": "assistant", "content": f"A{i}"},
                          {"role": "user", "content": "more?"}, {"role": "assistant", "content": "B"}]}
            for i in range(6)]
    src = write_rows(tmp_path / "rows.jsonl", rows)
    with StubServer(_hostile_plan) as stub:
        creds = f"user:{URL_PASSWORD}@" if userinfo else ""
        base = f"http://{creds}127.0.0.1:{stub.port}/v1?api-key={QUERY_KEY}"
        with caplog.at_level(logging.DEBUG):
            main(["reason", str(src), "-o", str(tmp_path / "out.jsonl"), "--rejects", str(tmp_path / "rej.jsonl"),
                  "--base-url", base, "--model", "m", "--cache-dir", str(tmp_path / "cache"), "--retries", "0",
                  "--missing-reasoning", policy, "--summary-json", str(tmp_path / "s.json"), "--concurrency", "1"])
    assert stub.requests, "the server was asked"
    sent = stub.headers[0]["Authorization"]  # the secret did reach the server (and it echoed it)
    assert sent.startswith("Basic ") if userinfo else sent == f"Bearer {KEY}"
    captured = capsys.readouterr()
    leaks = _grep_all(tmp_path, [captured.out, captured.err, caplog.text], skip=(src,))
    assert leaks == []
    messages = [r["message"] for r in read(tmp_path / "rej.jsonl")]
    messages += [e.get("message", "") for r in read(tmp_path / "out.jsonl") for e in r["meta"]["reasoning"]]
    assert any("***" in m for m in messages), messages  # there was something to redact


def test_no_secret_in_any_output_of_prepare_with_reasoning(tmp_path, fixture_dir, capsys, caplog, monkeypatch):
    monkeypatch.setenv("BEAM_TEACHER_API_KEY", KEY)
    src = write_rows(tmp_path / "rows.jsonl")
    with StubServer(_hostile_plan) as stub:
        base = f"http://user:{URL_PASSWORD}@127.0.0.1:{stub.port}/v1?api-key={QUERY_KEY}"
        cfg = _prepare_config(tmp_path, src, base, retries=0, concurrency=1)
        with caplog.at_level(logging.DEBUG):
            code = main(["prepare", "--config", str(cfg), "--tokenizer", str(fixture_dir), "--output",
                         str(tmp_path / "prepared"), "--num-proc", "1"])
    assert code == 0
    report = json.loads((tmp_path / "prepared" / "report.json").read_text())
    assert report["config"]["reasoning"]["base_url"] == f"http://***@127.0.0.1:{stub.port}/v1?api-key=***"
    captured = capsys.readouterr()
    assert _grep_all(tmp_path, [captured.out, captured.err, caplog.text], skip=(src, cfg)) == []
    # inspect prints a row and its provenance: nothing leaks there either
    main(["inspect", str(tmp_path / "prepared"), "--row", "0", "--no-color"])
    assert _grep_all(tmp_path, [capsys.readouterr().out], skip=(src, cfg)) == []


@pytest.mark.parametrize("command", ["reason", "prepare"])
def test_a_refused_base_url_is_quoted_without_its_credentials(tmp_path, fixture_dir, capsys, command):
    url = f"ftp://u:{URL_PASSWORD}@example.org/v1?token={QUERY_KEY}"
    if command == "reason":
        code = main(["reason", str(one_row(tmp_path)), "-o", str(tmp_path / "o.jsonl"), "--base-url", url,
                     "--model", "m", "-q"])
    else:
        cfg = _prepare_config(tmp_path, one_row(tmp_path), url)
        code = main(["prepare", "--config", str(cfg), "--tokenizer", str(fixture_dir), "--output", str(tmp_path / "p")])
    err = capsys.readouterr().err
    assert code == 2 and "must be an http(s) URL" in err and "ftp://***@example.org" in err, err
    assert not any(s in err for s in SECRETS)


def test_the_client_redacts_transport_errors(tmp_path):
    """A connection error's text is redacted like a reply's (nothing listens on the port)."""
    client = TeacherClient(f"http://u:{URL_PASSWORD}@127.0.0.1:9/v1?key={QUERY_KEY}", "m", api_key=KEY,
                           retries=0, timeout=2, budget=Budget())
    with pytest.raises(TeacherError) as exc:
        client.complete([{"role": "user", "content": "q"}], {})
    assert "connection failed" in exc.value.message and not any(s in exc.value.message for s in SECRETS)


@pytest.mark.parametrize("url, words", [("http://127.0.0.1:99999/v1", "Port out of range"),
                                        ("http://[::1/v1", "Invalid IPv6 URL"), ("http:///v1", "has no host"),
                                        (f"http://u:{URL_PASSWORD}@/v1", "has no host")])
def test_a_base_url_that_is_no_url_is_one_line(tmp_path, capsys, url, words):
    """Not a traceback from urlsplit halfway into the run: the flag, the rule, the URL redacted."""
    code = main(["reason", str(one_row(tmp_path)), "-o", str(tmp_path / "o.jsonl"), "--base-url", url, "--model", "m",
                 "--cache-dir", str(tmp_path / "c"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("beam-sft reason: error: --base-url:") and words in err
    assert URL_PASSWORD not in err and not (tmp_path / "o.jsonl").exists()


def test_a_url_httpx_refuses_is_teacher_failed_and_redacted():
    """httpx's InvalidURL is no converter bug: the turn is teacher_failed, the message redacted."""
    client = TeacherClient(f"http://u:{URL_PASSWORD}@127.0.0.1:9/v1\x00", "m", retries=0, timeout=2)
    with pytest.raises(TeacherError) as exc:
        client.complete([{"role": "user", "content": "q"}], {})
    assert exc.value.code == "teacher_failed" and "InvalidURL" in exc.value.message
    assert URL_PASSWORD not in exc.value.message


def test_a_timeout_past_what_a_socket_takes_is_no_traceback():
    """--timeout 1e300 (a finite number above 0, as the flag asks) once raised OverflowError from the socket."""
    with StubServer(always(Reply(text="fine"))) as stub:
        client = TeacherClient(stub.base_url, "m", retries=0, timeout=1e300)
        try:
            assert b"fine" in client.send({"model": "m", "messages": [{"role": "user", "content": "q"}]})
        finally:
            client.close()


def test_a_key_cut_by_the_error_bodys_bound_leaves_no_prefix():
    """A 500 whose body passes the bound inside an echoed key: the start of the key that the cut left at
    the end is masked too (whole-secret matching cannot see it)."""
    from beam_sft.redact import Redactor

    key = "sk-SECRETKEY-abcdef123456"
    redact = Redactor.for_endpoint("http://127.0.0.1:1/v1", key)
    for n in range(4, len(key)):
        assert key[:n] not in redact.cut(f"bad key {key[:n]}")
    assert redact.cut("nothing secret here") == "nothing secret here"


@pytest.mark.parametrize("url", ["http://u:pw-SECRET@127.0.0.1:99999/v1", "http://[::1/v1", "http:///v1"])
def test_a_judge_url_that_is_no_url_is_one_line_naming_the_flag(tmp_path, capsys, url):
    from beam_sft.cli import main

    src = tmp_path / "in.jsonl"
    src.write_text('{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}\n')
    assert main(["reason", str(src), "-o", str(tmp_path / "o.jsonl"), "--base-url", "http://127.0.0.1:9/v1",
                 "--model", "m", "--judge-base-url", url]) == 2
    err = capsys.readouterr().err
    assert "--judge-base-url" in err and err.count("\n") == 1 and "pw-SECRET" not in err
    assert not (tmp_path / "o.jsonl").exists()
