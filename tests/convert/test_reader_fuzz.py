"""Near-valid rows for the newest readers: the Responses API (responses.py), the Anthropic Messages
API (anthropic.py, with Bedrock Converse sharing blocks.py), the well-known flat column pairs
(flat.py), lists of turn pairs (pairs.py), xLAM's query/answers/tools rows (xlam.py), LangChain message dumps
(langchain.py: messages_to_dict's and dumpd's shapes) and chat-template
transcripts (transcripts.py: pieces of a ChatML or Llama 3 text inserted, dropped, duplicated, swapped).
Each example starts from a valid row and mutates it a few times: a value at any depth replaced by a
hostile one (wrong type, NaN, lone surrogate, a huge string), a key removed or added, a list emptied,
reordered or given a duplicate, a near-valid item (a call, a result, reasoning, a block of another kind)
inserted anywhere. Arbitrary JSON (test_properties.py) rarely gets this deep.

What must hold, for ``--format auto`` and the reader's own format: ``convert_row`` never lets an
exception out and never answers ``converter_error``; a rejection has a code of the table and a one-line
message; a kept row keeps every Beam rule again and renders through Beam's template."""

from __future__ import annotations

import copy
import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_sft.convert import ConvertOptions, Rejection, convert_row, validate
from beam_sft.reject_codes import REASON_CODES

# The default tier draws few examples (the file stays under a few seconds); raise max_examples locally
# to hunt (2,000 a test found the defects this file's tests below name).
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))

PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

RESPONSES = {
    "model": "gpt-5", "instructions": "You are a travel assistant.",
    "tools": [{"type": "function", "name": "get_weather", "description": "Weather", "parameters": PARAMS}],
    "input": [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Call twice."}],
         "encrypted_content": "gAAAAB..."},
        {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "get_weather",
         "arguments": "{\"city\": \"Paris\"}", "status": "completed"},
        {"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "get_weather",
         "arguments": "{\"city\": \"Rome\"}"},
        {"type": "function_call_output", "call_id": "call_a", "output": "{\"temp_c\": 18}"},
        {"type": "function_call_output", "call_id": "call_b", "output": [{"type": "input_text", "text": "22 C"}]}],
    "output": [
        {"type": "reasoning", "id": "rs_2", "content": [{"type": "reasoning_text", "text": "Both known."}]},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Paris: 18 C. Rome: 22 C.", "annotations": []}]}],
    "status": "completed", "reasoning": {"effort": "medium"}}
RESPONSES_ITEMS = [
    {"type": "function_call", "call_id": "call_a", "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"},
    {"type": "function_call", "call_id": "call_z", "name": "wëather_名前", "arguments": "{}"},
    {"type": "function_call", "call_id": "call_c", "name": "get_weather", "arguments": "not json"},
    {"type": "function_call_output", "call_id": "call_a", "output": "dup"},
    {"type": "function_call_output", "call_id": "call_new", "output": [{"type": "output_text", "text": "x"}]},
    {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Late thought."}]},
    {"type": "reasoning", "summary": [], "encrypted_content": "gAAA"},
    {"type": "reasoning", "content": [{"type": "reasoning_text", "text": " "}]},
    {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
    {"type": "message", "role": "assistant", "content": "Plain."},
    {"role": "developer", "content": [{"type": "input_text", "text": "Be kind."}]},
    {"role": "system", "content": "Late system."},
    {"role": "user", "content": [{"type": "input_image", "image_url": "https://x/y.png"}]},
    {"type": "item_reference", "id": "msg_0"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    {"type": "message", "role": "assistant", "status": "incomplete", "content": "Cut"},
    {"type": "output_text", "text": "a part, not an item"},
    {"type": "summary_text", "text": "a part, not an item"},
    {"role": "tool", "tool_call_id": "call_a", "content": "chat shape"},
]

ANTHROPIC = {
    "model": "claude-sonnet-4-5", "max_tokens": 2048, "tool_choice": {"type": "auto"},
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "system": [{"type": "text", "text": "You are helpful.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Use the tool.", "signature": "abc"},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Report.", "signature": "def"},
            {"type": "text", "text": "It is 18 C."}]}],
    "tools": [{"name": "get_weather", "description": "Get weather", "input_schema": PARAMS}]}
ANTHROPIC_ITEMS = [
    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Rome"}},
    {"type": "tool_use", "id": "toolu_2", "name": "ünïcode_名", "input": {}},
    {"type": "tool_use", "id": "toolu_3", "name": "get_weather", "input": "{\"city\": \"Oslo\"}"},
    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "dup"}]},
    {"type": "tool_result", "tool_use_id": "toolu_9", "content": "x", "is_error": True},
    {"type": "tool_result", "tool_use_id": "toolu_1"},
    {"type": "thinking", "thinking": "Late thought.", "signature": "s"},
    {"type": "redacted_thinking", "data": "EmwKAhgB"},
    {"type": "text", "text": "More."},
    {"type": "text", "text": ""},
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
    {"type": "input_text", "text": "a Responses part"},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "again"}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}]},
    {"role": "assistant", "content": "Plain."},
    {"name": "bash", "type": "bash_20250124"},
    {"name": "f", "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}},
]

