"""The task-metric scorer on hand-made turns: every metric, the coercion rules, a collapsed set."""

from __future__ import annotations

import doctest
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_sft.evaluate import format_check, metrics, served, turns
from beam_sft.evaluate.metrics import (
    ServedTurn,
    aggregate,
    canonical_arguments,
    coerce,
    normalize_answer,
    score_turn,
    token_f1,
)

ADD = {"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "required": ["a", "b"],
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}
WEATHER = {"type": "function", "function": {"name": "weather", "parameters": {
    "type": "object", "required": ["city"],
    "properties": {"city": {"type": "string"}, "metric": {"type": "boolean"}, "days": {"type": "number"},
                   "tags": {"type": "array", "items": {"type": "integer"}}}}}}
TOOLS = [ADD, WEATHER]


def final(reasoning: str, answer: str) -> str:
    return f"<|channel|>analysis<|message|>{reasoning}<|end|><|start|>assistant<|channel|>final<|message|>{answer}<|return|>"


def calls(reasoning: str, *named: tuple[str, dict]) -> str:
    out = f"<|channel|>analysis<|message|>{reasoning}<|end|>"
    for i, (name, args) in enumerate(named):
        body = "\n".join(f'<rfl:parameter name="{k}">\n{v if isinstance(v, str) else json.dumps(v)}\n</rfl:parameter>'
                         for k, v in args.items())
        end = "<|call|>" if i == len(named) - 1 else "<|end|>"
        out += f"<|start|>assistant to={name}<|channel|>analysis <|constrain|>xml<|message|>{body}{end}"
    return out


def ref_calls(*named: tuple[str, dict]) -> dict:
    return {"role": "assistant", "reasoning_content": "r",
            "tool_calls": [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in named]}


def ref_answer(text: str) -> dict:
    return {"role": "assistant", "reasoning_content": "r", "content": text}


def test_doctests_run():
    for module in (metrics, format_check, turns, served):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0


# ---------------------------------------------------------------------------- each metric


def test_a_right_tool_call_scores_right_on_every_counted_metric():
    s = score_turn(calls("Add them.", ("add", {"a": 117, "b": 935})), ref_calls(("add", {"a": 117, "b": 935})), TOOLS)
    assert (s.kind, s.format_valid, s.tool_name, s.arguments, s.stop) == ("tool", True, True, True, True)
    assert s.answer_exact is None and s.answer_f1 is None  # a tool turn has no answer to count


def test_right_tool_wrong_numbers_the_collapse_the_format_cannot_see():
    s = score_turn(calls("Add.", ("add", {"a": 733, "b": 333})), ref_calls(("add", {"a": 117, "b": 935})), TOOLS)
    assert s.format_valid and s.tool_name and s.stop
    assert s.arguments is False


def test_tool_name_is_a_set_and_counts_when_only_the_generation_calls():
    # same set of names, a call repeated: the name metric is right, the argument multiset is not
    s = score_turn(calls("x", ("add", {"a": 1, "b": 2}), ("add", {"a": 1, "b": 2})),
                   ref_calls(("add", {"a": 1, "b": 2})), TOOLS)
    assert s.tool_name is True and s.arguments is False
    # a plain reference, the model calls a tool: counted for the name (wrong), not for arguments
    s = score_turn(calls("x", ("add", {"a": 1, "b": 2})), ref_answer("3"), TOOLS)
    assert (s.kind, s.tool_name, s.arguments, s.answer_exact, s.answer_f1, s.stop) == (
        "plain", False, None, False, 0.0, False)
    # plain on both sides: the name metric does not count the turn
    assert score_turn(final("x", "3"), ref_answer("3"), TOOLS).tool_name is None
    # a different tool
    assert score_turn(calls("x", ("weather", {"city": "Oslo"})), ref_calls(("add", {"a": 1, "b": 2})),
                      TOOLS).tool_name is False


def test_arguments_are_a_multiset_matched_by_name_order_free():
    ref = ref_calls(("add", {"a": 1, "b": 2}), ("weather", {"city": "Oslo"}))
    swapped = calls("x", ("weather", {"city": "Oslo"}), ("add", {"b": 2, "a": 1}))
    assert score_turn(swapped, ref, TOOLS).arguments is True
    missing = calls("x", ("add", {"a": 1, "b": 2}))
    assert score_turn(missing, ref, TOOLS).arguments is False


