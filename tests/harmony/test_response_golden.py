"""Golden file: what the response template makes of hand-written outputs, parsed whole and streamed.

``golden_response/cases.json`` pins, byte for byte, the message (without and with tools) and the
event stream when each output is fed in 7-character chunks (so markers arrive split). The cases
are pure text, independent of any tokenizer. Regenerate after an intended change with
``BEAM_UPDATE_GOLDEN=1 pytest tests/harmony/test_response_golden.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from beam_sft.harmony.response import response_template

GOLDEN = Path(__file__).parent / "golden_response" / "cases.json"
PREFIX = "<|start|>user<|message|>Hi<|end|><|start|>assistant"
CALL = "<|start|>assistant to={}<|channel|>analysis <|constrain|>xml<|message|>"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {
                    "s": {"type": "string"},
                    "i": {"type": "integer"},
                    "n": {"type": "number"},
                    "b": {"type": "boolean"},
                    "o": {"type": "object"},
                    "a": {"type": "array"},
                    "z": {"type": ["string", "null"]},
                },
            },
        },
    }
]


def _param(key: str, value: str) -> str:
    return f'<rfl:parameter name="{key}">\n{value}\n</rfl:parameter>'


CASES = {
    "answer": "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Done.<|return|>",
    "answer_without_return": "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Done.",
    "empty_analysis_and_answer": "<|channel|>analysis<|message|><|end|><|start|>assistant<|channel|>final<|message|><|return|>",
    "extra_header_and_trailing_text": "<|start|>assistant<|channel|>analysis<|message|>a<|end|>"
    "<|start|>assistant<|channel|>final<|message|>b<|return|><|endoftext|>",
    "two_analysis_messages": "<|channel|>analysis<|message|>one<|end|><|start|>assistant<|channel|>analysis<|message|>two<|end|>"
    "<|start|>assistant<|channel|>final<|message|>x<|return|>",
    "unterminated_analysis": "<|channel|>analysis<|message|>cut off",
    "no_channel_at_all": "Just text.",
    "typed_call": "<|channel|>analysis<|message|>Call f.<|end|>"
    + CALL.format("f")
    + "\n".join(
        [
            _param("s", "line 1\n  <b>line 2</b>\n"),
            _param("i", "-12"),
            _param("n", "2.50"),
            _param("b", "true"),
            _param("o", '{"k": [1, "é"]}'),
            _param("a", "[]"),
            _param("z", "null"),
            _param("unknown", "7"),
        ]
    )
    + "<|call|>",
    "parallel_calls_and_no_arguments": "<|channel|>analysis<|message|>Both.<|end|>"
    + CALL.format("f")
    + _param("i", "1")
    + "<|end|>"
    + CALL.format("other")
    + "<|end|>"
    + CALL.format("f")
    + _param("i", "x")
    + "<|call|>",
    "call_missing_newlines_and_end": "<|channel|>analysis<|message|>a<|end|>"
    + CALL.format("f")
    + '<rfl:parameter name="s">tight</rfl:parameter>',
    "unicode_everywhere": "<|channel|>analysis<|message|>你好 ✓\n<|end|><|start|>assistant<|channel|>final<|message|>naïve café 🚀<|return|>",
}


def _stream(text: str, tools) -> list:
    from transformers.utils.chat_parsing import ResponseParser

    parser = ResponseParser(response_template(), prefix=PREFIX, tools=tools)
    events = list(parser.initial_events)
    for start in range(0, len(text), 7):
        events += parser.feed(text[start : start + 7])
    message, final = parser.finalize()
    return [*events, *final, {"type": "message", "value": message}]


def _render_golden() -> str:
    from transformers.utils.chat_parsing import parse_response

    out = {}
    for name, text in CASES.items():
        out[name] = {
            "generated": text,
            "parsed": parse_response(text, response_template(), prefix=PREFIX),
            "parsed_with_tools": parse_response(text, response_template(), prefix=PREFIX, tools=TOOLS),
            "stream_with_tools": _stream(text, TOOLS),
        }
    return json.dumps(out, ensure_ascii=False, indent=1) + "\n"


def test_golden_response_cases():
    text = _render_golden()
    if os.environ.get("BEAM_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text, encoding="utf-8")
    assert GOLDEN.read_text(encoding="utf-8") == text, (
        "golden mismatch: rerun with BEAM_UPDATE_GOLDEN=1 and review"
    )


def test_golden_cases_behave_as_documented():
    """Spot checks, so that the golden file is not merely whatever the code printed."""
    from transformers.utils.chat_parsing import parse_response

    def parse(name, tools=None):
        return parse_response(CASES[name], response_template(), prefix=PREFIX, tools=tools)

    assert (
        parse("answer")
        == parse("answer_without_return")
        == {"role": "assistant", "thinking": "Think.", "content": "Done."}
    )
    assert parse("empty_analysis_and_answer") == {"role": "assistant"}
    assert parse("extra_header_and_trailing_text") == {"role": "assistant", "thinking": "a", "content": "b"}
    assert parse("two_analysis_messages")["thinking"] == "one\n\ntwo"
    assert parse("unterminated_analysis") == {"role": "assistant", "thinking": "cut off"}
    assert parse("no_channel_at_all") == {"role": "assistant"}
    typed = parse("typed_call", TOOLS)["tool_calls"][0]["function"]["arguments"]
    assert typed == {
        "s": "line 1\n  <b>line 2</b>\n",
        "i": -12,
        "n": 2.5,
        "b": True,
        "o": {"k": [1, "é"]},
        "a": [],
        "z": None,
        "unknown": "7",
    }
    calls = parse("parallel_calls_and_no_arguments", TOOLS)["tool_calls"]
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("f", {"i": 1}),
        ("other", {}),
        ("f", {"i": "x"}),  # "x" is no integer: the text is kept
    ]
    assert parse("call_missing_newlines_and_end")["tool_calls"][0]["function"]["arguments"] == {"s": "tight"}
