"""Property tests: converters never raise on any JSON, and valid rows survive export + conversion."""

from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from beam_sft.convert import CONVERTERS, ConvertOptions, Rejection, check_record, convert_row, validate
from beam_sft.convert.detect import classify
from beam_sft.convert.openai import convert_openai
from beam_sft.convert.policy import apply_missing_reasoning
from beam_sft.convert.rows import REASON_CODES
from beam_sft.convert.sharegpt import convert_sharegpt
from tests.convert.export_rows import export_openai, export_sharegpt
from tests.strategies import beam_rows

# Keys and values the converters look at, so that random rows reach deep into them.
KEYS = [
    "messages",
    "conversations",
    "role",
    "content",
    "from",
    "value",
    "tool_calls",
    "function",
    "name",
    "arguments",
    "id",
    "type",
    "tool_call_id",
    "tool_call_ids",
    "tools",
    "functions",
    "function_call",
    "function_calls",
    "reasoning_content",
    "reasoning",
    "thinking",
    "weight",
    "loss",
    "train",
    "system",
    "text",
    "parameters",
    "chat_template_kwargs",
    "reasoning_effort",
    "answer_generation",
    "train_messages",
]
WORDS = [
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
    "human",
    "gpt",
    "observation",
    "function_call",
    "text",
    "reasoning",
    "tool_call",
    "image",
    "<think>",
    "</think>",
    "<think>x</think>y",
    "<tool_call>",
    '<tool_call>{"name": "f", "arguments": {}}</tool_call>',
    "<tool_response>1</tool_response>",
    "<tools>[]</tools>",
    '{"name": "f", "arguments": {"a": 1}}',
    '[{"name": "f", "content": "x"}]',
    "{",
    "<|end|>",
    "<|start|>user<|message|>hi<|end|>",
    "</rfl:parameter>",
    "<function=f></function>",
    "USER: hi",
    "ASSISTANT:",
    "",
    " ",
    "low",
    "f",
    "call_0",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.sampled_from(WORDS),
)
json_any = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=5)
    ),
    max_leaves=24,
)
ROLES = ["system", "developer", "user", "assistant", "assistant", "tool", "function", "ipython"]
SPEAKERS = ["human", "gpt", "system", "function_call", "observation", "tool", "chatgpt", "narrator"]
NAMES = ["f", "get_weather", "a b", "", "x<y"]