def test_answer_exact_match_normalises_whitespace_and_case_only():
    ref = ref_answer("The sum is 1052.")
    assert score_turn(final("r", "  the SUM  is\n1052. "), ref, TOOLS).answer_exact is True
    s = score_turn(final("r", "The sum is 1052"), ref, TOOLS)  # punctuation is not normalised away
    assert s.answer_exact is False and s.answer_f1 == 1.0  # but F1's tokens drop it
    s = score_turn(final("r", "37 plus 43 is 6."), ref_answer("36 plus 25 is 61."), TOOLS)
    assert s.answer_exact is False and s.answer_f1 == pytest.approx(2 / 5)  # "plus", "is" of five tokens


def test_stop_accuracy_follows_the_reference():
    assert score_turn(final("r", "x"), ref_answer("x"), TOOLS).stop is True
    assert score_turn(final("r", "x"), ref_calls(("add", {"a": 1, "b": 2})), TOOLS).stop is False
    cut = "<|channel|>analysis<|message|>thinking and thinking"  # the token limit hit
    s = score_turn(cut, ref_answer("x"), TOOLS)
    assert (s.stop, s.format_valid, s.answer_exact, s.answer_f1) == (False, False, False, 0.0)
    assert "does not end" in s.format_problem


def test_format_valid_is_format_healths_verdict():
    bad_arg = calls("x", ("add", {"a": "many", "b": 2}))
    s = score_turn(bad_arg, ref_calls(("add", {"a": 1, "b": 2})), TOOLS)
    assert s.format_valid is False and s.format_problem == format_check.score_turn(bad_arg, TOOLS).problem
    no_reasoning = final("", "x")
    assert score_turn(no_reasoning, ref_answer("x"), TOOLS).format_valid is False
    # an unparseable turn is still scored: wrong on every metric that counts it (its stop marker too),
    # nothing crashes
    s = score_turn("<|channel|>final<|message|>x<|return|>", ref_answer("x"), TOOLS)
    assert (s.format_valid, s.answer_exact, s.stop, s.message) == (False, False, False, None)


# ---------------------------------------------------------------------------- coercion


@pytest.mark.parametrize(("generated", "reference", "equal"), [
    ({"a": "3", "b": "4"}, {"a": 3, "b": 4}, True),          # "3" vs 3 for an integer parameter
    ({"a": 3.0, "b": 4}, {"a": 3, "b": 4}, True),            # 3.0 vs 3
    ({"a": "3.5", "b": 4}, {"a": 3, "b": 4}, False),
    ({"a": "three", "b": 4}, {"a": 3, "b": 4}, False),       # unreadable stays a string: not 3
    ({"a": True, "b": 4}, {"a": 1, "b": 4}, False),          # a boolean is not the integer 1
])
def test_integer_coercion(generated, reference, equal):
    schema = ADD["function"]["parameters"]
    assert (canonical_arguments(generated, schema) == canonical_arguments(reference, schema)) is equal


def test_boolean_number_array_string_and_order():
    schema = WEATHER["function"]["parameters"]
    gen = {"metric": "true", "city": "Oslo", "days": "2", "tags": "[1, 2.0]"}
    ref = {"city": "Oslo", "days": 2.0, "tags": [1, 2], "metric": True}
    assert canonical_arguments(gen, schema) == canonical_arguments(ref, schema)
    assert canonical_arguments({"city": "Oslo", "metric": "false"}, schema) != \
        canonical_arguments({"city": "Oslo", "metric": True}, schema)
    assert coerce(12, {"type": "string"}) == "12"  # the text the template writes for a string param
    assert coerce("Yes", {"type": "boolean"}) == "Yes"  # only true/false read as a boolean
    assert coerce("null", {"type": ["integer", "null"]}) is None
    assert canonical_arguments('{"b": "4", "a": 3}', ADD["function"]["parameters"]) == '{"a": 3, "b": 4}'


