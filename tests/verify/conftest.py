"""A small, correct prepared dataset built here (not by beam_sft.encode), so verify is tested on its own.

Each row is encoded with ``apply_chat_template(..., return_assistant_tokens_mask=True)`` and its
weight-0 turns zeroed: the k-th run of mask ones is the k-th assistant message, since the template
wraps each assistant message in one ``{% generation %}`` block and always opens the next turn with
an untrained ``<|start|>assistant`` header.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.doc_examples import GET_WEATHER_TERSE
from tests.handmade_reports import complete_report

BOOK = {
    "type": "function",
    "function": {
        "name": "book_table",
        "parameters": {
            "type": "object",
            "properties": {
                "guests": {"type": "integer"},
                "outdoor": {"type": "boolean"},
                "prefs": {"type": "object"},
                "times": {"type": "array", "items": {"type": "string"}},
            },
        },
    },
}
BASH = {"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}


def _call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def beam_rows() -> list[dict]:
    """BeamRows covering reasoning, answers, single and parallel tool calls, tool results,
    system/developer messages, a weight-0 turn, unicode, and per-row tools and template kwargs."""
    return [
        {"messages": [
            {"role": "user", "content": "What is 2 + 2?"},
            {"role": "assistant", "reasoning_content": "Simple arithmetic.", "content": "4"}],
         "chat_template_kwargs": {"reasoning_effort": "high"},
         "meta": {"source": "alpha.jsonl", "row": 0}},
        {"messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "reasoning_content": "I should call the tool.",
             "tool_calls": [_call("call_0", "get_weather", {"city": "Paris"})]},
            {"role": "tool", "tool_call_id": "call_0", "name": "get_weather", "content": "18 C"},
            {"role": "assistant", "reasoning_content": "Report it.", "content": "18 C and sunny."}],
         "tools": [GET_WEATHER_TERSE],
         "meta": {"source": "alpha.jsonl", "row": 1}},
        {"messages": [
            {"role": "user", "content": "Compare the weather in London and Paris."},
            {"role": "assistant", "reasoning_content": "I need both cities.",
             "tool_calls": [_call("c1", "get_weather", {"city": "London"}),
                            _call("c2", "get_weather", {"city": "Paris", "days": 3})]},
            {"role": "tool", "tool_call_id": "c1", "content": "14 C, cloudy"},
            {"role": "tool", "tool_call_id": "c2", "content": "18 C, sunny"},
            {"role": "assistant", "reasoning_content": "London is colder.", "content": "Paris is warmer."}],
         "tools": [GET_WEATHER_TERSE], "chat_template_kwargs": {"reasoning_effort": 100},
         "meta": {"source": "alpha.jsonl", "row": 2}},
        {"messages": [
            {"role": "user", "content": "Hi <b>&amp;</b> \"quotes\" <script>x</script>"},
            {"role": "assistant", "reasoning_content": "Greeting.", "content": "Hello!", "weight": 0},
            {"role": "user", "content": "How are you?"},
            {"role": "assistant", "reasoning_content": "Be friendly.\nKeep it short.", "content": "Fine, thanks."}],
         "meta": {"source": "beta.jsonl", "row": 0}},
        {"messages": [
            {"role": "developer", "content": "Answer in French."},
            {"role": "system", "content": "Use emoji."},
            {"role": "user", "content": "Dis bonjour é 😀"},
            {"role": "assistant", "reasoning_content": "Répondre en français 🙂.", "content": "Bonjour ! 😀"}],
         "chat_template_kwargs": {"model_identity": "You are a test model.", "reasoning_effort": "low"},
         "meta": {"source": "beta.jsonl", "row": 1}},
        {"messages": [
            {"role": "user", "content": "Book a table for 4 outside at 7 or 8, and list files."},
            {"role": "assistant", "reasoning_content": "Two tools.",
             "tool_calls": [_call("b1", "book_table", {"guests": 4, "outdoor": True,
                                                       "prefs": {"quiet": True, "note": "window"},
                                                       "times": ["19:00", "20:00"]}),
                            _call("b2", "bash", {"command": "ls -la | head -n 3"})]},
            {"role": "tool", "tool_call_id": "b1", "content": "{\"ok\": true}"},
            {"role": "tool", "name": "bash", "content": "total 0"},
            {"role": "assistant", "reasoning_content": "Done.", "content": "Booked; the folder is empty."}],
         "tools": [BOOK, BASH],
         "meta": {"source": "beta.jsonl", "row": 2}},
    ]


def find_sub(ids: list[int], sub: list[int]) -> int:
    """Index of the first occurrence of ``sub`` in ``ids`` (markers are single added tokens, so a
    piece of rendered text tokenizes alone exactly as it does in the row)."""
    for i in range(len(ids) - len(sub) + 1):
        if ids[i:i + len(sub)] == sub:
            return i
    raise ValueError("not found")


def encode_row(row: dict, tokenizer) -> dict:
    """input_ids and assistant_masks with weight-0 turns zeroed (independent of beam_sft.encode)."""
    encoded = tokenizer.apply_chat_template(
        row["messages"], tools=row.get("tools") or None, tokenize=True, return_dict=True,
        return_assistant_tokens_mask=True, **(row.get("chat_template_kwargs") or {}))
    ids, mask = list(encoded["input_ids"]), list(encoded["assistant_masks"])
    weights = [m.get("weight", 1) for m in row["messages"] if m["role"] == "assistant"]
    runs, start = [], None
    for i, m in enumerate(mask + [0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((start, i))
            start = None
    if len(runs) != len(weights):
        raise RuntimeError(f"expected one mask run per assistant message, got {len(runs)} for {len(weights)}")
    for (a, b), weight in zip(runs, weights, strict=True):
        if weight == 0:
            mask[a:b] = [0] * (b - a)
    return {"input_ids": ids, "assistant_masks": mask}


def records_for(rows: list[dict], tokenizer) -> list[dict]:
    """The contract's columns for each row."""
    out = []
    for row in rows:
        enc = encode_row(row, tokenizer)
        out.append({**enc, "row": json.dumps(row, ensure_ascii=False), "source": row["meta"]["source"],
                    "row_index": row["meta"]["row"], "num_tokens": len(enc["input_ids"]),
                    "num_trained": sum(enc["assistant_masks"])})
    return out


