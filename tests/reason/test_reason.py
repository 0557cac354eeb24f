"""``beam-sft reason``: against ``transformers serve`` (the real server, started by conftest) and,
for what no real server does on demand, a stub server on 127.0.0.1 (stub_server.py).

Every run checks the accounting: each input row is in the output or in the rejects file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beam_sft.cli import main
from tests.reason.stub_server import Reply, StubServer, always

ROWS = [
    {"messages": [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "4"}]},
    {"messages": [{"role": "user", "content": "Capital of France?"},
                  {"role": "assistant", "reasoning_content": "Known fact.", "content": "Paris."},
                  {"role": "user", "content": "And of Italy?"}, {"role": "assistant", "content": "Rome."}]},
    {"messages": [{"role": "user", "content": "Weather in Lisbon?"},
                  {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
                      "name": "get_weather", "arguments": {"city": "Lisbon"}}}]},
                  {"role": "tool", "tool_call_id": "c1", "content": "21 C"},
                  {"role": "assistant", "content": "<think>Report it.</think>It is 21 C."}],
     "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
         "type": "object", "properties": {"city": {"type": "string"}}}}}]},
]
TURNS_WITHOUT = 3  # rows 0, 1 (second turn) and 2 (the call turn)


def write_rows(path: Path, rows=ROWS) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def run_reason(tmp_path, base_url, *extra, model="teacher", cache="cache", src=None):
    src = src or write_rows(tmp_path / "rows.jsonl")
    out, rejects = tmp_path / "out.jsonl", tmp_path / "rejects.jsonl"
    status = main(
                  ["reason", str(src), "-o", str(out), "--rejects", str(rejects), "--base-url", base_url,
                   "--model", model, "--cache-dir", str(tmp_path / cache), "-q", *extra])
    kept, rejected = read(out), read(rejects)
    n_in = len(src.read_text().splitlines())
    assert len(kept) + len(rejected) == n_in, "a row is neither kept nor rejected"
    return status, kept, rejected


# --- the real server -------------------------------------------------------------------------------

def test_live_server_every_turn_filled_or_rejected_with_a_code(tmp_path, transformers_server, capsys):
    """The tiny random model writes garbage, cut off at 8 tokens: every asked turn is refused with a
    code (teacher_cut_off, or another teacher code), the drop policy rejects the row with it, and
    the second run asks nothing (the cache)."""
    s = transformers_server
    status, kept, rejected = run_reason(tmp_path, s.base_url, "--max-tokens", "8", "--concurrency", "2",
                                        model=s.model)
    first = capsys.readouterr().out
    assert "3 request(s)" in first, first
    teacher_codes = {r["code"] for r in rejected}
    assert rejected and all(c.startswith("teacher_") for c in teacher_codes), teacher_codes
    assert len(kept) + len(rejected) == 3
    for row in kept:  # a reply that passed its checks is teacher-sourced
        assert any(e["source"] == "teacher" for e in row["meta"]["reasoning"])
    status2, kept2, rejected2 = run_reason(tmp_path, s.base_url, "--max-tokens", "8", model=s.model)
    second = capsys.readouterr().out
    assert "0 request(s)" in second and "3 from cache" in second, second
    assert (kept2, [r["code"] for r in rejected2]) == (kept, [r["code"] for r in rejected])


def test_live_server_cut_off_answers(tmp_path, transformers_server, capsys):
    """max_tokens 1: the real server stops on length (finish_reason "length"): teacher_cut_off."""
    s = transformers_server
    status, kept, rejected = run_reason(tmp_path, s.base_url, "--max-tokens", "1", model=s.model,
                                        src=write_rows(tmp_path / "one.jsonl", ROWS[:1]))
    assert [r["code"] for r in rejected] == ["teacher_cut_off"] and status == 1


# --- the stub: what a real server does not do on demand ----------------------------------------------

def test_fills_with_provenance_and_leaves_the_rest(tmp_path):
    with StubServer() as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url)
    assert status == 0 and not rejected and len(stub.requests) == TURNS_WITHOUT
    for row, src in zip(kept, ROWS, strict=True):
        for m, s in zip(row["messages"], src["messages"], strict=True):
            if "<think>" in str(s.get("content")):
                continue  # read from its inline tags by the converter, as convert does
            if m["role"] == "assistant" and "reasoning_content" not in s:
                assert m["reasoning_content"] == Reply().text  # filled, and nothing else changed:
            assert {k: v for k, v in m.items() if k != "reasoning_content"} == \
                {k: v for k, v in s.items() if k != "reasoning_content"}
    sources = [[e["source"] for e in row["meta"]["reasoning"]] for row in kept]
    assert sources == [["teacher"], ["data", "teacher"], ["teacher", "inline_tags"]]
    entry = kept[0]["meta"]["reasoning"][0]
    assert entry["model"] == "teacher" and entry["endpoint_host"] == f"127.0.0.1:{stub.port}"
    assert entry["prompt_digest"].startswith("sha256:")
    # the request carries the context and the turn's answer or calls
    prompt = next(b["messages"][0]["content"] for b in stub.requests if "Lisbon" in b["messages"][0]["content"])
    assert "[user]\n> Weather in Lisbon?" in prompt and 'get_weather({"city": "Lisbon"})' in prompt


def test_429_then_success_honours_retry_after(tmp_path):
    def behave(n, body):
        return Reply(status=429, headers={"Retry-After": "0"}) if n == 0 else Reply()
    with StubServer(behave) as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, "--concurrency", "1",
                                            src=write_rows(tmp_path / "one.jsonl", ROWS[:1]))
    assert len(stub.requests) == 2 and not rejected
    assert kept[0]["messages"][1]["reasoning_content"] == Reply().text


def test_4xx_is_not_retried(tmp_path):
    with StubServer(always(Reply(status=400))) as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, src=write_rows(tmp_path / "one.jsonl", ROWS[:1]))
    assert len(stub.requests) == 1 and [r["code"] for r in rejected] == ["teacher_failed"]
    assert "HTTP 400" in rejected[0]["message"]


def test_a_hang_times_out_then_the_retry_succeeds(tmp_path):
    with StubServer(lambda n, body: Reply(delay=3.0) if n == 0 else Reply()) as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, "--timeout", "0.3", "--retries", "1",
                                            src=write_rows(tmp_path / "one.jsonl", ROWS[:1]))
    assert len(stub.requests) == 2 and not rejected
    with StubServer(always(Reply(delay=3.0))) as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, "--timeout", "0.3", "--retries", "0",
                                            cache="cache2", src=write_rows(tmp_path / "one.jsonl", ROWS[:1]))
    assert [r["code"] for r in rejected] == ["teacher_failed"] and "timed out" in rejected[0]["message"]


def test_server_dies_mid_run_and_the_rerun_asks_only_what_is_missing(tmp_path):
    rows = [{"messages": [{"role": "user", "content": f"Question {i}?"}, {"role": "assistant", "content": f"A{i}"}]}
            for i in range(8)]
    src = write_rows(tmp_path / "many.jsonl", rows)
    stub = StubServer()
    answered = []

    def behave(n, body):
        if n >= 3:  # the server dies after three answers
            stub.kill()
            return Reply(status=503)
        answered.append(body)
        return Reply()
    stub.behave = behave
    status, kept, rejected = run_reason(tmp_path, stub.base_url, "--concurrency", "1", "--retries", "1",
                                        "--timeout", "2", src=src)
    assert len(kept) == 3 and {r["code"] for r in rejected} == {"teacher_failed"}
    with StubServer() as again:
        status, kept, rejected = run_reason(tmp_path, again.base_url, "--concurrency", "1", src=src)
    assert len(kept) == 8 and not rejected
    assert len(again.requests) == 5  # the three answered turns came from the cache
    asked_twice = [b for b in again.requests if b in answered]
    assert asked_twice == []


@pytest.mark.parametrize("reply, code", [
    (Reply(text="I think <|channel|>final"), "teacher_control_token"),
    (Reply(text="<think>hidden</think> so 4"), "teacher_markup"),
    (Reply(text="call <tool_call>{}</tool_call>"), "teacher_markup"),
    (Reply(text='I call it: <rfl:parameter name="a">\n2\n</rfl:parameter>'), "teacher_markup"),  # Beam's own call markup
    (Reply(text="   \n"), "teacher_empty"),
    (Reply(text="\u200b\u200d\ufeff \n"), "teacher_empty"),  # zero-width characters: nothing to read either
    (Reply(text="I start to", finish_reason="length"), "teacher_cut_off"),
    (Reply(text="I add.", finish_reason="content_filter"), "teacher_cut_off"),  # stopped mid-text by a filter
    (Reply(text="x" * 101), "teacher_too_long"),
    (Reply(text="\n" + "x" * 101), "teacher_too_long"),
    (Reply(text="4."), "teacher_restates_answer"),  # the answer ("4") again: no reasoning
    (Reply(text="  **4**\n"), "teacher_restates_answer"),
])
def test_checked_before_kept(tmp_path, reply, code):
    with StubServer(always(reply)) as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, "--max-reasoning-chars", "100",
                                            src=write_rows(tmp_path / "one.jsonl", ROWS[:1]))
    assert [r["code"] for r in rejected] == [code] and not kept


def test_refused_turn_falls_back_to_unmask(tmp_path):
    with StubServer(always(Reply(text=""))) as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, "--missing-reasoning", "unmask",
                                            src=write_rows(tmp_path / "r.jsonl", ROWS[1:2]))
    assert not rejected
    turn = kept[0]["messages"][3]
    assert turn["weight"] == 0 and "reasoning_content" not in turn
    assert kept[0]["meta"]["reasoning"][1]["rejected"] == "teacher_empty"


def test_budget_ends_the_run_cleanly(tmp_path, capsys):
    with StubServer() as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, "--max-requests", "1", "--concurrency", "1")
    assert len(stub.requests) == 1 and status == 0
    assert [r["code"] for r in rejected] == ["teacher_budget_exhausted"] * 2
    assert "the budget was spent" in capsys.readouterr().err


def test_api_key_from_the_environment_only(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MY_TEACHER_KEY", "sk-secret-123")
    with StubServer() as stub:
        run_reason(tmp_path, stub.base_url, "--api-key-env", "MY_TEACHER_KEY",
                   src=write_rows(tmp_path / "one.jsonl", ROWS[:1]))
    assert stub.headers[0].get("Authorization") == "Bearer sk-secret-123"
    captured = capsys.readouterr()
    for text in (captured.out, captured.err, (tmp_path / "out.jsonl").read_text()):
        assert "sk-secret-123" not in text
    with pytest.raises(SystemExit):
        main(["reason", "x.jsonl", "-o", "o", "--base-url", "http://h/v1", "--model", "m", "--api-key", "k"])


def test_rows_rejected_for_another_rule_are_not_sent(tmp_path):
    bad = {"messages": [{"role": "user", "content": "hi <|end|>"}, {"role": "assistant", "content": "x"}]}
    with StubServer() as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, src=write_rows(tmp_path / "b.jsonl", [bad]))
    assert stub.requests == [] and [r["code"] for r in rejected] == ["harmony_marker_in_text"]


def test_editing_the_prompt_asks_again(tmp_path):
    prompt = tmp_path / "p.txt"
    prompt.write_text("Explain {{turn}} after {{conversation}} with {{tools}}", encoding="utf-8")
    src = write_rows(tmp_path / "one.jsonl", ROWS[:1])
    with StubServer() as stub:
        run_reason(tmp_path, stub.base_url, src=src)
        run_reason(tmp_path, stub.base_url, "--prompt", str(prompt), src=src)
        run_reason(tmp_path, stub.base_url, "--prompt", str(prompt), src=src)
    assert len(stub.requests) == 2
    assert stub.requests[1]["messages"][0]["content"].startswith("Explain [assistant answer]\n> 4")


def test_progress_on_stderr_unless_quiet(tmp_path, capsys):
    src = write_rows(tmp_path / "one.jsonl", ROWS[:1])
    with StubServer() as stub:
        main(["reason", str(src), "-o", str(tmp_path / "o.jsonl"), "--base-url", stub.base_url, "--model", "m",
              "--cache-dir", str(tmp_path / "c")])
        err = capsys.readouterr().err
        assert "reason: 1 rows" in err and "rows/s" in err and "1 requests" in err and "tokens" in err
        run_reason(tmp_path, stub.base_url, src=src)
        assert capsys.readouterr().err == ""


@pytest.mark.slow  # a second process, killed: the fault-injection tier
def test_a_killed_run_resumes_from_the_cache(tmp_path):
    """kill -9 of `beam-sft reason` mid-run: every answer it had received is on disk, whole (one
    atomic file each), and the rerun asks for exactly the turns without one."""
    import os
    import signal
    import subprocess
    import sys
    import time

    rows = [{"messages": [{"role": "user", "content": f"Q{i}?"}, {"role": "assistant", "content": f"A{i}"}]}
            for i in range(10)]
    src = write_rows(tmp_path / "rows.jsonl", rows)
    cache = tmp_path / "cache"
    with StubServer(always(Reply(delay=0.2))) as stub:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        proc = subprocess.Popen([sys.executable, "-m", "beam_sft", "reason", str(src), "-o", str(tmp_path / "o.jsonl"),
                                 "--base-url", stub.base_url, "--model", "m", "--cache-dir", str(cache),
                                 "--concurrency", "1", "-q"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while len(stub.requests) < 4 and time.time() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        asked_first = len(stub.requests)
        cached = [p for p in cache.rglob("*.json") if not p.name.startswith(".tmp-")]
        assert 3 <= len(cached) <= asked_first < 10
        for path in cached:
            json.loads(path.read_text())  # whole
        status, kept, rejected = run_reason(tmp_path, stub.base_url, "--concurrency", "1", src=src, model="m")
    assert len(kept) == 10 and not rejected
    assert len(stub.requests) - asked_first == 10 - len(cached)


def test_an_unwritable_cache_ends_the_run_in_one_line(tmp_path, capsys, monkeypatch):
    import os

    from beam_sft.reason import cache as cache_mod

    def full(*args, **kwargs):
        raise OSError(28, os.strerror(28))
    monkeypatch.setattr(cache_mod.tempfile, "mkstemp", full)
    with StubServer() as stub:
        status = main(["reason", str(write_rows(tmp_path / "r.jsonl")), "-o", str(tmp_path / "o.jsonl"),
                       "--base-url", stub.base_url, "--model", "m", "--cache-dir", str(tmp_path / "c"), "-q",
                       "--concurrency", "1"])
    assert status == 2 and len(stub.requests) == 1
    assert "cannot write to" in capsys.readouterr().err


@pytest.mark.parametrize("flag, value", [("--concurrency", "0"), ("--max-requests", "-1"), ("--timeout", "nan"),
                                         ("--temperature", "inf"), ("--max-tokens", "0"), ("--retries", "x")])
def test_a_bad_number_is_one_line_naming_the_flag(flag, value, tmp_path, capsys):
    from beam_sft.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["reason", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl"), "--base-url",
              "http://127.0.0.1:9/v1", "--model", "m", flag, value])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and f"argument {flag}:" in err, err
    assert not (tmp_path / "out.jsonl").exists()


# --- meaning: the reasoning checked against its turn ---------------------------------------------------

TWO_TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}}}}} for n in ("get_weather", "get_time")]
CALL_ROW = {"messages": [{"role": "user", "content": "Weather in Lisbon?"},
                         {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
                             "name": "get_weather", "arguments": {"city": "Lisbon"}}}]}],
            "tools": TWO_TOOLS}


def test_a_reasoning_naming_another_tool_is_refused_fresh_and_from_the_cache(tmp_path, capsys):
    src = write_rows(tmp_path / "call.jsonl", [CALL_ROW, ROWS[0]])
    with StubServer(always(Reply(text="The user wants the time, so I call get_time."))) as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, src=src)
        assert [r["code"] for r in rejected] == ["teacher_inconsistent"] and len(kept) == 1
        assert "'get_time'" in rejected[0]["message"] and "'get_weather'" in rejected[0]["message"]
        capsys.readouterr()
        status, kept2, rejected2 = run_reason(tmp_path, stub.base_url, src=src)  # the cached answer: checked again
    assert len(stub.requests) == 2 and "0 request(s)" in capsys.readouterr().out
    assert [r["code"] for r in rejected2] == ["teacher_inconsistent"]
    assert [r["messages"] for r in kept2] == [r["messages"] for r in kept]


def test_the_length_bound_counts_what_is_kept():
    # blanks around a reply are stripped before it is kept: they pushed a reply at the bound over it
    from beam_sft.reason.checks import check_text

    assert check_text("x" * 100 + "\n\n", "stop", max_chars=100) is None
    assert check_text(" " + "x" * 101, "stop", max_chars=100)[0] == "teacher_too_long"


@pytest.mark.parametrize("policy, asked", [("drop", 1), ("truncate", 1), ("unmask", 2)])
def test_no_request_for_a_turn_the_policy_throws_away(tmp_path, policy, asked):
    # under drop (and truncate) the turns after a refused one were still asked, paid for and counted as
    # filled, though they appear nowhere
    row = {"messages": [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"},
                        {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"}]}
    with StubServer(lambda n, body: Reply(text="") if n == 0 else Reply()) as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, "--missing-reasoning", policy,
                                            "--concurrency", "1", "--summary-json", str(tmp_path / "s.json"),
                                            src=write_rows(tmp_path / "two.jsonl", [row]))
        sent = len(stub.requests)
    assert sent == asked
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["teacher"]["filled"] == asked - 1, summary
