"""Fuzz: every rendered field, every added or special token of the tokenizer actually used. No such
token reaches ``input_ids`` except in its marker role: the row is rejected, naming field and token."""

from __future__ import annotations

import copy
import json

import pytest

from beam_sft.convert.validate import forbidden_tokens
from beam_sft.harmony.markers import ALL_MARKERS
from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
from tests.encode.conftest import write_jsonl

BASE = {
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": "Use the tool."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "reasoning_content": "Call it.", "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "c0", "name": "get_weather", "content": "18 C"},
        {"role": "assistant", "reasoning_content": "Report it.", "content": "18 C."},
    ],
    "tools": [{"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}],
    "chat_template_kwargs": {"model_identity": "You are a weather bot.", "reasoning_effort": "low"},
}


def _set(row: dict, field: str, token: str) -> dict:
    row = copy.deepcopy(row)
    tool = row["tools"][0]["function"]
    call = row["messages"][3]["tool_calls"][0]["function"]
    spell = f"pre{token}post"
    if field.startswith("messages"):
        index, key = field[len("messages["):].split("].")
        row["messages"][int(index)][key] = spell
    elif field == "argument value":
        call["arguments"]["city"] = spell
    elif field == "argument key":
        call["arguments"] = {spell: "Paris"}
    elif field == "tool description":
        tool["description"] = spell
    elif field == "parameter description":
        tool["parameters"]["properties"]["city"]["description"] = spell
    elif field == "property name":
        tool["parameters"]["properties"][spell] = {"type": "string"}
    elif field == "enum value":
        tool["parameters"]["properties"]["unit"]["enum"] = ["c", spell]
    elif field == "model_identity":
        row["chat_template_kwargs"]["model_identity"] = spell
    else:
        raise AssertionError(field)
    return row


FIELDS = ["messages[0].content", "messages[1].content", "messages[2].content", "messages[3].reasoning_content",
          "messages[4].content", "messages[5].reasoning_content", "messages[5].content", "argument value",
          "argument key", "tool description", "parameter description", "property name", "enum value",
          "model_identity"]


def _fuzz(tmp_path, tokenizer_dir, tokens) -> None:
    rows = [BASE] + [_set(BASE, field, token) for field in FIELDS for token in tokens]
    data = write_jsonl(tmp_path / "rows.jsonl", rows)
    out = prepare(PrepareConfig(sources=[SourceSpec(path=str(data), format="openai")], tokenizer=str(tokenizer_dir),
                                output=str(tmp_path / "out"), num_proc=1))
    rejects = {r["row"]: r for r in map(json.loads, (out / "rejects.jsonl").read_text().splitlines())}
    for index in range(1, len(rows)):
        field, token = FIELDS[(index - 1) // len(tokens)], tokens[(index - 1) % len(tokens)]
        assert index in rejects, f"{field} with {token!r} was kept"
        assert rejects[index]["code"] in ("special_token_in_text", "harmony_marker_in_text"), rejects[index]
        assert token in rejects[index]["message"] or "<|" in rejects[index]["message"]
    from datasets import load_from_disk

    (record,) = load_from_disk(str(out))  # only the clean row, with its markers in their places
    assert record["row_index"] == 0


def added_token_strings(tokenizer) -> list[str]:
    """Every added or special token of the tokenizer, markers included (read from the tokenizer
    itself, not from the rule under test)."""
    return sorted(set(tokenizer.get_added_vocab()) | set(tokenizer.all_special_tokens))


def test_the_forbidden_set_is_every_added_or_special_token_but_the_markers(tokenizer):
    expected = {t for t in added_token_strings(tokenizer) if t not in ALL_MARKERS and t.strip()}
    assert forbidden_tokens(tokenizer) == expected and "<|endoftext|>" in expected


def test_no_added_token_is_smuggled_in_any_field(tmp_path, tokenizer_dir, tokenizer):
    tokens = added_token_strings(tokenizer)
    assert "<|endoftext|>" in tokens and "<|start|>" in tokens
    _fuzz(tmp_path, tokenizer_dir, list(tokens))


@pytest.mark.realistic
def test_no_added_token_is_smuggled_realistic(tmp_path, realistic_tokenizer_dir, realistic_tokenizer):
    tokens = added_token_strings(realistic_tokenizer)
    special = [t for t in tokens if t in realistic_tokenizer.all_special_tokens]
    others = [t for t in tokens if t not in special]
    _fuzz(tmp_path, realistic_tokenizer_dir, special + others[:: max(1, len(others) // 24)])


def test_the_fixture_pad_token_is_rejected_with_the_field_named(tmp_path, tokenizer_dir):
    row = _set(BASE, "messages[5].content", "<|endoftext|>")
    data = write_jsonl(tmp_path / "rows.jsonl", [BASE, row])
    out = prepare(PrepareConfig(sources=[SourceSpec(path=str(data))], tokenizer=str(tokenizer_dir),
                                output=str(tmp_path / "out"), num_proc=1, verify=False))
    (reject,) = map(json.loads, (out / "rejects.jsonl").read_text().splitlines())
    assert reject["code"] == "special_token_in_text"
    assert reject["message"] == "messages[5].content contains the tokenizer's added token '<|endoftext|>'"


def test_prepare_and_convert_share_one_rule(tokenizer):
    """prepare's converter options carry the tokenizer's forbidden tokens for every source, and the
    duplicate implementation is gone."""
    import importlib.util

    from beam_sft.prepare.resolved import convert_options

    assert importlib.util.find_spec("beam_sft.prepare.special") is None
    config = PrepareConfig(sources=[SourceSpec(path="a.jsonl"), SourceSpec(path="b.json", format="sharegpt")])
    forbidden = tuple(sorted(forbidden_tokens(tokenizer)))
    for i, spec in enumerate(config.sources):
        assert convert_options(spec, config, i, forbidden).forbidden_tokens == forbidden


def test_the_fingerprint_holds_the_forbidden_tokens(tokenizer, monkeypatch):
    from beam_sft.prepare import cache, resolved

    config = PrepareConfig(sources=[SourceSpec(path="a.jsonl")])
    before = cache.fingerprint_parts(resolved.resolve(config, tokenizer), tokenizer)
    monkeypatch.setattr(resolved, "forbidden_tokens", lambda tok: frozenset({"<|endoftext|>", "<|x|>"}))
    plan = resolved.resolve(config, tokenizer)
    after = cache.fingerprint_parts(plan, tokenizer)
    assert plan.sources[0].options.forbidden_tokens == ("<|endoftext|>", "<|x|>")  # the options the converter gets
    assert before["forbidden_tokens"] != after["forbidden_tokens"]


def test_every_source_format_is_checked(tmp_path, tokenizer_dir):
    """A ShareGPT source (not only OpenAI rows) is held to the same rule."""
    row = {"conversations": [{"from": "human", "value": "pre<|endoftext|>post"},
                             {"from": "gpt", "value": "<think>t</think>ok"}]}
    data = write_jsonl(tmp_path / "rows.jsonl", [row])
    with pytest.raises(Exception, match="special_token_in_text=1"):
        prepare(PrepareConfig(sources=[SourceSpec(path=str(data), format="sharegpt")], tokenizer=str(tokenizer_dir),
                              output=str(tmp_path / "out"), num_proc=1, verify=False))


@pytest.mark.realistic
def test_the_forbidden_set_realistic(realistic_tokenizer):
    expected = {t for t in added_token_strings(realistic_tokenizer) if t not in ALL_MARKERS and t.strip()}
    assert forbidden_tokens(realistic_tokenizer) == expected
    assert len(expected) == len(added_token_strings(realistic_tokenizer)) - len(ALL_MARKERS)  # no token left out