BEDROCK = {
    "schemaVersion": "bedrock-conversation-2024",
    "system": [{"text": "You are a radio assistant."}],
    "messages": [
        {"role": "user", "content": [{"text": "Most popular song on WZPZ?"}]},
        {"role": "assistant", "content": [
            {"reasoningContent": {"reasoningText": {"text": "Use top_song.", "signature": "sig"}}},
            {"toolUse": {"toolUseId": "tu_1", "name": "top_song", "input": {"sign": "WZPZ"}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": "tu_1", "content": [{"json": {"song": "X"}}]}}]},
        {"role": "assistant", "content": [
            {"reasoningContent": {"reasoningText": {"text": "Report."}}}, {"text": "It is X."}]}],
    "toolConfig": {"tools": [{"toolSpec": {"name": "top_song", "description": "Top song.", "inputSchema": {
        "json": {"type": "object", "properties": {"sign": {"type": "string"}}, "required": ["sign"]}}}}]}}
BEDROCK_ITEMS = [
    {"toolUse": {"toolUseId": "tu_1", "name": "top_song", "input": {"sign": "ABC"}}},
    {"toolResult": {"toolUseId": "tu_1", "content": [{"text": "dup"}], "status": "error"}},
    {"toolResult": {"toolUseId": "tu_9", "content": []}},
    {"reasoningContent": {"reasoningText": {"text": "Late."}}},
    {"reasoningContent": {"redactedContent": "AAAA"}},
    {"text": "More."},
    {"image": {"format": "png", "source": {"bytes": "iVBOR"}}},
    {"cachePoint": {"type": "default"}},
    {"role": "assistant", "content": [{"text": "Plain."}]},
]

FLAT_ROWS = [
    {"prompt": "2+2?", "completion": "4"},
    {"prompt": "2+2?", "response": "4", "reasoning": "Add."},
    {"question": "2+2?", "answer": "4", "thinking": "Add."},
    {"query": "2+2?", "response": "4", "reasoning_content": "Add."},
    {"problem": "2+2?", "solution": "4"},
    {"instruction": "Summarize.", "context": "A long text.", "response": "Short.", "category": "summarization"},
    {"instruction": "Add", "input": "2+2", "output": "4", "reasoning": "Sum.", "system": "Be exact.",
     "history": [["1+1?", "2"]]},
]
FLAT_ITEMS = ["2+2?", "4", ["a", "b"], {"prompt": "p"}, ["1+1?", "2"]]
FLAT_KEYS = ["prompt", "completion", "response", "question", "answer", "query", "problem", "solution",
             "instruction", "context", "input", "output", "reasoning", "reasoning_content", "thinking", "system",
             "history", "messages", "tools", "chat_template_kwargs", "weight"]

PAIR_ROWS = [
    {"source": "GPT4LLM", "conversation": [{"input": "What is 1+1?", "output": "<think>Add.</think>2"},
                                           {"input": "And 2+2?", "output": "4", "reasoning": "Add two."}]},
    {"conversation_id": 7, "category": "Brainstorming", "system": "Be brief.",
     "conversation": [{"human": "Name a color.", "assistant": "<think>Any.</think>Red."}]},
]
PAIR_ITEMS = [{"input": "q", "output": "a"}, {"human": "q", "assistant": "a"}, {"input": "q"},
              {"role": "user", "content": "q"}, {"from": "gpt", "value": "a"}, "q", ["q", "a"],
              {"input": "q", "output": "<think>open"}, {"input": "q", "output": "a", "weight": 0}]
PAIR_KEYS = ["input", "output", "human", "assistant", "conversation", "conversations", "messages", "system",
             "role", "content", "from", "value", "reasoning", "thinking", "weight", "tool_calls", "instruction",
             "tools", "name"]
# xLAM's rows with the JSON text decoded (the fuzz reaches into it), and one as the dataset writes it.
XLAM_TOOLS = [
    {"name": "get_weather", "description": "Weather", "parameters": {
        "city": {"type": "str", "description": "The city."},
        "days": {"type": "int, optional", "description": "How many.", "default": 1},
        "fields": {"type": "List[str]", "description": "Which."},
        "where": {"type": "Tuple[float, float]", "description": "Lat, lon."},
        "extra": {"type": "Dict[str, Any]", "description": "More.", "default": None}}},
    {"name": "top_song", "description": "Top song.", "parameters": {"sign": {"type": "Optional[str]"}}}]
XLAM = {"id": 7, "query": "Weather in Paris, and the top song on WZPZ?",
        "answers": [{"name": "get_weather", "arguments": {"city": "Paris", "fields": ["temp"], "where": [48.8, 2.3]}},
                    {"name": "top_song", "arguments": "{\"sign\": \"WZPZ\"}"}],
        "tools": XLAM_TOOLS}
XLAM_TEXT = {**XLAM, "answers": json.dumps(XLAM["answers"]), "tools": json.dumps(XLAM_TOOLS)}
XLAM_ITEMS = [
    {"name": "get_weather", "arguments": {"city": "Oslo", "days": "NaN"}},
    {"name": "nämé 名", "arguments": {}},
    {"name": "top_song", "arguments": "not json"},
    {"name": "top_song"},
    {"type": "str", "description": "d", "default": ""},
    {"type": "Callable[[int], int]"},
    {"type": "List[Dict[str, int]], optional"},
    {"type": "str, default='x'", "default": "y"},
    {"type": "int", "required": True},
    {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}},
    {"name": "g", "parameters": {"a": {"type": "set"}}},
    "Union[int, str]", "[]", "[{}]",
]
XLAM_KEYS = ["query", "answers", "tools", "name", "arguments", "parameters", "type", "description", "default",
             "required", "optional", "items", "enum", "messages", "system", "id"]
# LangChain's two serializations (langchain.py): messages_to_dict's type+data, dumpd's lc constructors.
_LC_CALL = {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1", "type": "tool_call"}
LANGCHAIN = {"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": PARAMS}}], "messages": [
    {"type": "system", "data": {"content": "Be brief.", "additional_kwargs": {}, "type": "system"}},
    {"type": "human", "data": {"content": "Weather in Paris?", "additional_kwargs": {}, "example": False}},
    {"type": "ai", "data": {"content": "", "id": "run-1", "tool_calls": [_LC_CALL], "invalid_tool_calls": [],
                            "additional_kwargs": {"reasoning_content": "Ask.", "tool_calls": [
                                {"id": "call_1", "type": "function",
                                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                            "response_metadata": {"finish_reason": "tool_calls"}, "usage_metadata": None}},
    {"type": "tool", "data": {"content": "18 C", "tool_call_id": "call_1", "name": "get_weather", "status": "success"}},
    {"type": "AIMessageChunk", "data": {"content": "18 C.", "additional_kwargs": {"reasoning_content": "Say it."}}}]}
LANGCHAIN_LC = [
    {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "HumanMessage"],
     "kwargs": {"content": "Weather in Paris?", "type": "human"}},
    {"lc": 1, "type": "constructor", "id": ["langchain_core", "messages", "AIMessage"], "kwargs": {
        "content": [{"type": "thinking", "thinking": "Ask.", "signature": "Eq"},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}],
        "tool_calls": [{**_LC_CALL, "id": "toolu_1"}], "type": "ai"}},
    {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "ToolMessage"],
     "kwargs": {"content": [{"type": "text", "text": "18 C"}], "tool_call_id": "toolu_1", "status": "error"}},
    {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessage"],
     "kwargs": {"content": [{"type": "reasoning", "reasoning": "Say it."}, {"type": "text", "text": "18 C."}]}}]
LANGCHAIN_ITEMS = [
    _LC_CALL, {**_LC_CALL, "id": "call_2"}, {**_LC_CALL, "args": "{\"city\": 1}"}, {"name": "f", "args": {}},
    {"type": "human", "data": {"content": "And Rome?"}}, {"type": "remove", "data": {"id": "x"}},
    {"type": "chat", "data": {"content": "Hi.", "role": "assistant"}}, {"type": "function", "data": {"content": "x"}},
    {"lc": 1, "type": "not_implemented", "id": ["x"], "repr": "X()"}, {"lc": 1, "type": "secret", "id": ["KEY"]},
    {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "AIMessageChunk"],
     "kwargs": {"content": "Late.", "tool_call_chunks": [{"name": "get_weather", "args": "{", "index": 0}]}},
    {"name": "get_weather", "args": "{", "id": "call_1", "error": "bad", "type": "invalid_tool_call"},
    {"type": "thinking", "thinking": "Other."}, {"type": "redacted_thinking", "data": "x"},
    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Rome"}},
    {"type": "tool_call", "id": "c", "name": "get_weather", "args": {"city": "Oslo"}},
    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}, {"__openai_role__": "developer"},
    {"name": "get_weather", "arguments": "{}"}, {"role": "user", "content": "q"},
]
LANGCHAIN_KEYS = ["type", "data", "lc", "kwargs", "id", "content", "additional_kwargs", "tool_calls",
                  "invalid_tool_calls", "tool_call_chunks", "tool_call_id", "status", "name", "args", "role",
                  "reasoning_content", "reasoning", "function_call", "refusal", "__openai_role__", "audio", "thinking",
                  "input", "artifact", "example", "messages", "tools"]