def test_a_parameter_without_a_type_keeps_key_order_free_and_3_equal_to_3_0():
    untyped = {"type": "object", "properties": {"filter": {"description": "no type"}, "n": {}}}
    same = [({"filter": {"a": 1, "b": [2, 3]}}, {"filter": {"b": [2.0, 3], "a": 1}}),  # nested, keys reordered
            ({"n": 3}, {"n": 3.0}), ({"n": 3}, {"n": "3"}), ({"extra": {"x": 1, "y": 2}}, {"extra": {"y": 2, "x": 1}})]
    for ref, gen in same:
        assert canonical_arguments(gen, untyped) == canonical_arguments(ref, untyped), (ref, gen)
    differ = [({"n": "x"}, {"n": '"x"'}), ({"filter": {"a": 1}}, {"filter": {"a": 2}}), ({"n": 3}, {"n": 4})]
    for ref, gen in differ:
        assert canonical_arguments(gen, untyped) != canonical_arguments(ref, untyped), (ref, gen)


def test_a_served_string_for_a_number_equals_the_reference_through_the_scorer():
    served = ServedTurn({"reasoning_content": "Add.", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "add", "arguments": '{"a": "117", "b": 935.0}'}}]}, "call")
    s = score_turn(served, ref_calls(("add", {"a": 117, "b": 935})), TOOLS)
    assert s.arguments is True and s.tool_name is True and s.stop is True
    # "117" for an integer is not schema-valid as written (a served model's JSON is typed): format says so
    assert s.format_valid is False


json_scalars = st.one_of(st.integers(-10**6, 10**6), st.booleans(), st.none(),
                         st.text(max_size=8), st.floats(allow_nan=False, allow_infinity=False, width=32))


@settings(deadline=None)  # 2 shared cores: timing is not what is tested
@given(st.dictionaries(st.text(min_size=1, max_size=5), json_scalars, max_size=5))
def test_canonical_arguments_ignore_key_order_and_survive_the_written_form(args):
    # reversed key order is the same call; so is every value written as the template writes it,
    # read back under a schema that declares each value's own type
    def type_of(v):
        return ("null" if v is None else "boolean" if isinstance(v, bool) else "integer" if isinstance(v, int)
                else "number" if isinstance(v, float) else "string")

    schema = {"type": "object", "properties": {k: {"type": type_of(v)} for k, v in args.items()}}
    reversed_args = dict(reversed(list(args.items())))
    assert canonical_arguments(reversed_args, schema) == canonical_arguments(args, schema)
    written = {k: v if isinstance(v, str) else json.dumps(v) for k, v in args.items()}
    assert canonical_arguments(written, schema) == canonical_arguments(args, schema)


@settings(deadline=None)
@given(st.text(max_size=30), st.text(max_size=30))
def test_token_f1_is_symmetric_bounded_and_one_on_equal(a, b):
    assert token_f1(a, b) == pytest.approx(token_f1(b, a))
    assert 0.0 <= token_f1(a, b) <= 1.0
    assert token_f1(a, a) == 1.0
    assert normalize_answer(normalize_answer(a)) == normalize_answer(a)


# ---------------------------------------------------------------------------- many turns


def _prompts(n):
    return [(117 + i, 935 - i) for i in range(n)]


def test_a_collapsed_set_of_generations_reads_low_distinct_ratio():
    # the demo's failure: every add call a=733 b=333, every sum answered "37 plus 43 is 6."
    scores = [score_turn(calls("The user wants 68 plus 68. I call add.", ("add", {"a": 733, "b": 333})),
                         ref_calls(("add", {"a": a, "b": b})), TOOLS) for a, b in _prompts(8)]
    scores += [score_turn(final("Sum.", "37 plus 43 is 6."), ref_answer(f"{a} plus {b} is {a + b}."), TOOLS)
               for a, b in _prompts(2)]
    m = aggregate(scores)
    v = m.values()
    assert v["format_valid"] == 1.0 and v["tool_name_accuracy"] == 1.0 and v["stop_accuracy"] == 1.0
    assert v["argument_exact_match"] == 0.0
    assert m.by_kind["tool"]["distinct_ratio"].numerator == 1 and v["distinct_ratio_tool"] == 1 / 8
    assert v["distinct_ratio_plain"] == 1 / 2 and v["distinct_ratio"] == 2 / 10
    assert v["answer_exact_match"] == 0.0


