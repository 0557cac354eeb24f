"""`beam-sft eval --base-url` against replies no well-behaved server sends, on demand from the stub
(tests/reason/stub_server.py): a key echoed back, odd reply shapes, an endpoint with a query string,
a transient 503. The key never reaches stderr or --json; a shape no chat completion has is an
unreadable turn, scored wrong, never a traceback that loses the turns already generated."""

from __future__ import annotations

import base64
import json

import pytest

from beam_sft.cli import main
from beam_sft.evaluate.metrics import ServedTurn, score_turn
from beam_sft.evaluate.served import served_turn
from tests.reason.stub_server import Reply, StubServer

KEY = "sk-evaltest-SECRET-0123456789"
PASSWORD = "URLPASSWORD-42"


def _payload_reply(payload, status=200):
    """A reply whose JSON body is ``payload`` exactly (the stub's own writes only its fixed shape)."""
    data = json.dumps(payload).encode()

    def write(handler, _headers):
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        handler.send_header("connection", "close")  # the stub closes after a hand-written reply
        handler.end_headers()
        handler.wfile.write(data)

    return Reply(write=write)


def _choice(message, finish="stop"):
    return {"choices": [{"index": 0, "finish_reason": finish, "message": message}]}


def _eval(stub_url, data, out, *extra):
    return main(["eval", "--base-url", stub_url, "--model", "m", "--data", str(data), "--rows", "2",
                 "--json", str(out), "--retries", "0", *extra])