def write_prepared(directory: Path, records: list[dict], tokenizer, *, report: dict | None = None,
                   rejects: list[dict] | None = None, described: list[dict] | None = None) -> Path:
    """Save ``records`` as a prepared directory: dataset, tokenizer/, report.json (sealed),
    rejects.jsonl. The report's token statistics are those of ``described`` (default ``records``):
    the rows prepare wrote, before a test changed them."""
    from datasets import Dataset, Features, Sequence, Value

    from beam_sft.dataset_folder import write_report

    features = Features({"input_ids": Sequence(Value("int32")), "assistant_masks": Sequence(Value("int8")),
                         "row": Value("string"), "source": Value("string"), "row_index": Value("int64"),
                         "num_tokens": Value("int64"), "num_trained": Value("int64")})
    directory = Path(directory)
    columns = {name: [r[name] for r in records] for name in features}
    Dataset.from_dict(columns, features=features).save_to_disk(str(directory))
    tokenizer.save_pretrained(directory / "tokenizer")
    lines = rejects if rejects is not None else REJECTS
    (directory / "rejects.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    write_report(directory, complete_report(report if report is not None else REPORT,
                                            described if described is not None else records, directory))
    return directory


REPORT = {
    "version": 1,
    "fingerprint": "test",
    "sources": {
        "alpha.jsonl": {"weight": 1.0, "read": 4, "kept": 3, "rejected": {"missing_reasoning": 1},
                        "selected": 3, "rows_out": 3},
        "beta.jsonl": {"weight": 1.0, "read": 5, "kept": 3, "rejected": {"marker_in_text": 1, "missing_reasoning": 1},
                       "selected": 3, "rows_out": 3},
    },
    "mix": {"seed": 0},
    "length_policy": {"max_length": 512, "overflow": "drop"},
    "tokens": {"rows": 6},
}
REJECTS = [
    {"source": "alpha.jsonl", "row": 3, "code": "missing_reasoning", "message": "...", "raw": {}},
    {"source": "beta.jsonl", "row": 3, "code": "marker_in_text", "message": "...", "raw": {}},
    {"source": "beta.jsonl", "row": 4, "code": "missing_reasoning", "message": "...", "raw": {}},
]


@pytest.fixture(scope="session")
def clean_records(tokenizer) -> list[dict]:
    return records_for(beam_rows(), tokenizer)


@pytest.fixture()
def make_prepared(tmp_path, tokenizer, clean_records):
    """Factory: ``make_prepared(mutate=None, **write_kwargs)`` writes a copy of the clean dataset,
    after ``mutate(records)`` changes it in place, and returns the directory."""
    count = {"n": 0}

    def make(mutate=None, **kwargs) -> Path:
        records = copy.deepcopy(clean_records)
        if mutate is not None:
            mutate(records)
        count["n"] += 1
        return write_prepared(tmp_path / f"prepared{count['n']}", records, tokenizer, **kwargs)

    return make


@pytest.fixture(scope="session")
def clean_dir(tmp_path_factory, tokenizer, clean_records) -> Path:
    """The clean prepared dataset, written once (tests that write into it must copy it first)."""
    return write_prepared(tmp_path_factory.mktemp("clean_prepared"), copy.deepcopy(clean_records), tokenizer)
