"""Harmony transcripts back into BeamRows: Beam's own rendering, and a gpt-oss transcript."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings

from beam_sft.convert import ConvertOptions, Rejection
from beam_sft.convert.harmony_text import convert_harmony
from beam_sft.convert.harmony_tools import parse_typescript_tools
from beam_sft.harmony.markers import REASONING_EFFORT_LABELS
from beam_sft.harmony.response import render_argument_value
from tests.strategies import beam_rows

OPTIONS = ConvertOptions(require_declared_tools=False)


def _expected(row: dict) -> list[dict]:
    """What a transcript can carry of a row: instructions joined, calls numbered, names resolved."""
    out: list[dict] = []
    leading = [m for m in row["messages"] if m["role"] in ("system", "developer")]
    joined = "\n\n".join(m["content"] for m in leading if m["content"])
    if joined:
        out.append({"role": "system", "content": joined})
    names, n = {}, 0
    for msg in row["messages"][len(leading) :]:
        if msg["role"] == "assistant":
            turn = {"role": "assistant", "reasoning_content": msg["reasoning_content"]}
            if msg.get("tool_calls"):
                calls = []
                for call in msg["tool_calls"]:
                    names[call["id"]] = (f"call_{n}", call["function"]["name"])
                    calls.append(
                        {
                            "id": f"call_{n}",
                            "name": call["function"]["name"],
                            "arguments": call["function"]["arguments"],
                        }
                    )
                    n += 1
                turn["tool_calls"] = calls
            else:
                turn["content"] = msg["content"]
            out.append(turn)
        elif msg["role"] == "tool":
            call_id, name = names[msg["tool_call_id"]]
            out.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": msg["content"]})
        else:
            out.append({"role": msg["role"], "content": msg["content"]})
    return out


def _comparable(messages: list[dict], typed: bool) -> list[dict]:
    out = []
    for msg in messages:
        msg = dict(msg)
        if "tool_calls" in msg:
            msg["tool_calls"] = [
                {
                    "id": c["id"],
                    "name": c.get("name") or c["function"]["name"],
                    "arguments": dict(c.get("arguments", c.get("function", {}).get("arguments"))),
                }
                for c in msg["tool_calls"]
            ]
            if not typed:
                for c in msg["tool_calls"]:
                    c["arguments"] = {k: render_argument_value(v) for k, v in c["arguments"].items()}
        out.append(msg)
    return out


# Found by Hypothesis (a CI-sized run): instructions holding a "# Tools" line were cut there, read
# back as "# Instructions" and the rest dropped.
_TOOLS_LINE_ROW = {"messages": [{"role": "system", "content": "# Tools"}, {"role": "system", "content": "0"},
                                {"role": "user", "content": "0"},
                                {"role": "assistant", "reasoning_content": "0", "content": "0", "weight": 1}],
                   "meta": {"source": "hypothesis", "row": 0}}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=beam_rows())
@example(row=_TOOLS_LINE_ROW)
def test_beam_rendering_reads_back(row, render_beam):
    text = render_beam(row["messages"], tools=row.get("tools"), **row.get("chat_template_kwargs", {}))
    back = convert_harmony(text, options=OPTIONS)
    assert not isinstance(back, Rejection), back
    typed = bool(row.get("tools"))
    assert _comparable(back["messages"], typed) == _comparable(_expected(row), typed)
    if row.get("tools"):
        assert [t["function"]["name"] for t in back["tools"]] == [t["function"]["name"] for t in row["tools"]]
    effort = row.get("chat_template_kwargs", {}).get("reasoning_effort")
    if effort is not None:
        assert back["chat_template_kwargs"]["reasoning_effort"] == REASONING_EFFORT_LABELS.get(effort, effort)


_TOOL = {"type": "function", "function": {"name": "f", "description": "Adds.",
                                          "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}


@pytest.mark.parametrize("instructions", ["# Tools", "# Tools\n\nbe brief", "Rules.\n\n# Tools\n\nnone today",
                                          "a\n\n# Tools\n\n# Tools\n\nb", "# Tools\n\ntype", "see # Tools"])
@pytest.mark.parametrize("tools", [None, [_TOOL]], ids=["no tools", "a tool"])
def test_instructions_holding_a_tools_header_read_back_whole(render_beam, instructions, tools):
    """The developer message's instructions are the user's text: a ``# Tools`` line in them is read
    as text, with or without the template's own tools section after it."""
    messages = [{"role": "system", "content": instructions}, {"role": "user", "content": "go"},
                {"role": "assistant", "reasoning_content": "r", "content": "ok"}]
    back = convert_harmony(render_beam(messages, tools=tools), options=OPTIONS)
    assert not isinstance(back, Rejection), back
    assert back["messages"][0] == {"role": "system", "content": instructions}
    assert [t["function"]["name"] for t in back.get("tools") or []] == (["f"] if tools else [])


