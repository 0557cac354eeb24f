"""``beam-sft reason --judge``: one more request per filled turn asks a judge whether the reasoning
leads to exactly this turn; a ``no`` is ``teacher_inconsistent``, a reply that is not a verdict
``judge_failed``. Against the stub teacher (a judge's "no" and hostile replies on demand); every run
checks that each row is kept or rejected (``run_reason``)."""

from __future__ import annotations

import json

import pytest

from beam_sft.reason.judge import Unparseable, parse_verdict
from tests.reason.stub_server import Reply, StubServer
from tests.reason.test_reason import ROWS, run_reason, write_rows

JUDGE_HEADER = "=== The reasoning to check ==="


def teacher_and_judge(verdict: str, teacher: str = "I look at what was asked and answer it."):
    """The stub as both: a judge request (its prompt has the reasoning section) gets ``verdict``."""
    return lambda n, body: Reply(text=verdict if JUDGE_HEADER in body["messages"][0]["content"] else teacher)


def judged(stub) -> list[dict]:
    return [b for b in stub.requests if JUDGE_HEADER in b["messages"][0]["content"]]


def test_a_yes_keeps_the_turn_and_records_the_judge(tmp_path, capsys):
    src = write_rows(tmp_path / "one.jsonl", ROWS[:1])
    with StubServer(teacher_and_judge("VERDICT: yes\nIt leads to the answer 4.")) as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, "--judge", src=src)
    assert status == 0 and not rejected and len(stub.requests) == 2 and len(judged(stub)) == 1
    # the judge saw the reasoning it judges, quoted, and the turn
    prompt = judged(stub)[0]["messages"][0]["content"]
    assert "> I look at what was asked and answer it." in prompt and "[assistant answer]\n> 4" in prompt
    entry = kept[0]["meta"]["reasoning"][0]
    assert entry["source"] == "teacher"
    judge = entry["judge"]
    assert judge["verdict"] == "yes" and judge["reason"] == "It leads to the answer 4."
    assert judge["model"] == "teacher" and judge["prompt_digest"].startswith("sha256:")
    assert judge["prompt_digest"] != entry["prompt_digest"]
    assert "judge: yes 1, no 0, unparseable 0, failed 0" in capsys.readouterr().out


def test_a_no_is_refused_teacher_inconsistent(tmp_path):
    src = write_rows(tmp_path / "one.jsonl", ROWS[:1])
    with StubServer(teacher_and_judge("VERDICT: no\nIt argues for 5.")) as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, "--judge", src=src)
        assert [r["code"] for r in rejected] == ["teacher_inconsistent"] and not kept and status == 1
        assert "It argues for 5." in rejected[0]["message"]
        # unmask: the turn stays, weight 0, and meta.reasoning says what the judge said
        status, kept, rejected = run_reason(tmp_path, stub.base_url, "--judge", "--missing-reasoning", "unmask",
                                            src=write_rows(tmp_path / "two.jsonl", ROWS[1:2]))
    entry = kept[0]["meta"]["reasoning"][1]
    assert entry["rejected"] == "teacher_inconsistent" and entry["judge"]["verdict"] == "no"
    assert kept[0]["messages"][3]["weight"] == 0 and "reasoning_content" not in kept[0]["messages"][3]


@pytest.mark.parametrize("reply", [
    "Yes, it does.",
    "VERDICT: Yes\nfine",
    "VERDICT: yes.\nfine",
    " VERDICT: yes\nfine",
    "VERDICT: yes",  # no reason
    "VERDICT: yes\nbut\nVERDICT: no",
    "",
])
def test_a_reply_that_is_not_a_verdict_is_judge_failed(tmp_path, reply):
    src = write_rows(tmp_path / "one.jsonl", ROWS[:1])
    with StubServer(teacher_and_judge(reply)) as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, "--judge", src=src)
    assert [r["code"] for r in rejected] == ["judge_failed"] and not kept


@pytest.mark.parametrize("reply, second", [
    ("VERDICT: yes\nVerdicts aside, it leads there.", False),  # the word, not a verdict line
    ("VERDICT: no\nThe verdict of the tool is 5, not 3.", False),
    ("VERDICT: yes\nfine\n  verdict: no", True),
    ("VERDICT: yes\nfine\nVERDICT - no", True),
    ("VERDICT: yes\nfine\nVerdict = no", True),
])
def test_only_a_verdict_line_counts_as_a_second_verdict(reply, second):
    if second:
        with pytest.raises(Unparseable, match="second VERDICT"):
            parse_verdict(reply, "stop")
    else:
        verdict, reason = parse_verdict(reply, "stop")
        assert verdict == reply.split("\n")[0].removeprefix("VERDICT: ") and reason == reply.split("\n", 1)[1]