def test_a_key_echoed_by_the_server_reaches_neither_stderr_nor_json(eval_prepared, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EVAL_KEY", KEY)
    basic = base64.b64encode(f"user:{PASSWORD}".encode()).decode()

    def echo(status):
        return lambda n, body: _payload_reply({"error": {"message": f"invalid api key: {KEY}; your header was "
                                                                    f"Basic {basic}; again: Basic {basic}"}}, status)

    for status in (401, 500):
        with StubServer(echo(status)) as stub:
            url = stub.base_url.replace("http://", f"http://user:{PASSWORD}@")
            assert _eval(url, eval_prepared, tmp_path / "x.json", "--api-key-env", "EVAL_KEY") == 2
        err = capsys.readouterr().err
        assert f"HTTP {status}" in err and err.count("\n") == 1, err
        assert KEY not in err and PASSWORD not in err and basic not in err, err
    # a 200 whose answer quotes the key: scored, and written masked
    quoting = _payload_reply(_choice({"content": f"the key is {KEY}", "reasoning_content": f"{KEY}!"}))
    with StubServer(lambda n, body: quoting) as stub:
        url = stub.base_url.replace("http://", f"http://user:{PASSWORD}@")
        out = tmp_path / "quoted.json"
        assert _eval(url, eval_prepared, out, "--api-key-env", "EVAL_KEY") == 0
    text = out.read_text()
    assert KEY not in text and PASSWORD not in text and "***" in text
    assert json.loads(text)["run"]["base_url"].startswith("http://***@127.0.0.1:")
    assert KEY not in capsys.readouterr().out


ODD_MESSAGES = {
    "content as a list of non-text parts": {"content": [{"type": "image_url", "image_url": {"url": "x"}}]},
    "reasoning not text": {"content": "x", "reasoning_content": ["r"]},
    "function null": {"content": None, "reasoning_content": "r", "tool_calls": [{"function": None}]},
    "function a string": {"reasoning_content": "r", "tool_calls": [{"function": "get_weather"}]},
    "name not text": {"reasoning_content": "r", "tool_calls": [{"function": {"name": ["f"], "arguments": "{}"}}]},
    "arguments a list": {"reasoning_content": "r", "tool_calls": [{"function": {"name": "f", "arguments": [1]}}]},
    "tool_calls not a list": {"reasoning_content": "r", "tool_calls": {"function": {"name": "f"}}},
    "message a string": "hello",
}


@pytest.mark.parametrize("name", list(ODD_MESSAGES))
def test_an_odd_reply_shape_is_an_unreadable_turn(name):
    turn = served_turn({"finish_reason": "stop", "message": ODD_MESSAGES[name]})
    assert turn.problem and turn.problem.startswith("the reply cannot be read"), name
    s = score_turn(turn, {"role": "assistant", "reasoning_content": "r", "content": "x"})
    assert (s.format_valid, s.answer_exact, s.stop, s.message) == (False, False, False, None)
    assert s.format_problem == turn.problem


@pytest.mark.parametrize("choice", [[1], "x", None, 3])
def test_a_choice_that_is_not_an_object_is_an_unreadable_turn(choice):
    s = score_turn(served_turn(choice), {"role": "assistant", "reasoning_content": "r", "content": "x"})
    assert (s.format_valid, s.stop) == (False, False) and "cannot be read" in s.format_problem


def test_text_parts_are_read_as_text():
    turn = served_turn({"finish_reason": "stop", "message": {
        "reasoning_content": "r", "content": [{"type": "text", "text": "He"}, {"type": "output_text", "text": "llo"}]}})
    s = score_turn(turn, {"role": "assistant", "reasoning_content": "r", "content": "hello"})
    assert s.format_valid and s.answer_exact and s.stop


def test_every_odd_shape_in_one_cli_run_exits_0_with_each_turn_scored(eval_prepared, tmp_path):
    replies = [_payload_reply(_choice(m)) for m in ODD_MESSAGES.values()]
    with StubServer(lambda n, body: replies[n % len(replies)]) as stub:
        out = tmp_path / "odd.json"
        assert main(["eval", "--base-url", stub.base_url, "--model", "m", "--data", str(eval_prepared),
                     "--json", str(out), "--retries", "0"]) == 0
    data = json.loads(out.read_text())
    assert data["metrics"]["format_valid"] == 0.0 and data["metrics"]["stop_accuracy"] == 0.0
    assert all(s["problem"].startswith("the reply cannot be read") for s in data["samples"])


def test_a_null_finish_reason_is_said_as_null_not_length():
    s = score_turn(served_turn({"finish_reason": None, "message": {"content": "x", "reasoning_content": "r"}}),
                   {"role": "assistant", "reasoning_content": "r", "content": "x"})
    assert s.format_problem == "the turn does not end (finish_reason: null)"
    s = score_turn(served_turn({"finish_reason": "content_filter", "message": {"content": "x"}}),
                   {"role": "assistant", "reasoning_content": "r", "content": "x"})
    assert s.format_problem == "the turn does not end (finish_reason: content_filter)"


def test_an_endpoint_with_a_query_keeps_it_after_the_path(eval_prepared, tmp_path):
    ok = _payload_reply(_choice({"content": "x", "reasoning_content": "r"}))
    with StubServer(lambda n, body: ok) as stub:
        assert _eval(stub.base_url + "/?api-version=2024-10", eval_prepared, tmp_path / "q.json") == 0
        paths = stub.paths
    assert paths and all(p == "/v1/chat/completions?api-version=2024-10" for p in paths), paths


def test_a_transient_503_is_retried_and_the_run_goes_on(eval_prepared, tmp_path):
    ok = _payload_reply(_choice({"content": "x", "reasoning_content": "r"}))
    with StubServer(lambda n, body: Reply(status=503, headers={"Retry-After": "0"}) if n == 0 else ok) as stub:
        out = tmp_path / "r.json"
        assert main(["eval", "--base-url", stub.base_url, "--model", "m", "--data", str(eval_prepared),
                     "--rows", "1", "--json", str(out), "--retries", "1"]) == 0
        sent = len(stub.requests)
    data = json.loads(out.read_text())
    assert sent == data["run"]["turns"] + 1 and data["run"]["retries"] == 1


def test_a_401_stops_at_once_without_retrying(eval_prepared, tmp_path, capsys):
    with StubServer(lambda n, body: Reply(status=401)) as stub:
        assert main(["eval", "--base-url", stub.base_url, "--model", "m", "--data", str(eval_prepared),
                     "--retries", "3"]) == 2
        assert len(stub.requests) == 1
    assert "HTTP 401" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [["--timeout", "5"], ["--retries", "1"], ["--api-key-env", "SOME_KEY"],
                                  ["--timeout", "300"], ["--retries", "4"],  # the defaults, given: refused too
                                  ["--allow-insecure-http"]])