def test_counts_are_fractions_with_their_denominators():
    scores = [score_turn(calls("a", ("add", {"a": 1, "b": 2})), ref_calls(("add", {"a": 1, "b": 2})), TOOLS),
              score_turn(calls("b", ("add", {"a": 1, "b": 5})), ref_calls(("add", {"a": 1, "b": 2})), TOOLS),
              score_turn(final("c", "Hi"), ref_answer("hi"), TOOLS)]
    counts = aggregate(scores).counts()
    assert counts["argument_exact_match"] == {"numerator": 1.0, "denominator": 2, "value": 0.5}
    assert counts["answer_exact_match"] == {"numerator": 1.0, "denominator": 1, "value": 1.0}
    assert counts["format_valid"]["denominator"] == 3 and counts["stop_accuracy"]["value"] == 1.0
    assert counts["distinct_ratio_tool"]["value"] == 1.0
    assert counts["answer_exact_match_tool"]["value"] is None  # 0/0: no tool turn has an answer to count
    assert set(aggregate(scores).values()) == set(counts)


def test_local_and_served_forms_of_the_same_turn_score_alike():
    text = calls("Add.", ("add", {"a": 1, "b": 2}))
    served = ServedTurn({"content": None, "reasoning_content": "Add.", "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]}, "call")
    ref = ref_calls(("add", {"a": 1, "b": 2}))
    a, b = score_turn(text, ref, TOOLS), score_turn(served, ref, TOOLS)
    assert (a.format_valid, a.tool_name, a.arguments, a.stop, a.key) == (b.format_valid, b.tool_name, b.arguments,
                                                                          b.stop, b.key)
    plain_text, plain_served = final("Hi.", "Hello!"), ServedTurn({"content": "Hello!", "reasoning_content": "Hi."},
                                                                  "return")
    a, b = score_turn(plain_text, ref_answer("hello!"), TOOLS), score_turn(plain_served, ref_answer("hello!"), TOOLS)
    assert (a.format_valid, a.answer_exact, a.stop, a.key) == (b.format_valid, b.answer_exact, b.stop, b.key) == (
        True, True, True, a.key)


def test_a_served_turn_cut_off_or_inconsistent_is_not_valid():
    cut = ServedTurn({"content": "Hello", "reasoning_content": "Hi."}, None)
    s = score_turn(cut, ref_answer("Hello"), TOOLS)
    # cut off at the token limit: like a local turn that never wrote its stop token, not a finished answer
    assert (s.format_valid, s.stop, s.answer_exact, s.answer_f1, s.message) == (False, False, False, 0.0, None)
    local_cut = score_turn("<|channel|>analysis<|message|>Hi.<|end|><|start|>assistant<|channel|>final<|message|>Hello",
                           ref_answer("Hello"), TOOLS)
    assert (local_cut.format_valid, local_cut.stop, local_cut.answer_exact) == (False, False, False)
    odd = ServedTurn({"content": "Hello", "reasoning_content": "Hi."}, "call")
    assert score_turn(odd, ref_answer("Hello"), TOOLS).format_valid is False


def test_a_served_stop_that_disagrees_with_its_calls_is_unreadable_as_its_local_twin():
    ref_call = ref_calls(("add", {"a": 1, "b": 2}))
    cases = [  # (served, local twin, reference)
        (ServedTurn({"content": "Hello", "reasoning_content": "Hi."}, "call"), final("Hi.", "Hello")[:-len("<|return|>")]
         + "<|call|>", ref_call),
        (ServedTurn({"content": "", "reasoning_content": "Hi.", "tool_calls": []}, "call"), None, ref_call),
        (ServedTurn({"content": None, "reasoning_content": "Add.", "tool_calls": [
            {"function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]}, "return"),
         calls("Add.", ("add", {"a": 1, "b": 2}))[:-len("<|call|>")] + "<|return|>", ref_call),
        (ServedTurn({"content": "Hello", "reasoning_content": "Hi."}, "call"), None, ref_answer("Hello")),
    ]
    for served_form, local_form, ref in cases:
        s = score_turn(served_form, ref, TOOLS)
        marks = (s.format_valid, s.stop, s.tool_name, s.arguments, s.answer_exact, s.message)
        assert marks == ((False, False, False, False, None, None) if ref.get("tool_calls")
                         else (False, False, None, None, False, None)), marks
        if local_form is not None:
            t = score_turn(local_form, ref, TOOLS)
            assert marks == (t.format_valid, t.stop, t.tool_name, t.arguments, t.answer_exact, t.message)


# ---------------------------------------------------------------------------- the written form, any schema

_PARAM_SCHEMAS = st.sampled_from([
    None,  # not declared in properties at all
    {},  # declared without a type
    {"description": "no type"},
    {"type": "integer"}, {"type": "number"}, {"type": "boolean"}, {"type": "string"}, {"type": "null"},
    {"type": "object"}, {"type": "array"}, {"type": ["string", "integer"]}, {"type": ["integer", "null"]},
    {"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"type": "string", "nullable": True},
    {"type": "made-up"},
])
_SAFE_TEXT = st.text(alphabet=st.characters(blacklist_characters="<|\r", blacklist_categories=("Cs", "Cc")),
                     max_size=8)
_VALUES = st.recursive(
    st.one_of(st.integers(-10**6, 10**6), st.booleans(), st.none(), _SAFE_TEXT,
              st.floats(allow_nan=False, allow_infinity=False, width=32)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("xyz"), inner, max_size=2)),
    max_leaves=4)


@settings(deadline=None, max_examples=150)
@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.tuples(_VALUES, _PARAM_SCHEMAS), min_size=1))
def test_a_generation_writing_the_reference_call_is_right_locally_and_served(drawn):
    """Whatever the schema declares (nothing, a type, a union, an unknown type), a local generation that
    writes exactly the reference's call, as the template writes it, and a served one that returns the
    reference's arguments as JSON, both score argument-right: the scorer reads values as the parser
    does (transformers' casts through ``parse_assistant_turn``), not as the JSON a schema-less parse
    cannot recover."""
    from beam_sft.harmony.response import render_argument_value

    args = {k: v for k, (v, _) in drawn.items()}
    properties = {k: p for k, (_, p) in drawn.items() if p is not None}
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
                                                                            "properties": properties}}}]
    ref = ref_calls(("f", args))
    body = "\n".join(f'<rfl:parameter name="{k}">\n{render_argument_value(v)}\n</rfl:parameter>' for k, v in args.items())
    text = f"<|channel|>analysis<|message|>r<|end|><|start|>assistant to=f<|channel|>analysis <|constrain|>xml" \
           f"<|message|>{body}<|call|>"
    local = score_turn(text, ref, tools)
    assert local.message is not None, local.format_problem
    assert local.arguments is True, (local.message, args)
    served_turn_ = ServedTurn({"reasoning_content": "r", "tool_calls": [
        {"function": {"name": "f", "arguments": json.dumps(args)}}]}, "call")
    assert score_turn(served_turn_, ref, tools).arguments is True
    # an untyped integer the server returns as its text: the format writes both alike
    untyped = {k: str(v) for k, v in args.items() if type(v) is int and properties.get(k, {}).get("type") is None
               and not properties.get(k, {}).get("anyOf")}
    if untyped:
        as_text = ServedTurn({"reasoning_content": "r", "tool_calls": [
            {"function": {"name": "f", "arguments": {**args, **untyped}}}]}, "call")
        assert score_turn(as_text, ref, tools).arguments is True


