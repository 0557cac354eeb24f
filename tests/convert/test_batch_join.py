"""Batch input and output files joined by custom_id (beam_sft/data/batch_api.py), OpenAI's Batch API
and Anthropic's Message Batches as their docs write them: complete, a missing side, failed requests
(an error object, a non-200 status, an errored, canceled or expired result), duplicates of a
custom_id, lines of neither provider; every line ends kept or rejected with its code, and the
summary counts each."""

from __future__ import annotations

import json
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_sft.cli import main
from beam_sft.data.batch_api import BatchPair
from tests.convert.readers_util import codes, run_source, write_jsonl


def request(cid: str, question: str = "What is 2+2?") -> dict:
    return {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "gpt-4o-mini", "messages": [{"role": "system", "content": "Be brief."},
                                                         {"role": "user", "content": question}],
                     "max_tokens": 1000}}


def output(cid: str, *, status: int = 200, error: dict | None = None, answer: str = "4") -> dict:
    body = {"id": "chatcmpl-x", "object": "chat.completion", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer,
                                                          "reasoning_content": "Add them.", "refusal": None}}]}
    response = None if error else {"status_code": status, "request_id": f"req_{cid}",
                                   "body": body if status == 200 else {"error": {"message": "server"}}}
    return {"id": f"batch_req_{cid}", "custom_id": cid, "response": response, "error": error}


def _pair(tmp_path, requests, outputs, **kw) -> BatchPair:
    return BatchPair(str(write_jsonl(tmp_path / "batch_in.jsonl", requests, **kw)),
                     str(write_jsonl(tmp_path / "batch_out.jsonl", outputs, **kw)))


def test_complete_join_in_any_output_order(tmp_path):
    pair = _pair(tmp_path, [request("r1"), request("r2", "3+3?")], [output("r2", answer="6"), output("r1")])
    results, conversion = run_source(pair, fill=None)
    assert codes(results) == ["kept", "kept"]
    assert [r["messages"][-1]["content"] for r in results] == ["6", "4"]
    assert results[0]["messages"][1]["content"] == "3+3?"  # r2's own request
    assert [(r["meta"]["source"], r["meta"]["row"]) for r in results] == [(pair.output, 0), (pair.output, 1)]
    assert conversion.format == "chat_log"


def test_missing_sides_and_errors_each_have_a_code(tmp_path):
    pair = _pair(tmp_path, [request("r1"), request("r2"), request("r3"), request("r4")],
                 [output("r1"), output("r2", status=500), output("r3", error={"code": "server_error",
                                                                              "message": "The server had an error"}),
                  output("r9")], newline="\r\n", blank_between=True)
    results, conversion = run_source(pair, fill=None)
    assert codes(results) == ["kept", "batch_http_error", "batch_error", "batch_missing_request",
                              "batch_missing_response"]
    assert results[4].source == pair.input and results[4].row == 3 and "r4" in results[4].message
    assert dict(conversion.summary.rejected) == {"batch_http_error": 1, "batch_error": 1,
                                                 "batch_missing_request": 1, "batch_missing_response": 1}


def test_duplicate_custom_ids_reject_every_line_holding_them(tmp_path):
    pair = _pair(tmp_path, [request("a"), request("d_in"), request("d_in"), request("d_out"), request("b")],
                 [output("d_in"), output("d_out"), output("a"), output("d_out"), output("b")])
    results, conversion = run_source(pair, fill=None)
    # input line 2 (the second d_in) as the input is read; then each output line; last the requests
    # that no output line joined (d_in's first line, d_out's line)
    assert codes(results) == ["batch_duplicate_id", "batch_duplicate_id", "batch_duplicate_id", "kept",
                              "batch_duplicate_id", "kept", "batch_duplicate_id", "batch_duplicate_id"]
    assert [(r.source, r.row) for r in results[-2:]] == [(pair.input, 1), (pair.input, 3)]
    assert conversion.summary.read == 8  # 5 + 5 lines: 2 joined pairs (one record each) + 6 lines alone
    assert conversion.summary.rejected["batch_duplicate_id"] == 6


