"""``prepare`` on the new readers' sources, as ``convert`` reads them: glaive, Vertex/Gemini,
Bedrock Converse and chat-log rows in one run, an OpenAI Batch API pair as a source spec
(``batch_input``), and ``infer_tools``: its declarations render through the chat template and
the prepared folder verifies. Every record is accounted for (read = kept + rejected)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beam_sft.convert.options import ConvertOptions
from beam_sft.convert.pipeline import SourceConversion
from beam_sft.convert.rows import Rejection
from beam_sft.convert.validate import forbidden_tokens
from beam_sft.data.batch_api import BatchPair
from beam_sft.errors import NothingKept
from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
from tests.convert import test_batch_join as batch
from tests.convert import test_bedrock, test_chat_log, test_gemini, test_glaive
from tests.convert.readers_util import write_jsonl
from tests.convert.test_trajectories import tau_row


def _prepare(tmp_path: Path, tokenizer_dir, spec: SourceSpec) -> tuple[Path, dict, set]:
    from datasets import load_from_disk

    out = prepare(PrepareConfig(sources=[spec], tokenizer=str(tokenizer_dir), output=str(tmp_path / "out"),
                                num_proc=1, verify=True))
    report = json.loads((out / "report.json").read_text())
    (entry,) = report["sources"].values()
    assert entry["read"] == entry["kept"] + sum(entry["rejected"].values())
    assert report["verify"]["ok"] is True
    where = {(r["source"], r["row"], r["code"]) for r in map(json.loads, (out / "rejects.jsonl").read_text().splitlines())}
    where |= {(m["source"], m["row"], "kept") for m in (json.loads(r)["meta"] for r in load_from_disk(str(out))["row"])}
    return out, entry, where


def _converted(location, tokenizer, label: str, **options) -> set:
    conversion = SourceConversion(location, source=label, options=ConvertOptions(
        forbidden_tokens=tuple(sorted(forbidden_tokens(tokenizer))), **options))
    return {(r.source, r.row, r.code) if isinstance(r, Rejection) else (r["meta"]["source"], r["meta"]["row"], "kept")
            for r in conversion}


def test_the_new_readers_in_one_source(tmp_path, tokenizer_dir, tokenizer):
    rows = [test_glaive.ROW, test_gemini.THOUGHTS, test_bedrock.ROW, test_chat_log.OPENAI, test_chat_log.PROXY,
            test_chat_log.ANSWER]
    path = write_jsonl(tmp_path / "mixed.jsonl", rows, newline="\r\n", blank_between=True)
    _, entry, where = _prepare(tmp_path, tokenizer_dir, SourceSpec(path=str(path)))
    assert where == _converted(path, tokenizer, str(path))
    # glaive has no reasoning (the missing-reasoning policy decides); the others keep theirs
    assert (entry["read"], entry["kept"], entry["rejected"]) == (6, 5, {"missing_reasoning": 1})
    assert entry["formats"] == {"bedrock": 1, "chat_log": 3, "gemini": 1, "glaive": 1}


def test_a_batch_pair_as_a_source_spec(tmp_path, tokenizer_dir, tokenizer):
    pair = BatchPair(str(write_jsonl(tmp_path / "in.jsonl", [batch.request("r1"), batch.request("r2"),
                                                             batch.request("r3")])),
                     str(write_jsonl(tmp_path / "out.jsonl", [batch.output("r2"), batch.output("r1", status=429),
                                                              batch.output("r7")])))
    out, entry, where = _prepare(tmp_path, tokenizer_dir, SourceSpec(path=pair.output, batch_input=pair.input,
                                                                     name="batch"))
    assert (entry["read"], entry["kept"]) == (4, 1)
    assert entry["rejected"] == {"batch_http_error": 1, "batch_missing_request": 1, "batch_missing_response": 1}
    assert {(code, row) for _, row, code in where} == {
        ("kept", 0), ("batch_http_error", 1), ("batch_missing_request", 2), ("batch_missing_response", 2)}
    # each rejects line names which of the two files its row is in (row 2 of the input, row 2 of the output)
    lines = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    assert {(r["code"], r["file"], r["row"]) for r in lines} == {
        ("batch_http_error", pair.output, 1), ("batch_missing_request", pair.output, 2),
        ("batch_missing_response", pair.input, 2)}
    assert {r["source"] for r in lines} == {"batch"}


def test_inferred_tools_render_through_the_template_and_verify(tmp_path, tokenizer_dir, tokenizer):
    from datasets import load_from_disk

    path = write_jsonl(tmp_path / "tau.jsonl", [tau_row(1, "a@x.com"), tau_row(2, "b@x.com", extra_arg=True)])
    out, entry, where = _prepare(tmp_path, tokenizer_dir, SourceSpec(path=str(path), name="tau",
                                                                     convert={"infer_tools": True}))
    assert (entry["read"], entry["kept"]) == (2, 2)
    assert where == _converted(path, tokenizer, "tau", infer_tools=True)
    for record in load_from_disk(str(out)):
        row = json.loads(record["row"])
        assert row["meta"]["inferred_tools"] == ["find_user_id_by_email"]
        assert row["meta"]["notes"]["inferred_tools"] == 1
        prompt = tokenizer.decode(record["input_ids"]).split("<|start|>user")[0]
        # the declaration, in the prompt, as the template writes a tool's TypeScript type
        assert "find_user_id_by_email" in prompt and "email: string" in prompt and "limit?: number" in prompt
    without = PrepareConfig(sources=[SourceSpec(path=str(path), name="tau")], tokenizer=str(tokenizer_dir),
                            output=str(tmp_path / "out2"), num_proc=1)
    with pytest.raises(NothingKept):  # without the option: undeclared_tool, every row
        prepare(without)


def test_a_batch_spec_names_a_missing_file_with_its_key(tmp_path):
    from beam_sft.config_utils import from_dict
    from beam_sft.errors import ConfigError

    out = write_jsonl(tmp_path / "out.jsonl", [batch.output("r1")])
    with pytest.raises(ConfigError, match=r"sources\[0\]\.batch_input: .*nope.jsonl is not a file"):
        from_dict(PrepareConfig, {"sources": [{"path": str(out), "batch_input": str(tmp_path / "nope.jsonl")}]})