def test_distinct_ratio_is_not_fooled_by_whitespace_or_case():
    # one answer to every prompt, written with a trailing newline, a double space or capitals: a collapse
    answers = ["The answer is 42.", "The answer is 42.\n", "the  answer is 42.", "THE ANSWER IS 42. "]
    scores = [score_turn(final("Think.", a), ref_answer(f"{i} is it."), TOOLS) for i, a in enumerate(answers)]
    assert aggregate(scores).values()["distinct_ratio"] == 1 / 4
    unread = [score_turn(t, ref_answer("x"), TOOLS) for t in ("no stop here", "no  stop here\n", "NO STOP HERE")]
    assert aggregate(unread).values()["distinct_ratio"] == 1 / 3


def test_one_text_composed_or_with_combining_accents_is_one_text():
    # "café" NFC against "cafe" + U+0301: the same text, scored wrong on the answer, the arguments and F1
    nfc, nfd = "Caf\u00e9 in Z\u00fcrich", "Cafe\u0301 in Zu\u0308rich"
    turn = score_turn(final("Think.", nfd), ref_answer(nfc), TOOLS)
    assert turn.answer_exact is True and turn.answer_f1 == 1.0
    ref = ref_calls(("weather", {"city": "Z\u00fcrich"}))
    assert score_turn(calls("r", ("weather", {"city": "Zu\u0308rich"})), ref, TOOLS).arguments is True
    assert score_turn(calls("r", ("weather", {"city": "Zurich"})), ref, TOOLS).arguments is False