def test_malformed_and_unreadable_lines(tmp_path):
    pair = _pair(tmp_path, [request("r1"), {"custom_id": 7, "body": {}}], [output("r1"), {"no": "id"}])
    with open(pair.output, "a", encoding="utf-8") as fh:
        fh.write("{not json\n")
    results, _ = run_source(pair, fill=None)
    assert codes(results) == ["malformed_row", "kept", "malformed_row", "invalid_json"]


def test_convert_cli_batch_flags_and_summary(tmp_path, capsys):
    pair = _pair(tmp_path, [request("r1"), request("r2")], [output("r1")])
    out, rejects, summary = tmp_path / "rows.jsonl", tmp_path / "rejects.jsonl", tmp_path / "summary.json"
    status = main(["convert", "--batch-input", pair.input, "--batch-output", pair.output, "-o", str(out),
                   "--rejects", str(rejects), "--summary-json", str(summary)])
    assert status == 0
    kept = out.read_text().splitlines()
    rejected = [json.loads(line) for line in rejects.read_text().splitlines()]
    (source,) = json.loads(summary.read_text())["sources"]
    assert (source["read"], source["kept"], source["by_code"]) == (2, 1, {"batch_missing_response": 1})
    assert len(kept) == 1 and [r["code"] for r in rejected] == ["batch_missing_response"]
    assert "batch_missing_response=1" in capsys.readouterr().out


def test_convert_cli_reject_lines_name_the_pair_and_the_file(tmp_path, capsys):
    """A rejects line of a pair is placed as prepare's are: ``source`` the pair as the table names it,
    ``file`` which of the two files the line is in, ``row`` its line there, ``index`` its record's number
    in the source (the input's unanswered requests come after every output line)."""
    pair = _pair(tmp_path, [request("r1"), request("r2")], [output("r9"), output("r1", status=500)])
    rejects = tmp_path / "rejects.jsonl"
    main(["convert", "--batch-input", pair.input, "--batch-output", pair.output, "-o", str(tmp_path / "rows.jsonl"),
          "--rejects", str(rejects)])
    assert pair.label in capsys.readouterr().out
    lines = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert [(r["source"], r["file"], r["row"], r["index"], r["code"]) for r in lines] == [
        (pair.label, pair.output, 0, 0, "batch_missing_request"),
        (pair.label, pair.output, 1, 1, "batch_http_error"),
        (pair.label, pair.input, 1, 2, "batch_missing_response")]  # r1's request is the 500's pair


def test_convert_cli_needs_both_batch_flags(tmp_path, capsys):
    pair = _pair(tmp_path, [request("r1")], [output("r1")])
    assert main(["convert", "--batch-input", pair.input, "-o", str(tmp_path / "o.jsonl")]) != 0
    assert "--batch-input and --batch-output go together" in capsys.readouterr().err


