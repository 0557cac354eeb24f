"""`beam-sft eval` locally on the fixture model: the table, --json's keys, --rows, the output guard,
the argument rules; and the choice of turns."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from beam_sft.cli import main
from beam_sft.evaluate.metrics import METRICS
from beam_sft.evaluate.served import openai_messages, served_turn
from beam_sft.evaluate.turns import read_rows, render_prompt, select_turns, turns_of_row
from tests.train.conftest import train_rows


def test_turns_every_trained_assistant_turn_with_its_context():
    rows = train_rows(4)
    turns = [t for row in rows for t in turns_of_row(row)]
    # kind 0: one answer; kind 1: the weight-0 answer is context only; kind 2: the call and the answer after
    # the result; kind 3: one answer with its chat-template arguments
    assert [t.kind for t in turns] == ["plain", "plain", "tool", "plain", "plain"]
    multi = turns[1]
    assert multi.messages[2]["weight"] == 0 and multi.messages[-1]["role"] == "user"
    after_result = turns[3]
    assert after_result.messages[-1]["role"] == "tool" and after_result.tools
    assert turns[4].chat_template_kwargs
    assert all(t.messages[-1]["role"] != "assistant" for t in turns)


def test_repeated_turns_are_taken_once():
    rows = train_rows(3)
    selection = select_turns(rows + rows[:2])
    assert selection.rows == 5 and len(selection.turns) == 4 and selection.duplicates == 2


def test_a_trained_turn_opening_its_row_is_counted_as_skipped_not_lost(fixture_dir, tmp_path, tokenizer, capsys):
    from tests.train.conftest import write_prepared

    row = {"messages": [{"role": "assistant", "reasoning_content": "Greet.", "content": "Hello!"},
                        {"role": "user", "content": "2+2?"},
                        {"role": "assistant", "reasoning_content": "Add.", "content": "4"}],
           "meta": {"source": "a.jsonl", "row": 0}}
    selection = select_turns([row])
    assert len(selection.turns) == 1 and selection.unprompted == 1
    prepared = write_prepared(tmp_path / "prep", [row], tokenizer)
    out = tmp_path / "eval.json"
    assert _eval(fixture_dir, prepared, "--json", str(out)) == 0
    assert "1 trained turns skipped that open their row" in capsys.readouterr().out
    assert json.loads(out.read_text())["run"]["unprompted_turns_skipped"] == 1


def test_the_prompt_ends_with_the_generation_header(tokenizer):
    turn = turns_of_row(train_rows(3)[2])[0]
    text = render_prompt(tokenizer, turn)
    assert text.endswith("<|start|>assistant") and "get_weather" in text


def _eval(fixture_dir, data, *extra):
    return main(["eval", str(fixture_dir), "--data", str(data), "--max-new-tokens", "8", *extra])


def test_local_eval_writes_the_table_and_the_json(fixture_dir, eval_prepared, tmp_path, capsys):
    out = tmp_path / "eval.json"
    assert _eval(fixture_dir, eval_prepared, "--rows", "3", "--json", str(out)) == 0
    table = capsys.readouterr().out
    assert "tool turns" in table and "plain turns" in table
    assert all(name in table for name in METRICS)
    data = json.loads(out.read_text())
    assert set(data) == {"metrics", "counts", "samples", "run"}
    assert set(METRICS) <= set(data["metrics"]) and set(data["metrics"]) == set(data["counts"])
    # three rows: kind 0 (1 turn), kind 1 (1 trained turn), kind 2 (call + answer)
    assert data["run"]["rows"] == 3 and data["run"]["turns"] == 4 == len(data["samples"])
    assert data["counts"]["format_valid"]["denominator"] == 4
    assert data["counts"]["argument_exact_match"]["denominator"] == 1  # the one tool turn
    assert {s["kind"] for s in data["samples"]} == {"tool", "plain"}
    assert data["metrics"]["distinct_ratio"] == data["counts"]["distinct_ratio"]["value"]


def test_json_in_a_new_folder_is_written_not_lost_after_the_run(fixture_dir, eval_prepared, tmp_path, capsys):
    # the folder is made before any turn is generated: a run of hours must not end failing to write its result
    out = tmp_path / "new" / "sub" / "eval.json"
    assert _eval(fixture_dir, eval_prepared, "--rows", "1", "--json", str(out)) == 0
    assert json.loads(out.read_text())["run"]["rows"] == 1


@pytest.mark.parametrize("target", ["model", "data", "inside_data"])
def test_json_never_overwrites_an_input(fixture_dir, eval_prepared, target, capsys):
    path = {"model": fixture_dir / "config.json", "data": eval_prepared,
            "inside_data": eval_prepared / "report.json"}[target]
    before = path.read_bytes() if path.is_file() else None
    assert _eval(fixture_dir, eval_prepared, "--json", str(path)) == 2
    err = capsys.readouterr().err
    assert "--json" in err and err.count("\n") == 1
    if before is not None:
        assert path.read_bytes() == before


@pytest.mark.parametrize(("argv", "message"), [
    (["--data", "x"], "give MODEL_DIR, or --base-url"),
    (["m", "--base-url", "http://127.0.0.1:1/v1", "--model", "x", "--data", "x"], "not both"),
    (["--base-url", "http://127.0.0.1:1/v1", "--data", "x"], "needs --model"),
    (["m", "--model", "x", "--data", "x"], "use it with --base-url"),
    (["org/not-here", "--data", "x"], "is not a folder"),  # never taken for a hub id
])
def test_argument_rules(argv, message, capsys):
    assert main(["eval", *argv]) == 2
    assert message in capsys.readouterr().err


def test_numeric_flags_take_cli_args_types(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["eval", "m", "--data", "x", "--rows", "0"])
    assert exc.value.code == 2 and "--rows" in capsys.readouterr().err


def test_a_missing_api_key_variable_is_one_line(eval_prepared, monkeypatch, capsys):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    assert main(["eval", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--data", str(eval_prepared),
                 "--api-key-env", "NO_SUCH_KEY_VAR"]) == 2
    assert "NO_SUCH_KEY_VAR is not set" in capsys.readouterr().err


def test_an_unreachable_server_is_one_line_naming_the_turn(eval_prepared, capsys):
    from beam_sft.reason.local_server import free_port

    port = free_port()  # nothing listens there
    assert main(["eval", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m", "--data",
                 str(eval_prepared), "--rows", "1"]) == 2
    err = capsys.readouterr().err
    assert "kind0.jsonl:0#1" in err and err.count("\n") == 1


def test_request_messages_keep_what_the_template_reads():
    row = train_rows(3)[2]
    sent = openai_messages(row["messages"])
    call = sent[1]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == row["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert sent[1]["reasoning_content"] == "I should call the tool." and sent[2]["tool_call_id"] == call["id"]
    assert all("weight" not in m for m in sent)


def test_finish_reasons_become_stops():
    assert served_turn({"finish_reason": "stop", "message": {"content": "x"}}).stop == "return"
    assert served_turn({"finish_reason": "length", "message": {"content": "x"}}).stop is None
    # vLLM's newer name for the reasoning field is read too
    assert served_turn({"finish_reason": "stop", "message": {"reasoning": "r"}}).message["reasoning_content"] == "r"


def test_read_rows_limits(eval_prepared):
    assert len(read_rows(eval_prepared, 2)) == 2 and len(read_rows(eval_prepared)) == 8


# ---------------------------------------------------------------------------- served, against the stub
# (what no real server does on demand: a chosen error, a recorded request body and headers)


def test_served_request_body_and_key_header(eval_prepared, tmp_path, monkeypatch, capsys):
    from tests.reason.stub_server import Reply, StubServer, always

    monkeypatch.setenv("EVAL_TEST_KEY", "sekret")
    with StubServer(always(Reply(text="hi", finish_reason="length"))) as stub:
        out = tmp_path / "served.json"
        assert main(["eval", "--base-url", stub.base_url, "--model", "m", "--data", str(eval_prepared),
                     "--rows", "4", "--json", str(out), "--api-key-env", "EVAL_TEST_KEY",
                     "--max-new-tokens", "7"]) == 0
        bodies, headers = stub.requests, stub.headers
    data = json.loads(out.read_text())
    assert len(bodies) == data["run"]["turns"] == 5
    assert all(b["temperature"] == 0 and b["max_tokens"] == 7 and b["model"] == "m" for b in bodies)
    assert all(h.get("Authorization") == "Bearer sekret" for h in headers)
    tool_bodies = [b for b in bodies if b.get("tools")]
    assert tool_bodies and tool_bodies[0]["tools"][0]["function"]["name"] == "get_weather"
    assert any(b.get("chat_template_kwargs") for b in bodies)  # kind 3 rows carry reasoning_effort
    # finish_reason length: no turn ended, none valid; the key never reaches the output
    assert data["metrics"]["stop_accuracy"] == 0.0 and data["metrics"]["format_valid"] == 0.0
    assert "sekret" not in out.read_text() and "sekret" not in capsys.readouterr().out


def test_a_server_error_is_one_line(eval_prepared, capsys):
    from tests.reason.stub_server import Reply, StubServer, always

    with StubServer(always(Reply(status=500))) as stub:
        assert main(["eval", "--base-url", stub.base_url, "--model", "m", "--data", str(eval_prepared)]) == 2
    err = capsys.readouterr().err
    assert "HTTP 500" in err and "kind0.jsonl:0#1" in err and err.count("\n") == 1


def test_json_in_a_folder_that_cannot_be_written_is_refused_before_any_turn_even_as_root(tmp_path, monkeypatch):
    """os.access asks the mode bits, which root passes on any folder: a read-only file system (injected,
    tests/faults.py; a read-only bind mount needs privileges a test should not use) and a folder of /proc
    (where root may create nothing) passed it, and hours of generation ended failing to write the result.
    The check makes and removes a file there instead."""
    from beam_sft.errors import BeamError
    from beam_sft.evaluate.cli import prepare_json_target
    from tests.faults import inject

    folder = tmp_path / "ro"
    folder.mkdir()
    prepare_json_target(folder / "eval.json")  # writable: nothing left behind
    assert list(folder.iterdir()) == []
    with monkeypatch.context() as m:
        inject(m, folder, errno.EROFS)
        with pytest.raises(BeamError, match=r"--json .*eval.json: its folder .*ro is not writable \(.*read-only"):
            prepare_json_target(folder / "eval.json")
    if os.path.isdir("/proc"):  # a real refusal by the kernel, though os.access says yes to root
        with pytest.raises(BeamError, match=r"its folder /proc is not writable"):
            prepare_json_target(Path("/proc/eval.json"))
    if os.geteuid() != 0:  # (as root, a folder of mode 0o500 is writable, and rightly passes)
        folder.chmod(0o500)
        try:
            with pytest.raises(BeamError, match="not writable"):
                prepare_json_target(folder / "eval.json")
        finally:
            folder.chmod(0o700)