def test_served_only_flags_need_base_url(fixture_dir, eval_prepared, flag, capsys):
    assert main(["eval", str(fixture_dir), "--data", str(eval_prepared), *flag]) == 2
    assert "use with --base-url" in capsys.readouterr().err


def test_markers_in_served_text_are_not_a_valid_turn():
    ref = {"role": "assistant", "reasoning_content": "r", "content": "x"}
    raw_call = ('<|channel|>analysis<|message|>Add.<|end|><|start|>assistant to=add<|channel|>analysis '
                '<|constrain|>xml<|message|><rfl:parameter name="a">\n1\n</rfl:parameter><|call|>')
    for message in ({"content": raw_call}, {"content": "x", "reasoning_content": "r<|end|>"},
                    {"reasoning_content": "r", "tool_calls": [{"function": {"name": "add",
                                                                            "arguments": '{"a": "1<|call|>"}'}}]}):
        message = {"reasoning_content": "r", **message}
        finish = "tool_calls" if "tool_calls" in message else "stop"
        s = score_turn(served_turn({"finish_reason": finish, "message": message}), ref,
                       [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}])
        assert s.format_valid is False and "Harmony marker" in s.format_problem, message


def test_served_arguments_with_a_key_twice_match_nothing():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}}}}}]
    ref = {"role": "assistant", "reasoning_content": "r", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]}
    twice = ServedTurn({"reasoning_content": "r", "tool_calls": [{"function": {"name": "f",
                                                                                "arguments": '{"a": 2, "a": 1}'}}]}, "call")
    s = score_turn(twice, ref, tools)
    assert s.arguments is False and s.format_valid is False and s.tool_name is True


@pytest.mark.parametrize(("url", "words"), [
    ("http://u:pw@127.0.0.1:99999/v1", "is not a URL"),
    ("http://[::1/v1", "is not a URL"),
    ("http:///v1", "has no host"),
    ("ftp://h/v1", "must be an http(s) URL"),
])
def test_a_base_url_that_is_no_url_is_one_line_without_its_credentials(eval_prepared, url, words, capsys):
    assert main(["eval", "--base-url", url, "--model", "m", "--data", str(eval_prepared)]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "pw" not in err


def test_plain_http_with_a_key_to_another_host_is_refused_unless_allowed(eval_prepared, monkeypatch, capsys):
    monkeypatch.setenv("EVAL_KEY", KEY)
    argv = ["eval", "--base-url", "http://10.255.255.1:8000/v1", "--model", "m", "--data", str(eval_prepared),
            "--api-key-env", "EVAL_KEY", "--retries", "0", "--timeout", "0.5", "--rows", "1"]
    assert main(argv) == 2
    assert "refusing to send the API key over plain http" in capsys.readouterr().err
    assert main([*argv, "--allow-insecure-http"]) == 2  # allowed, so sent: nothing answers there
    err = capsys.readouterr().err
    assert "refusing" not in err and KEY not in err


def test_a_server_that_stops_answering_keeps_the_turns_before_it(eval_prepared, tmp_path, capsys):
    # a request failing after its retries ended the run with one line and nothing written: an eval of
    # hours lost every turn already answered
    ok = _payload_reply(_choice({"content": "x", "reasoning_content": "r"}))
    with StubServer(lambda n, body: ok if n < 2 else Reply(status=500)) as stub:
        out = tmp_path / "partial.json"
        assert main(["eval", "--base-url", stub.base_url, "--model", "m", "--data", str(eval_prepared),
                     "--json", str(out), "--retries", "0"]) == 2
    data = json.loads(out.read_text())
    assert data["run"]["complete"] is False and data["run"]["turns"] == 2 and len(data["samples"]) == 2
    assert data["run"]["turns_asked"] > 2 and "HTTP 500" in data["run"]["stopped"]
    captured = capsys.readouterr()
    assert "INCOMPLETE: stopped after 2 of" in captured.out
    err = [line for line in captured.err.splitlines() if line.startswith("beam-sft eval: error")]
    assert len(err) == 1 and "stopped after 2 of" in err[0] and "run.complete: false" in err[0], captured.err