def test_a_cut_off_verdict_is_judge_failed():
    with pytest.raises(Unparseable, match="cut off"):
        parse_verdict("VERDICT: yes\nIt", "length")


def test_a_rerun_asks_nothing_teacher_and_judge_from_the_cache(tmp_path, capsys):
    src = write_rows(tmp_path / "rows.jsonl")
    with StubServer(teacher_and_judge("VERDICT: yes\nfine")) as stub:
        first = run_reason(tmp_path, stub.base_url, "--judge", src=src)
        assert len(stub.requests) == 6  # three turns, each asked and judged
        capsys.readouterr()
        second = run_reason(tmp_path, stub.base_url, "--judge", src=src)
        assert len(stub.requests) == 6
    out = capsys.readouterr().out
    assert "0 request(s)" in out and "judge: yes 3" in out
    assert [[e.get("judge", {}).get("verdict") for e in r["meta"]["reasoning"]] for r in second[1]] == \
        [[e.get("judge", {}).get("verdict") for e in r["meta"]["reasoning"]] for r in first[1]]
    assert all(e["cached"] and e["judge"]["cached"] for r in second[1] for e in r["meta"]["reasoning"]
               if e["source"] == "teacher")


@pytest.mark.parametrize("budget", [["--max-requests", "3"], ["--max-tokens-total", "25"]])
def test_the_budget_counts_judge_requests(tmp_path, capsys, budget):
    """--max-requests 3 (or 25 tokens at 10 a reply) for two turns: ask, judge, ask; the second
    judge is not sent and that turn falls back to the policy as the budget's."""
    rows = [{"messages": [{"role": "user", "content": f"Q{i}?"}, {"role": "assistant", "content": f"A{i}"}]}
            for i in range(2)]
    src = write_rows(tmp_path / "two.jsonl", rows)
    with StubServer(teacher_and_judge("VERDICT: yes\nfine")) as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, "--judge", *budget, "--concurrency", "1",
                                            src=src)
    assert len(stub.requests) == 3 and len(judged(stub)) == 1
    assert len(kept) == 1 and [r["code"] for r in rejected] == ["teacher_budget_exhausted"]
    assert "judge's request" in rejected[0]["message"]
    assert "3 request(s)" in capsys.readouterr().out


def test_the_judge_on_another_endpoint_and_model(tmp_path, tmp_path_factory):
    src = write_rows(tmp_path / "one.jsonl", ROWS[:1])
    summary = tmp_path / "summary.json"
    with StubServer() as teacher, StubServer(teacher_and_judge("VERDICT: no\nwrong")) as judge:
        status, kept, rejected = run_reason(tmp_path, teacher.base_url, "--judge-base-url", judge.base_url,
                                            "--judge-model", "referee", "--summary-json", str(summary), src=src)
    assert len(teacher.requests) == 1 and len(judge.requests) == 1 and judge.requests[0]["model"] == "referee"
    assert judge.requests[0]["temperature"] == 0.0 and judge.requests[0]["max_tokens"] == 256
    assert [r["code"] for r in rejected] == ["teacher_inconsistent"]
    counts = json.loads(summary.read_text())["teacher"]
    assert counts["verdicts"] == {"no": 1} and counts["requests"] == 2


def test_no_judge_request_for_a_reasoning_already_refused(tmp_path):
    """A reply the checks refuse (here: it names another tool) costs no judge request."""
    from tests.reason.test_reason import CALL_ROW

    src = write_rows(tmp_path / "call.jsonl", [CALL_ROW])
    with StubServer(teacher_and_judge("VERDICT: yes\nfine", teacher="I call get_time.")) as stub:
        status, kept, rejected = run_reason(tmp_path, stub.base_url, "--judge", src=src)
    assert len(stub.requests) == 1 and [r["code"] for r in rejected] == ["teacher_inconsistent"]


@pytest.mark.parametrize("flag, value, said", [("--judge-base-url", "ftp://h/v1", "--judge-base-url: must be an http(s) URL"),
                                               ("--judge-model", "", "--judge-model: must not be empty")])
def test_a_bad_judge_flag_is_one_line_naming_it(tmp_path, capsys, flag, value, said):
    from beam_sft.cli import main

    src = write_rows(tmp_path / "one.jsonl", ROWS[:1])
    status = main(["reason", str(src), "-o", str(tmp_path / "o.jsonl"), "--base-url", "http://127.0.0.1:9/v1",
                   "--model", "m", "-q", flag, value])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and said in err, err
    assert not (tmp_path / "o.jsonl").exists()