ids = st.sampled_from(["a", "b", "c", "d", "e"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(inputs=st.lists(ids, max_size=6), outputs=st.lists(st.tuples(ids, st.sampled_from([200, 200, 429, 0])),
                                                          max_size=6), anthropic=st.booleans())
def test_every_line_ends_in_exactly_one_record(tmp_path, inputs, outputs, anthropic):
    """Any mix of ids, duplicates, failures, of either provider's batch: a pair (an id on one line of
    each file) is one record, every other line one record of its own, and no line is named twice."""
    if anthropic:
        kinds = {200: "succeeded", 429: "expired", 0: "errored"}
        lines_in, lines_out = [params_line(cid) for cid in inputs], [result_line(cid, kinds[s]) for cid, s in outputs]
    else:
        lines_in = [request(cid) for cid in inputs]
        lines_out = [output(cid, error={"message": "x"}) if status == 0 else output(cid, status=status)
                     for cid, status in outputs]
    pair = _pair(tmp_path, lines_in, lines_out)
    results, conversion = run_source(pair, fill=None)
    in_ids, out_ids = Counter(inputs), Counter(cid for cid, _ in outputs)
    pairs = sum(1 for cid in in_ids if in_ids[cid] == 1 and out_ids[cid] == 1)
    assert conversion.summary.read == len(inputs) + len(outputs) - pairs
    named = [(r.source, r.row) if hasattr(r, "code") else (r["meta"]["source"], r["meta"]["row"]) for r in results]
    assert len(named) == len(set(named))


def test_an_output_over_a_batch_file_is_refused_and_nothing_changes(tmp_path, capsys):
    pair = _pair(tmp_path, [request("r1")], [output("r1")])
    before = open(pair.input, "rb").read()
    assert main(["convert", "--batch-input", pair.input, "--batch-output", pair.output, "-o", pair.input]) != 0
    assert open(pair.input, "rb").read() == before
    assert "--batch-input" in capsys.readouterr().err


# Anthropic's Message Batches: a requests file of {custom_id, params} lines, a results file of
# {custom_id, result: {type, message | error}} lines, as the Message Batches docs write them.
def params_line(cid: str, question: str = "Weather in Paris?") -> dict:
    return {"custom_id": cid, "params": {
        "model": "claude-sonnet-4-5", "max_tokens": 1024, "system": [{"type": "text", "text": "Be brief."}],
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": question}]}}


def result_line(cid: str, kind: str = "succeeded", *, stop_reason: str = "end_turn") -> dict:
    if kind == "succeeded":
        result = {"type": kind, "message": {
            "id": f"msg_{cid}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "thinking", "thinking": "Ask the tool.", "signature": "s"},
                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}],
            "stop_reason": stop_reason, "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 3}}}
    elif kind == "errored":
        result = {"type": kind, "error": {"type": "error", "error": {"type": "invalid_request_error",
                                                                     "message": "max_tokens: too large"}}}
    else:
        result = {"type": kind}
    return {"custom_id": cid, "result": result}


def test_anthropic_message_batches_join_as_the_openai_pair_does(tmp_path):
    # a Message Batches pair was malformed_row on every input line (no body) and every result (no response)
    pair = _pair(tmp_path, [params_line("a"), params_line("b"), params_line("c"), params_line("d"),
                            params_line("e"), params_line("f")],
                 [result_line("b", "errored"), result_line("a"), result_line("c", "canceled"),
                  result_line("d", "expired"), result_line("z"), result_line("e", stop_reason="max_tokens")])
    results, conversion = run_source(pair, fill=None)
    assert codes(results) == ["batch_error", "kept", "batch_error", "batch_error", "batch_missing_request",
                              "response_cut_off", "batch_missing_response"], [getattr(r, "message", "") for r in results]
    kept = results[1]
    assert kept["messages"][0] == {"role": "system", "content": "Be brief."}
    assert kept["messages"][-1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert kept["messages"][-1]["reasoning_content"] == "Ask the tool."
    assert (kept["meta"]["source"], kept["meta"]["row"]) == (pair.output, 1)
    assert "'b'" in results[0].message and "invalid_request_error" in results[0].message
    assert "'c'" in results[2].message and "canceled" in results[2].message
    assert pair.input in results[4].message and "'z'" in results[4].message
    assert results[6].source == pair.input and "'f'" in results[6].message and pair.output in results[6].message
    assert conversion.format == "chat_log"


def test_a_line_of_neither_or_both_providers_or_crossed_is_malformed(tmp_path):
    both = {**params_line("b"), "body": request("b")["body"]}
    pair = _pair(tmp_path, [params_line("a"), both, request("o"), params_line("u")],
                 [output("a"), result_line("o"), {"custom_id": "u", "result": {"type": "pending"}}])
    results, _ = run_source(pair, fill=None)
    assert codes(results) == ["malformed_row"] * 4, [getattr(r, "message", "") for r in results]
    assert "body or Anthropic's params" in results[0].message
    assert "an OpenAI answer to an Anthropic request" in results[1].message
    assert "an Anthropic answer to an OpenAI request" in results[2].message
    assert "'pending'" in results[3].message


def test_convert_cli_reads_a_message_batches_pair(tmp_path, capsys):
    pair = _pair(tmp_path, [params_line("a"), params_line("b")], [result_line("a"), result_line("b", "expired")])
    out, rejects = tmp_path / "rows.jsonl", tmp_path / "rejects.jsonl"
    assert main(["convert", "--batch-input", pair.input, "--batch-output", pair.output, "-o", str(out),
                 "--rejects", str(rejects)]) == 0
    assert len(out.read_text().splitlines()) == 1
    (line,) = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert (line["code"], line["file"], line["row"]) == ("batch_error", pair.output, 1)