KEYS = ["type", "role", "content", "text", "id", "call_id", "name", "arguments", "output", "summary", "status",
        "input", "tool_use_id", "thinking", "signature", "is_error", "encrypted_content", "refusal", "tool_calls",
        "reasoning_content", "weight", "previous_response_id", "cache_control", "toolUse", "toolResult",
        "reasoningContent", "input_schema", "parameters", "incomplete_details", "annotations", "image_url"]
STRINGS = ["", " ", "\n", "\ud800", "x\udfffy", "call_a", "toolu_1", "tu_1", "get_weather", "top_song",
           "assistant", "user", "system", "developer", "tool", "function", "message", "reasoning", "function_call",
           "function_call_output", "text", "thinking", "tool_use", "tool_result", "output_text", "input_text",
           "summary_text", "reasoning_text", "refusal", "completed", "incomplete", "in_progress", "名前 ü",
           "<|end|>", "<|start|>assistant<|message|>", "<think>x</think>", "{", "{}", "[]", "null", "NaN",
           "x" * 3000, "é" * 70_000]
HOSTILE = st.one_of(
    st.sampled_from([None, True, False, 0, -1, 1, 2**70, 1.5, math.nan, math.inf, -math.inf, [], {}, [None],
                     {"type": None}, {"text": 1}, [{}], ["x"]]),
    st.sampled_from(STRINGS),
    st.text(max_size=12),
    st.integers(),
)


