"""Each rule: a clean dataset passes, and each corruption is caught with the right rule code."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_sft.verify.api import check_records
from beam_sft.verify.context import CheckEnv
from beam_sft.verify.invariants import RULE_CODES
from tests.verify.conftest import find_sub


@pytest.fixture(scope="session")
def env(tokenizer):
    """Every row of these small datasets is in the parity sample, as verify_prepared does for them."""
    env = CheckEnv.create(tokenizer, max_length=512)
    env.sampled = frozenset(range(1000))
    return env


@pytest.fixture(scope="session")
def env_unsampled(tokenizer):
    """Only the every-row parts of the rules."""
    return CheckEnv.create(tokenizer, max_length=512)


def check(records, env):
    violations, _ = check_records(enumerate(records), env)
    return violations


def rules_by_row(violations) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for v in violations:
        out.setdefault(v.row, set()).add(v.rule)
    return out


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def test_clean_dataset_has_no_violations(clean_records, env):
    assert env.parser is not None, "the parse rule must run in tests"
    assert check(clean_records, env) == []


def test_every_rule_code_is_documented():
    from beam_sft.verify import invariants

    for code in RULE_CODES:
        assert f"``{code}``" in invariants.__doc__


# --- the mutations: each caught with the right rule -----------------------------------------


def shift_mask(records, tokenizer):
    r = records[1]
    r["assistant_masks"] = [0] + r["assistant_masks"][:-1]
    r["num_trained"] = sum(r["assistant_masks"])
    return {1: "span_start"}


def untrain_final_return(records, tokenizer):
    r = records[0]
    ret = encode(tokenizer, "<|return|>")[0]
    last = max(i for i, t in enumerate(r["input_ids"]) if t == ret)
    assert r["assistant_masks"][last] == 1
    r["assistant_masks"][last] = 0
    r["num_trained"] -= 1
    return {0: "span_end"}


def train_text(record, tokenizer, text: str) -> None:
    """Mark the tokens of ``text`` (its first occurrence in ``record``) as trained."""
    sub = encode(tokenizer, text)
    at = find_sub(record["input_ids"], sub)
    record["assistant_masks"][at:at + len(sub)] = [1] * len(sub)
    record["num_trained"] = sum(record["assistant_masks"])


def train_tool_result(records, tokenizer):
    result = "<|start|>get_weather to=assistant<|channel|>analysis<|message|>18 C<|end|>"
    train_text(records[1], tokenizer, result)
    return {1: "trained_context"}


def train_user_turn(records, tokenizer):
    train_text(records[0], tokenizer, "<|start|>user<|message|>What is 2 + 2?<|end|>")
    return {0: "trained_context"}


def untrain_one_assistant_turn(records, tokenizer):
    r = records[1]
    mask = r["assistant_masks"]
    first = mask.index(1)
    end = first
    while mask[end]:
        end += 1
    mask[first:end] = [0] * (end - first)
    r["num_trained"] = sum(mask)
    return {1: "span_count"}


def swap_two_rows_ids(records, tokenizer):
    a, b = records[0], records[4]  # same shape (one trained turn), different conversations
    for key in ("input_ids", "assistant_masks", "num_tokens", "num_trained"):
        a[key], b[key] = b[key], a[key]
    return {0: "prompt_parity", 4: "prompt_parity"}


MUTATIONS = [shift_mask, untrain_final_return, train_tool_result, train_user_turn,
             untrain_one_assistant_turn, swap_two_rows_ids]


@pytest.mark.parametrize("mutate", MUTATIONS, ids=[m.__name__ for m in MUTATIONS])
def test_mutation_is_caught_with_the_right_rule(mutate, clean_records, tokenizer, env):
    records = copy.deepcopy(clean_records)
    expected = mutate(records, tokenizer)
    found = rules_by_row(check(records, env))
    assert set(found) == set(expected), found  # only the corrupted rows
    for row, rule in expected.items():
        assert rule in found[row], found


# --- the other rules --------------------------------------------------------------------------------


def test_boundary_inside_a_character_straddles(clean_records, tokenizer, env):
    records = copy.deepcopy(clean_records)
    r = records[4]
    emoji = encode(tokenizer, "😀")
    assert len(emoji) > 1, "the fixture must split this emoji into byte tokens"
    at = find_sub(r["input_ids"], encode(tokenizer, "Bonjour ! ")) + len(encode(tokenizer, "Bonjour ! "))
    assert r["input_ids"][at:at + len(emoji)] == emoji
    r["assistant_masks"][at + 1:] = [0] * (len(r["assistant_masks"]) - at - 1)  # ends inside the emoji
    r["num_trained"] = sum(r["assistant_masks"])
    found = rules_by_row(check(records, env))
    assert "straddle" in found[4] and "span_end" in found[4]


def test_boundary_on_markers_does_not_straddle(clean_records, env):
    # The shift mutation moves boundaries onto ordinary tokens; straddle must stay silent there
    # (ASCII tokens decode apart), so the finding is span_start/span_end only.
    records = copy.deepcopy(clean_records)
    shift_mask(records, None)
    assert "straddle" not in rules_by_row(check(records, env))[1]


def test_row_without_trained_tokens(clean_records, env):
    records = copy.deepcopy(clean_records)
    records[0]["assistant_masks"] = [0] * len(records[0]["input_ids"])
    records[0]["num_trained"] = 0
    assert {"no_trained", "span_count"} <= rules_by_row(check(records, env))[0]


def test_too_long(clean_records, tokenizer):
    env = CheckEnv.create(tokenizer, max_length=100)
    found = rules_by_row(check(clean_records, env))
    long_rows = {i for i, r in enumerate(clean_records) if r["num_tokens"] > 100}
    assert long_rows and {i for i, rules in found.items() if "too_long" in rules} == long_rows


def test_shape_mismatch_stops_other_rules(clean_records, env):
    records = copy.deepcopy(clean_records)
    records[2]["assistant_masks"] = records[2]["assistant_masks"][:-1]
    records[3]["num_trained"] += 1
    found = rules_by_row(check(records, env))
    assert found == {2: {"shape"}, 3: {"shape"}}


def test_row_column_not_json(clean_records, env):
    records = copy.deepcopy(clean_records)
    records[0]["row"] = "{not json"
    assert "row_json" in rules_by_row(check(records, env))[0]


def test_changed_answer_is_a_parse_mismatch(clean_records, env):
    records = copy.deepcopy(clean_records)
    row = json.loads(records[0]["row"])
    row["messages"][-1]["content"] = "5"
    records[0]["row"] = json.dumps(row)
    violations = check(records, env)
    assert rules_by_row(violations) == {0: {"parse_mismatch"}}
    assert "content: parsed '4', source '5'" in violations[0].message


def test_changed_argument_is_a_parse_mismatch(clean_records, env):
    records = copy.deepcopy(clean_records)
    row = json.loads(records[2]["row"])
    row["messages"][1]["tool_calls"][1]["function"]["arguments"]["days"] = 4
    records[2]["row"] = json.dumps(row)
    violations = [v for v in check(records, env) if v.rule == "parse_mismatch"]
    assert violations and "argument 'days' parsed 3, source 4" in violations[0].message  # typed by the schema


def test_weight_zero_turn_trained_is_a_span_count(clean_records, env, tokenizer):
    records = copy.deepcopy(clean_records)
    row = json.loads(records[3]["row"])
    row["messages"][1]["weight"] = 1  # the tokens still have it untrained
    records[3]["row"] = json.dumps(row)
    violations = check(records, env)
    assert rules_by_row(violations) == {3: {"span_count"}}
    assert "assistant turn 0 (messages[1], weight 1) is untrained" in violations[0].message


def test_truncated_row_is_a_structure_violation(clean_records, env):
    records = copy.deepcopy(clean_records)
    r = records[0]
    r["input_ids"], r["assistant_masks"] = r["input_ids"][:-1], r["assistant_masks"][:-1]
    r["num_tokens"], r["num_trained"] = len(r["input_ids"]), sum(r["assistant_masks"])
    assert {"structure", "span_end"} <= rules_by_row(check(records, env))[0]


def test_violation_carries_row_source_and_excerpt(clean_records, tokenizer, env):
    records = copy.deepcopy(clean_records)
    train_user_turn(records, tokenizer)
    [violation] = [v for v in check(records, env) if v.rule == "trained_context"]
    assert (violation.row, violation.source, violation.row_index) == (0, "alpha.jsonl", 0)
    assert "⟦<|start|>user<|message|>What is 2 + 2?<|end|>⟧" in violation.excerpt
    assert "[user]" in violation.message


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_single_mask_flip_is_caught(data, clean_records, env):
    records = copy.deepcopy(clean_records)
    n = data.draw(st.integers(0, len(records) - 1), label="row")
    r = records[n]
    i = data.draw(st.integers(0, len(r["input_ids"]) - 1), label="token")
    r["assistant_masks"][i] ^= 1
    r["num_trained"] = sum(r["assistant_masks"])
    found = rules_by_row(check([r], env))
    assert found.get(0), f"flipping token {i} of row {n} went unnoticed"


def test_changed_argument_without_the_sample_is_still_caught(clean_records, env_unsampled):
    # Off the parity sample the strict reader compares the text the template wrote.
    records = copy.deepcopy(clean_records)
    row = json.loads(records[2]["row"])
    row["messages"][1]["tool_calls"][1]["function"]["arguments"]["days"] = 4
    records[2]["row"] = json.dumps(row)
    violations = [v for v in check(records, env_unsampled) if v.rule == "parse_mismatch"]
    assert violations and "argument 'days' parsed '3', source 4" in violations[0].message


def test_clean_dataset_passes_the_every_row_rules(clean_records, env_unsampled):
    assert check(clean_records, env_unsampled) == []


def test_sampled_prompt_parity_catches_a_prompt_that_is_not_a_prefix(clean_records, env, env_unsampled,
                                                                       monkeypatch):
    # A template whose history renders differently once later turns exist: the full row still
    # matches the template, only re-rendering each prompt shows it, and only on sampled rows.
    original = CheckEnv.render

    def render(self, row, upto=None, **kwargs):
        text = original(self, row, upto, **kwargs)
        return text if upto is None else text.replace("Weather in Paris?", "Weather in Lyon?")

    monkeypatch.setattr(CheckEnv, "render", render)
    assert rules_by_row(check(clean_records, env)) == {1: {"prompt_parity"}}
    assert check(clean_records, env_unsampled) == []


def _retype_days(records, tokenizer):
    """Row 2's declaration of get_weather with ``days`` typed as a string: same names, other text."""
    r = records[2]
    row = json.loads(r["row"])
    row["tools"][0]["function"]["parameters"]["properties"]["days"]["type"] = "string"
    r["row"] = json.dumps(row)