def test_given_tools_column_wins_over_typescript(render_beam):
    tool = {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    }
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "reasoning_content": "call",
            "tool_calls": [{"id": "x", "type": "function", "function": {"name": "f", "arguments": {"n": 3}}}],
        },
    ]
    back = convert_harmony(
        {"text": render_beam(messages, tools=[tool]), "tools": [tool]}, options=ConvertOptions()
    )
    assert back["tools"] == [tool]
    assert back["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"n": 3}


GPT_OSS = (
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\n\nReasoning: high\n\n# Valid channels: analysis, commentary, final.<|end|>"
    "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n# Tools\n\n## functions\n\nnamespace functions {\n\n"
    "// Gets the weather.\ntype get_weather = (_: {\n// City name\ncity: string,\n"
    'unit?: "c" | "f", // default: c\n}) => any;\n\n} // namespace functions<|end|>'
    "<|start|>user<|message|>Weather in Paris?<|end|>"
    "<|start|>assistant<|channel|>analysis<|message|>Need the tool.<|end|>"
    "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>"
    '{"city": "Paris"}<|call|>'
    "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>18 C<|end|>"
    "<|start|>assistant<|channel|>analysis<|message|>Report.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>18 °C.<|return|>"
)


def test_gpt_oss_transcript():
    row = convert_harmony(GPT_OSS, options=ConvertOptions())
    assert row["chat_template_kwargs"] == {"reasoning_effort": "high"}
    assert row["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "reasoning_content": "Need the tool.",
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_0", "name": "get_weather", "content": "18 C"},
        {"role": "assistant", "reasoning_content": "Report.", "content": "18 °C."},
    ]
    assert row["tools"][0]["function"] == {
        "name": "get_weather",
        "description": "Gets the weather.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"description": "City name", "type": "string"},
                "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            },
            "required": ["city"],
        },
    }


def test_generation_prompt_at_the_end_is_ignored():
    text = (
        "<|start|>user<|message|>hi<|end|><|start|>assistant<|channel|>analysis<|message|>r<|end|>"
        "<|start|>assistant<|channel|>final<|message|>yo<|return|><|start|>assistant"
    )
    assert convert_harmony(text, options=OPTIONS)["messages"][1]["content"] == "yo"


def test_malformed_transcripts_are_rejected():
    assert convert_harmony("no markers at all", options=OPTIONS).code == "harmony_malformed"
    unended = "<|start|>user<|message|>hi"
    assert convert_harmony(unended, options=OPTIONS).code == "harmony_malformed"
    no_analysis = "<|start|>user<|message|>hi<|end|><|start|>assistant<|channel|>final<|message|>x<|return|>"
    # the reader's own codes reach the rejects file and the table, not one catch-all
    assert convert_harmony(no_analysis, options=OPTIONS).code == "harmony_malformed_turn"
    twice = ('<|start|>user<|message|>hi<|end|><|start|>assistant<|channel|>analysis<|message|>r<|end|>'
             '<|start|>assistant to=f<|channel|>analysis <|constrain|>xml<|message|><rfl:parameter name="a">\n1\n'
             '</rfl:parameter>\n<rfl:parameter name="a">\n2\n</rfl:parameter><|call|>')
    assert convert_harmony(twice, options=OPTIONS).code == "harmony_malformed_arguments"
    assert convert_harmony({"other": 1, "x": 2}, options=OPTIONS).code == "malformed_row"


def test_typescript_nested_objects_and_arrays():
    ts = (
        "# Tools\n\ntype book = (_: {\n// Where\nplaces: string[],\nbudget?: {\n    max_price: number,\n"
        "    currency?: string,\n    },\nflex?: boolean | null,\n}) => any;\n\n## raw_tool\n\nTakes text."
    )
    tools = parse_typescript_tools(ts)
    params = tools[0]["function"]["parameters"]
    assert params["properties"]["places"] == {
        "description": "Where",
        "type": "array",
        "items": {"type": "string"},
    }
    assert params["properties"]["budget"]["properties"]["max_price"] == {"type": "number"}
    assert params["properties"]["budget"]["required"] == ["max_price"]
    assert params["properties"]["flex"] == {"type": ["boolean", "null"]}
    assert params["required"] == ["places"]
    assert tools[1]["function"] == {
        "name": "raw_tool",
        "parameters": {"type": "string"},
        "description": "Takes text.",
    }


def test_an_object_parameter_whose_description_ends_in_a_line_break_keeps_its_type(render_beam):
    """Found by hypothesis: ``C:     // 0`` then a blank line, then ``{``."""
    for description in ("0\n", "\n0", "a\nb c\n\n"):
        tool = {"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {
            "C": {"type": "object", "description": description}, "A": {"type": "string"}},
            "required": ["C", "A"]}}}
        text = render_beam([{"role": "user", "content": "0"}], tools=[tool])
        (parsed,) = parse_typescript_tools(text[text.index("# Tools"):])
        properties = parsed["function"]["parameters"]["properties"]
        assert properties["C"]["type"] == "object" and properties["A"] == {"type": "string"}, description


def test_a_system_column_beside_the_transcript_is_the_system_prompt():
    """A `system` column beside a Harmony `text` was dropped unsaid (the Hermes transcripts' defect);
    it is read as beside any message list: put first, not written twice, not text: malformed_row."""
    text = ("<|start|>user<|message|>2+2?<|end|><|start|>assistant<|channel|>analysis<|message|>Add.<|end|>"
            "<|start|>assistant<|channel|>final<|message|>4<|return|>")
    row = convert_harmony({"text": text, "system": "Be brief."}, options=ConvertOptions())
    assert row["messages"][0] == {"role": "system", "content": "Be brief."} and len(row["messages"]) == 3
    found = convert_harmony({"text": text, "system": ["Be brief."]}, options=ConvertOptions())
    assert isinstance(found, Rejection) and found.code == "malformed_row"
    assert len(convert_harmony({"system": text}, options=ConvertOptions())["messages"]) == 2  # its only value