def _places(value, path=()):
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _places(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _places(item, (*path, i))


def _at(row, path):
    for key in path:
        row = row[key]
    return row


@st.composite
def near_valid(draw, bases, items, keys=KEYS):
    """A valid row of ``bases`` with one to four mutations, each at a drawn place."""
    row = copy.deepcopy(draw(st.sampled_from(bases)))
    for _ in range(draw(st.integers(1, 4))):
        paths = list(_places(row))
        path = draw(st.sampled_from(paths))
        node = _at(row, path)
        op = draw(st.sampled_from(["replace", "replace", "drop", "add_key", "list", "insert", "wrap"]))
        if not path:
            if isinstance(row, dict) and op in ("add_key", "drop"):
                row[draw(st.sampled_from(keys))] = copy.deepcopy(draw(HOSTILE | st.sampled_from(items)))
            continue
        parent, last = _at(row, path[:-1]), path[-1]
        if op == "replace":
            parent[last] = copy.deepcopy(draw(HOSTILE | st.sampled_from(items)))
        elif op == "drop":
            del parent[last]
        elif op == "add_key" and isinstance(node, dict):
            node[draw(st.sampled_from(keys))] = copy.deepcopy(draw(HOSTILE | st.sampled_from(items)))
        elif op == "list" and isinstance(node, list) and node:
            how = draw(st.sampled_from(["empty", "duplicate", "swap", "reverse", "move_last_first"]))
            if how == "empty":
                node.clear()
            elif how == "duplicate":
                i = draw(st.integers(0, len(node) - 1))
                node.insert(draw(st.integers(0, len(node))), copy.deepcopy(node[i]))
            elif how == "swap":
                i, j = draw(st.integers(0, len(node) - 1)), draw(st.integers(0, len(node) - 1))
                node[i], node[j] = node[j], node[i]
            elif how == "reverse":
                node.reverse()
            else:
                node.insert(0, node.pop())
        elif op == "insert" and isinstance(node, list):
            node.insert(draw(st.integers(0, len(node))), copy.deepcopy(draw(st.sampled_from(items))))
        elif op == "wrap":
            parent[last] = draw(st.sampled_from([[node], {"type": "text", "text": node}, {"value": node}]))
    return row


OPTIONS = [
    ConvertOptions(),
    ConvertOptions(missing_reasoning="unmask", require_declared_tools=False),
    ConvertOptions(missing_reasoning="truncate", tool_call_content="reject"),
]


def _holds(raw, fmt: str, options: ConvertOptions, render) -> None:
    before = repr(raw)
    for format in ("auto", fmt):
        result = convert_row(raw, format=format, options=options, source="s", row=0)
        assert repr(raw) == before, f"{format} modified its input"
        if isinstance(result, Rejection):
            assert result.code in REASON_CODES and result.code != "converter_error", (format, result.message)
            assert "\n" not in result.message and len(result.message) < 2500, (format, result.code, result.message)
            continue
        row = {k: v for k, v in result.items() if k != "meta"}
        assert validate(row, options=options) is None, (format, validate(row, options=options))
        json.dumps(row, ensure_ascii=False).encode()  # no lone surrogate, nothing JSON cannot write
        render(row["messages"], tools=row.get("tools"), **row.get("chat_template_kwargs", {}))


@FUZZ
@given(raw=near_valid([RESPONSES], RESPONSES_ITEMS), which=st.integers(0, len(OPTIONS) - 1))
def test_near_valid_responses_rows_are_kept_whole_or_rejected_with_a_code(raw, which, render_beam):
    _holds(raw, "responses", OPTIONS[which], render_beam)


@FUZZ
@given(raw=near_valid([ANTHROPIC], ANTHROPIC_ITEMS), which=st.integers(0, len(OPTIONS) - 1))
def test_near_valid_anthropic_rows_are_kept_whole_or_rejected_with_a_code(raw, which, render_beam):
    _holds(raw, "anthropic", OPTIONS[which], render_beam)


@FUZZ
@given(raw=near_valid([BEDROCK], BEDROCK_ITEMS), which=st.integers(0, len(OPTIONS) - 1))
def test_near_valid_bedrock_rows_are_kept_whole_or_rejected_with_a_code(raw, which, render_beam):
    _holds(raw, "bedrock", OPTIONS[which], render_beam)


@FUZZ
@given(raw=near_valid(FLAT_ROWS, FLAT_ITEMS, FLAT_KEYS), which=st.integers(0, len(OPTIONS) - 1))
def test_near_valid_flat_rows_are_kept_whole_or_rejected_with_a_code(raw, which, render_beam):
    _holds(raw, "alpaca", OPTIONS[which], render_beam)


@FUZZ
@given(raw=near_valid(PAIR_ROWS, PAIR_ITEMS, PAIR_KEYS), which=st.integers(0, len(OPTIONS) - 1))
def test_near_valid_pair_rows_are_kept_whole_or_rejected_with_a_code(raw, which, render_beam):
    _holds(raw, "pairs", OPTIONS[which], render_beam)


# Chat-template transcripts (transcripts.py, through the Hermes reader): a valid ChatML or Llama 3 text cut
# into its markers and texts, then pieces inserted (markers of either template, EOS, tags, hostile strings),
# dropped, duplicated or swapped. A string is no JSON tree: near_valid above cannot reach inside it.
_QWEN_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TRANSCRIPTS = [
    ["<|im_start|>", "system\n", "You are helpful.", "<|im_end|>", "\n", "<|im_start|>", "user\n", "Weather in Paris?",
     "<|im_end|>", "\n", "<|im_start|>", "assistant\n", "<think>\nAsk.\n</think>\n\n", _QWEN_CALL, "<|im_end|>", "\n",
     "<|im_start|>", "user\n", "<tool_response>\n18 C\n</tool_response>", "<|im_end|>", "\n", "<|im_start|>",
     "assistant\n", "<think>Report.</think>", "It is 18 C.", "<|im_end|>", "\n"],
    ["<|begin_of_text|>", "<|start_header_id|>", "system", "<|end_header_id|>", "\n\n", "Be exact.", "<|eot_id|>",
     "<|start_header_id|>", "user", "<|end_header_id|>", "\n\n", "Weather in Paris?", "<|eot_id|>",
     "<|start_header_id|>", "assistant", "<|end_header_id|>", "\n\n",
     '{"name": "get_weather", "parameters": {"city": "Paris"}}', "<|eot_id|>", "<|start_header_id|>", "ipython",
     "<|end_header_id|>", "\n\n", "18 C", "<|eot_id|>", "<|start_header_id|>", "assistant", "<|end_header_id|>",
     "\n\n", "<think>Report.</think>", "It is 18 C.", "<|eot_id|>"],
]
TRANSCRIPT_PIECES = ["<|im_start|>", "<|im_end|>", "<|im_sep|>", "<|start_header_id|>", "<|end_header_id|>",
                     "<|eot_id|>", "<|eom_id|>", "<|python_tag|>", "<|begin_of_text|>", "<|end_of_text|>",
                     "<|endoftext|>", "<s>", "</s>", "<|image_pad|>", "<|fim_prefix|>", "<|start|>", "<|end|>",
                     "assistant\n", "user\n", "tool\n", "ipython", "function_call\n", "narrator\n", "\n", "\n\n", " ",
                     "<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
                     _QWEN_CALL, '{"name": "get_weather", "parameters": {"city": 1}}', '{"name": "f"}', "{", "NaN",
                     "\ud800", "x" * 3000, "名前 ü"]


@st.composite
def near_valid_transcript(draw):
    pieces = list(draw(st.sampled_from(TRANSCRIPTS)))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(pieces) - 1))
        op = draw(st.sampled_from(["insert", "insert", "drop", "duplicate", "swap", "replace"]))
        if op == "insert":
            pieces.insert(i, draw(st.sampled_from(TRANSCRIPT_PIECES) | st.text(max_size=8)))
        elif op == "drop" and len(pieces) > 1:
            del pieces[i]
        elif op == "duplicate":
            pieces.insert(draw(st.integers(0, len(pieces))), pieces[i])
        elif op == "swap":
            j = draw(st.integers(0, len(pieces) - 1))
            pieces[i], pieces[j] = pieces[j], pieces[i]
        else:
            pieces[i] = draw(st.sampled_from(TRANSCRIPT_PIECES))
    text = "".join(pieces)
    return draw(st.sampled_from([text, {"text": text}, {"text": text, "tools": [
        {"type": "function", "function": {"name": "get_weather", "parameters": PARAMS}}]}]))


@FUZZ
@given(raw=near_valid_transcript(), which=st.integers(0, len(OPTIONS) - 1))
def test_near_valid_chat_template_transcripts_are_kept_whole_or_rejected_with_a_code(raw, which, render_beam):
    _holds(raw, "hermes", OPTIONS[which], render_beam)


@FUZZ
@given(raw=near_valid([XLAM, XLAM_TEXT], XLAM_ITEMS, XLAM_KEYS), which=st.integers(0, len(OPTIONS) - 1))
def test_near_valid_xlam_rows_are_kept_whole_or_rejected_with_a_code(raw, which, render_beam):
    _holds(raw, "xlam", OPTIONS[which], render_beam)


@FUZZ
@given(raw=near_valid([LANGCHAIN, {"messages": LANGCHAIN_LC, "tools": LANGCHAIN["tools"]}, LANGCHAIN_LC],
                      LANGCHAIN_ITEMS, LANGCHAIN_KEYS), which=st.integers(0, len(OPTIONS) - 1))
def test_near_valid_langchain_rows_are_kept_whole_or_rejected_with_a_code(raw, which, render_beam):
    _holds(raw, "langchain", OPTIONS[which], render_beam)