class _Bytes:
    """Hypothesis-drawn bytes read as a sequence of choices (0 once they run out)."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def byte(self) -> int:
        self.pos += 1
        return self.data[self.pos - 1] if self.pos <= len(self.data) else 0

    def pick(self, options: list):
        return options[self.byte() % len(options)]


def json_from_bytes(data: bytes):
    """A JSON row read off ``data``: half the time an arbitrary JSON value, otherwise an OpenAI,
    ShareGPT, ToolBench or transcript shape whose every field may be replaced by arbitrary JSON.

    Hypothesis draws and shrinks the bytes; this is several times cheaper per example than
    ``st.recursive`` and reaches deep into the converters, which is what makes 10,000 examples
    worth their time in the default suite.
    """
    b = _Bytes(data)

    def anything(depth: int = 0):
        kind = b.byte() % (9 if depth < 5 else 5)
        if kind == 0:
            return None
        if kind == 1:
            return bool(b.byte() & 1)
        if kind == 2:
            return (b.byte() - 128) * (b.byte() + 1)
        if kind == 3:
            return text()
        if kind == 4:
            return b.byte() / 7.0 if b.byte() % 8 else float("nan")
        if kind in (5, 6):
            return {
                (b.pick(KEYS) if b.byte() % 4 else f"k{b.byte()}"): anything(depth + 1)
                for _ in range(b.byte() % 5)
            }
        if kind == 7:
            return [anything(depth + 1) for _ in range(b.byte() % 4)]
        return b.pick(WORDS)

    def text() -> str:
        return "".join(
            b.pick(WORDS) if b.byte() % 2 else b.pick(list('ab <>|/{}"\n:é\x00')) for _ in range(b.byte() % 5)
        )

    def maybe(plausible):
        return anything(1) if b.byte() % 5 == 0 else plausible()

    def call():
        fn = {
            "name": maybe(lambda: b.pick(NAMES)),
            "arguments": maybe(
                lambda: b.pick(
                    ['{"a": 1}', "", "{bad", '"{\\"a\\": 2}"', {"a": text()}, {"x": "</rfl:parameter>"}, []]
                )
            ),
        }
        out = {"function": fn} if b.byte() % 4 else dict(fn)
        for key, value in (
            ("id", lambda: b.pick(["c1", "c2", "", "c1"])),
            ("type", lambda: b.pick(["function", "x"])),
        ):
            if b.byte() % 2:
                out[key] = maybe(value)
        return out

    def content():
        kind = b.byte() % 4
        if kind == 0:
            return [
                maybe(
                    lambda: {
                        "type": b.pick(["text", "reasoning", "tool_call", "image", "thinking"]),
                        b.pick(["text", "value"]): maybe(text),
                    }
                )
                for _ in range(b.byte() % 3)
            ]
        return maybe(text)

    def message():
        msg = {"role": maybe(lambda: b.pick(ROLES)), "content": content()}
        for key, value in (
            ("tool_calls", lambda: [call() for _ in range(b.byte() % 3)]),
            ("function_call", call),
            (
                "function_calls",
                lambda: "<tool_call><function=f><parameter=a>1</parameter></function></tool_call>",
            ),
            ("tool_call_id", lambda: b.pick(["c1", "c2", "zz"])),
            ("tool_call_ids", lambda: [b.pick(["c1", "c2"]) for _ in range(b.byte() % 3)]),
            ("name", lambda: b.pick(NAMES)),
            (b.pick(["reasoning_content", "reasoning", "thinking"]), text),
            (b.pick(["weight", "loss", "train"]), lambda: b.pick([0, 1, True, False, 0.5])),
            ("tools", lambda: [{"type": "function", "function": {"name": b.pick(NAMES)}}]),
        ):
            if b.byte() % 4 == 0:
                msg[key] = maybe(value)
        return msg

    def turn():
        out = {"from": maybe(lambda: b.pick(SPEAKERS)), "value": maybe(text)}
        if b.byte() % 4 == 0:
            out[b.pick(["reasoning_content", "weight", "name", "tool_call_id"])] = anything(1)
        return out

    def extras(row: dict) -> dict:
        for key, value in (
            (
                "tools",
                lambda: b.pick(['[{"name": "f"}]', "[]", [{"type": "function", "function": {"name": "f"}}]]),
            ),
            ("functions", lambda: [{"name": "f", "parameters": {"type": "object"}}]),
            ("system", text),
            ("chat_template_kwargs", lambda: {"reasoning_effort": b.pick(["low", 7, "none", True])}),
            ("reasoning_effort", lambda: b.pick(["high", 3, None])),
        ):
            if b.byte() % 4 == 0:
                row[key] = maybe(value)
        return row

    kind = b.byte() % 8
    if kind < 3:
        return anything()
    if kind == 3:
        return extras({"messages": maybe(lambda: [message() for _ in range(b.byte() % 6)])})
    if kind == 4:
        return extras({"conversations": maybe(lambda: [turn() for _ in range(b.byte() % 6)])})
    if kind == 5:
        return [message() for _ in range(b.byte() % 5)]
    if kind == 6:
        return {
            "answer_generation": {
                "train_messages": [[message() for _ in range(b.byte() % 3)] for _ in range(2)]
            }
        }
    heads = [
        "<|start|>user<|message|>",
        "<|start|>assistant<|channel|>analysis<|message|>",
        "<|end|>",
        "<|start|>assistant<|channel|>final<|message|>",
        "<|return|>",
        "<|call|>",
        "USER: ",
        "ASSISTANT:\n",
        "<|start|>assistant to=f<|channel|>analysis <|constrain|>xml<|message|>",
        '<rfl:parameter name="a">\n',
    ]
    return "".join(b.pick(heads) + text() for _ in range(b.byte() % 6))


OPTION_SETS = [
    ConvertOptions(),
    ConvertOptions(missing_reasoning="truncate", tool_call_content="reject", require_declared_tools=False),
    ConvertOptions(missing_reasoning="unmask", strip_answer_tags=False, system_tools=False),
]


def _never_raises(raw, options: ConvertOptions) -> None:
    before = copy.deepcopy(raw)
    classify(raw, options.columns)  # the per-row format guess runs outside any converter's guard
    check_record(raw)
    auto = convert_row(raw, format="auto", options=options, source="s", row=0)
    assert isinstance(auto, Rejection) and auto.code in REASON_CODES or isinstance(auto, dict)
    for name, converter in CONVERTERS.items():
        result = converter(raw, options=options)
        assert repr(raw) == repr(before), f"{name} modified its input"
        if isinstance(result, Rejection):
            assert result.code in REASON_CODES
            continue
        assert isinstance(result, dict) and isinstance(result["messages"], list), name
        result = apply_missing_reasoning(result, options.missing_reasoning)
        problem = validate(result, options=options)
        assert problem is None or problem.code in REASON_CODES


@settings(max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    raw=st.binary(min_size=1, max_size=400).map(json_from_bytes), which=st.integers(0, len(OPTION_SETS) - 1)
)
def test_arbitrary_json_never_raises_out_of_a_converter(raw, which):
    _never_raises(raw, OPTION_SETS[which])


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(raw=json_any, which=st.integers(0, len(OPTION_SETS) - 1))
def test_arbitrary_json_from_hypothesis_own_strategy_never_raises(raw, which):
    _never_raises(raw, OPTION_SETS[which])


def _strip_meta(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "meta"}


ROUND_TRIP = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@ROUND_TRIP
@given(row=beam_rows())
def test_valid_rows_survive_openai_export(row):
    options = ConvertOptions(require_declared_tools="tools" in row)
    assert validate(row, options=options) is None
    exported = json.loads(json.dumps(export_openai(row)))  # through JSON text, as in a file
    back = convert_openai(exported, options=options)
    assert back == _strip_meta(row)


@ROUND_TRIP
@given(row=beam_rows())
def test_valid_rows_survive_sharegpt_export_with_reasoning_fields(row):
    options = ConvertOptions(require_declared_tools="tools" in row)
    exported = json.loads(json.dumps(export_sharegpt(row, reasoning="field")))
    assert convert_sharegpt(exported, options=options) == _strip_meta(row)


def _normal_form(row: dict) -> dict:
    """The reasoning.py normal form inline tags can carry: stripped reasoning and answers."""
    messages = []
    for msg in row["messages"]:
        msg = dict(msg)
        if msg["role"] == "assistant":
            msg["reasoning_content"] = msg["reasoning_content"].strip()
            if "content" in msg:
                msg["content"] = msg["content"].strip()
        messages.append(msg)
    return {**row, "messages": messages}


def _inline_safe(row: dict) -> bool:
    for msg in row["messages"]:
        if msg["role"] == "assistant":
            text = msg.get("reasoning_content", "") + msg.get("content", "")
            if (
                "think>" in text
                or "thinking>" in text
                or "reasoning>" in text
                or "answer>" in text
                or not msg.get("content", "x").strip()
            ):
                return False
    return True


@ROUND_TRIP
@given(row=beam_rows().map(_normal_form))
def test_valid_rows_survive_sharegpt_export_with_think_tags(row):
    assume(_inline_safe(row))
    options = ConvertOptions(require_declared_tools="tools" in row)
    exported = json.loads(json.dumps(export_sharegpt(row)))
    assert convert_sharegpt(exported, options=options) == _strip_meta(row)


def test_a_nan_reasoning_effort_is_a_rejection_not_a_crash():
    """Found by the property above: NaN is not equal to itself, so the conflict check took a NaN
    reasoning_effort for a conflict with a chat_template_kwargs that was not there, and raised TypeError."""
    from beam_sft.convert import ConvertOptions, convert_row

    result = convert_row({"messages": [{"role": "user", "content": "q"},
                                       {"role": "assistant", "reasoning_content": "r", "content": "a"}],
                          "reasoning_effort": float("nan")}, format="openai", options=ConvertOptions())
    assert result.code in ("non_standard_number", "bad_reasoning_effort"), result