def test_wrong_tool_declaration_is_caught_on_sampled_rows(clean_records, tokenizer, env):
    records = copy.deepcopy(clean_records)
    _retype_days(records, tokenizer)
    assert rules_by_row(check(records, env)) == {2: {"prompt_parity"}}


def test_off_the_sample_declarations_are_held_to_names(clean_records, tokenizer, env_unsampled):
    # A renamed tool or parameter is caught on every row; a changed type only on the sample (above).
    records = copy.deepcopy(clean_records)
    row = json.loads(records[2]["row"])
    row["tools"][0]["function"]["parameters"]["properties"]["town"] = \
        row["tools"][0]["function"]["parameters"]["properties"].pop("city")
    records[2]["row"] = json.dumps(row)
    assert rules_by_row(check(records, env_unsampled)) == {2: {"prompt_parity"}}
    records = copy.deepcopy(clean_records)
    _retype_days(records, tokenizer)
    assert check(records, env_unsampled) == []


def test_declarations_can_be_rendered_on_every_row(clean_records, tokenizer):
    env = CheckEnv.create(tokenizer, max_length=512)
    env.declarations_by_sample = False
    records = copy.deepcopy(clean_records)
    _retype_days(records, tokenizer)
    assert rules_by_row(check(records, env)) == {2: {"prompt_parity"}}


def test_clean_rows_with_tools_pass_the_declarations_by_name(clean_records, env_unsampled):
    """Off the sample, a clean row whose declarations are one block (not split between the system and
    developer messages, as with built-in tools) takes the by-name comparison of them: one that fell
    back to the whole rendering would be right, and four times slower to check."""
    from beam_sft.verify.arrays import TokenBatch
    from beam_sft.verify.context import build_context
    from beam_sft.verify.decode import RowText
    from beam_sft.verify.invariants import inserted_block, rendered_text

    by_name = 0
    for k, record in enumerate(clean_records):
        row = json.loads(record["row"])
        if not row.get("tools"):
            continue
        ids, mask, columns = TokenBatch.from_records([record], [k]).row(0)
        ctx = build_context(k, ids, mask, columns, env_unsampled, RowText(env_unsampled.decoder, ids))
        assert rendered_text(ctx, env_unsampled) == ctx.text.full
        one_block = inserted_block(ctx.text.full, env_unsampled.render(row, tools=False, plain=True)) is not None
        assert (ctx.cache.get("declarations") == "checked by name") == one_block, k
        by_name += one_block
    assert by_name >= 2
