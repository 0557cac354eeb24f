"""The langchain reader on rows as langchain_core writes them (``messages_to_dict``'s type+data,
``dumpd``'s lc constructors), each converted exactly or refused with its code and place."""

from __future__ import annotations

import copy
import json

import pytest

from beam_sft.convert import ConvertOptions, Rejection, convert_row
from beam_sft.convert.detect import classify
from beam_sft.convert.langchain import convert_langchain
from beam_sft.convert.options import ColumnMap
from tests.convert.readers_util import codes, run_source, write_jsonl

PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
# convert_to_openai_tool's output: OpenAI's shape
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
                                           "parameters": PARAMS}}]
CALL = {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1", "type": "tool_call"}
OPENAI_CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}


def _data(kind: str, **fields) -> dict:
    """One message as messages_to_dict writes it (model_dump: every field, defaults included)."""
    base = {"content": "", "additional_kwargs": {}, "response_metadata": {}, "type": kind, "name": None, "id": None}
    if kind in ("human", "ai"):
        base["example"] = False
    if kind == "ai":
        base.update(tool_calls=[], invalid_tool_calls=[], usage_metadata=None)
    if kind == "tool":
        base.update(tool_call_id="", artifact=None, status="success")
    return {"type": kind, "data": {**base, **fields}}


# DeepSeek via langchain: reasoning in additional_kwargs, calls both as LangChain's and OpenAI's
DICT_ROW = {"messages": [
    _data("system", content="You are a weather bot."),
    _data("human", content="Weather in Paris?"),
    _data("ai", content="", id="run-1", additional_kwargs={"reasoning_content": "Ask the tool.", "tool_calls": [OPENAI_CALL]},
          response_metadata={"finish_reason": "tool_calls", "model_name": "deepseek-reasoner"}, tool_calls=[CALL],
          usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}),
    _data("tool", content="18 C", tool_call_id="call_1", name="get_weather"),
    _data("ai", content="It is 18 C in Paris.", additional_kwargs={"reasoning_content": "Report it."})],
    "tools": TOOLS}


def _lc(cls: str, path=("langchain", "schema", "messages"), **kwargs) -> dict:
    """One message as dumpd writes it: only the fields that were set."""
    return {"lc": 1, "type": "constructor", "id": [*path, cls], "kwargs": kwargs}


# Anthropic via langchain: thinking and tool_use content blocks, the calls mirrored in tool_calls
LC_ROW = {"messages": [
    _lc("HumanMessage", content="Weather in Paris?", type="human"),
    _lc("AIMessage", content=[
        {"type": "thinking", "thinking": "Ask the tool.", "signature": "EqQB"},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}],
        type="ai", id="run-2", tool_calls=[{**CALL, "id": "toolu_1"}], invalid_tool_calls=[],
        response_metadata={"stop_reason": "tool_use"}, usage_metadata={"input_tokens": 3}),
    _lc("ToolMessage", path=("langchain_core", "messages"), content="18 C", tool_call_id="toolu_1", type="tool"),
    _lc("AIMessage", content=[{"type": "thinking", "thinking": "Report it.", "signature": "Eq"},
                              {"type": "text", "text": "It is 18 C in Paris."}], type="ai")],
    "tools": TOOLS}

EXPECTED = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "reasoning_content": "Ask the tool.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "18 C"},
    {"role": "assistant", "reasoning_content": "Report it.", "content": "It is 18 C in Paris."}]


def _convert(raw, format="langchain", **options):
    return convert_row(raw, format=format, options=ConvertOptions(**options), source="s", row=0)


def test_a_messages_to_dict_row_converts_exactly():
    assert _convert(DICT_ROW) == {
        "messages": [{"role": "system", "content": "You are a weather bot."}, *EXPECTED],
        "tools": TOOLS, "meta": {"source": "s", "row": 0}}


def test_a_dumpd_row_of_anthropic_content_converts_exactly():
    tool = {k: v for k, v in EXPECTED[2].items() if k != "name"}
    call = {**EXPECTED[1]["tool_calls"][0], "id": "toolu_1"}
    assert _convert(LC_ROW) == {
        "messages": [EXPECTED[0], {**EXPECTED[1], "tool_calls": [call]}, {**tool, "tool_call_id": "toolu_1"}, EXPECTED[3]],
        "tools": TOOLS, "meta": {"source": "s", "row": 0}}


def test_a_bare_list_and_chunks_read_as_their_messages():
    chunks = [{**m, "type": {"human": "HumanMessageChunk", "ai": "AIMessageChunk", "tool": "ToolMessageChunk",
                             "system": "SystemMessageChunk"}[m["type"]],
               "data": {**m["data"], "type": None}} for m in DICT_ROW["messages"]]
    assert _convert(DICT_ROW["messages"], require_declared_tools=False)["messages"] == _convert(DICT_ROW)["messages"]
    assert _convert({**DICT_ROW, "messages": chunks})["messages"] == _convert(DICT_ROW)["messages"]
    lc_chunks = [_lc(m["id"][-1] + "Chunk", **m["kwargs"]) for m in LC_ROW["messages"]]
    assert _convert({**LC_ROW, "messages": lc_chunks}) == _convert(LC_ROW)


def test_the_type_table():
    row = {"messages": [
        _lc("SystemMessage", content="Be brief.", additional_kwargs={"__openai_role__": "developer"}),
        _data("chat", content="Hi.", role="user"),
        _data("human", content="Weather?", name="alice"),
        _data("chat", content="One moment.", role="assistant", additional_kwargs={"reasoning_content": "Think."}),
        _data("ai", content="", additional_kwargs={"reasoning_content": "Call.", "function_call": {
            "name": "get_weather", "arguments": '{"city": "Paris"}'}}),
        _data("function", content="18 C", name="get_weather"),
        _data("ai", content="18 C.", additional_kwargs={"reasoning_content": "Done."})], "tools": TOOLS}
    out = _convert(row)
    assert [m["role"] for m in out["messages"]] == ["developer", "user", "user", "assistant", "assistant", "tool",
                                                     "assistant"]
    assert out["messages"][5] == {"role": "tool", "tool_call_id": "call_0", "name": "get_weather", "content": "18 C"}
    assert out["meta"]["notes"] == {"name_dropped": 1}


def test_a_tool_error_status_is_counted_and_a_refusal_is_the_answer():
    messages = copy.deepcopy(DICT_ROW["messages"])
    messages[3]["data"]["status"] = "error"
    messages[4]["data"].update(content="", additional_kwargs={"refusal": "I can't say.", "reasoning_content": "No."})
    out = _convert({**DICT_ROW, "messages": messages})
    assert out["messages"][-1] == {"role": "assistant", "reasoning_content": "No.", "content": "I can't say."}
    assert out["meta"]["notes"] == {"status_dropped": 1}


def test_every_call_carrier_read_alone_gives_the_same_row():
    def ai(**fields):
        messages = copy.deepcopy(DICT_ROW["messages"])
        base = {"content": "", "additional_kwargs": {"reasoning_content": "Ask the tool."}, "tool_calls": []}
        messages[2] = _data("ai", **{**base, **fields})
        return {**DICT_ROW, "messages": messages}

    kwargs = {"reasoning_content": "Ask the tool."}
    chunk = {"name": "get_weather", "args": '{"city": "Paris"}', "id": "call_1", "index": 0, "type": "tool_call_chunk"}
    v1 = [{"type": "reasoning", "reasoning": "Ask the tool."}, {"type": "tool_call", **{k: CALL[k] for k in ("id", "name", "args")}}]
    rows = [
        ai(tool_calls=[CALL]),
        ai(additional_kwargs={**kwargs, "tool_calls": [OPENAI_CALL]}),
        ai(additional_kwargs={**kwargs, "tool_calls": json.dumps([OPENAI_CALL])}),
        ai(tool_calls=[CALL], tool_call_chunks=[chunk]),
        ai(additional_kwargs={}, content=v1, tool_calls=[CALL]),
        # a streamed Anthropic message added up: the tool_use block's input is the stream's empty start
        ai(content=[{"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {},
                     "partial_json": '{"city": "Paris"}', "index": 0}], tool_calls=[CALL], tool_call_chunks=[chunk]),
        # Gemini via langchain: function_call mirrors the last of the calls
        ai(tool_calls=[CALL], additional_kwargs={**kwargs, "function_call": {"name": "get_weather",
                                                                             "arguments": '{"city": "Paris"}'}}),
    ]
    assert all(_convert(r) == _convert(DICT_ROW) for r in rows), [_convert(r) for r in rows]


def RESPONSES_REASONING(text: str) -> dict:  # noqa: N802 (read as the constant it builds)
    """An OpenAI Responses reasoning object as langchain-openai keeps it (use_responses_api=True)."""
    return {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": text, "index": 0}]}


def test_langchain_openais_responses_reasoning_is_read_by_the_responses_rule():
    """langchain-openai with the Responses API keeps the reasoning as the API's object: under
    ``additional_kwargs.reasoning`` (0.3) or as a ``reasoning`` content block (output_version
    "responses/v1"). Both were ``malformed_row``; each is its summary (its own text where given),
    the same row as the text carrier, and an encrypted-only one is no reasoning."""
    def ai(**fields):
        return _replace(DICT_ROW, 2, _data("ai", **{"content": "", "tool_calls": [CALL], **fields}))

    block = {**RESPONSES_REASONING("Ask the tool."), "encrypted_content": "gAAA"}
    own_text = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Short."}],
                "content": [{"type": "reasoning_text", "text": "Ask the tool."}]}
    rows = [ai(additional_kwargs={"reasoning": RESPONSES_REASONING("Ask the tool.")}),
            ai(additional_kwargs={"reasoning": own_text}),
            ai(additional_kwargs={"reasoning_content": "Ask the tool.", "reasoning": RESPONSES_REASONING("Ask the tool.")}),
            ai(content=[block]),
            ai(content=[block], additional_kwargs={"reasoning": RESPONSES_REASONING("Ask the tool.")})]
    assert [_convert(r) for r in rows] == [_convert(DICT_ROW)] * len(rows)
    hidden = {"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}
    for row in (ai(additional_kwargs={"reasoning": hidden}), ai(content=[hidden])):
        missing = _convert(row)
        assert isinstance(missing, Rejection) and missing.code == "missing_reasoning", missing
        kept = _convert(row, missing_reasoning="unmask")["messages"][2]  # the turn as context, untrained
        assert kept == {**{k: v for k, v in EXPECTED[1].items() if k != "reasoning_content"}, "weight": 0}, kept


def test_an_openai_row_reads_a_responses_reasoning_part_and_field_alike():
    """Not LangChain only: an OpenAI-shaped message logged from the Responses API carries the same object."""
    base = {"role": "assistant", "content": "4."}
    rows = [{"messages": [{"role": "user", "content": "2+2?"}, {**base, "reasoning_content": "Add."}]},
            {"messages": [{"role": "user", "content": "2+2?"}, {**base, "reasoning": RESPONSES_REASONING("Add.")}]},
            {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": [
                RESPONSES_REASONING("Add."), {"type": "text", "text": "4."}]}]}]
    out = [_convert(r, format="openai") for r in rows]
    assert out == [out[0]] * 3 and out[0]["messages"][1] == {**base, "reasoning_content": "Add."}


def _replace(row: dict, i: int, message: dict) -> dict:
    messages = copy.deepcopy(row["messages"])
    messages[i] = message
    return {**row, "messages": messages}


def _ai(**fields) -> dict:
    return _replace(DICT_ROW, 2, _data("ai", **{"additional_kwargs": {"reasoning_content": "Ask the tool."},
                                                "tool_calls": [CALL], **fields}))


def _lc_ai(*content, **fields) -> dict:
    return _replace(LC_ROW, 1, _lc("AIMessage", content=list(content), **{"tool_calls": [{**CALL, "id": "toolu_1"}],
                                                                           **fields}))


THINKING = {"type": "thinking", "thinking": "Ask the tool."}
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}


@pytest.mark.parametrize("row, code, message", [
    (_ai(invalid_tool_calls=[{"name": "get_weather", "args": '{"city": ', "id": "call_1", "error": "bad JSON",
                              "type": "invalid_tool_call"}]),
     "malformed_tool_call", "messages[2].data.invalid_tool_calls[0]: the model wrote a call LangChain could not parse "
                            "('get_weather': 'bad JSON')"),
    (_ai(invalid_tool_calls={"name": "x"}), "malformed_row", "messages[2].data.invalid_tool_calls is {'name': 'x'}"),
    (_ai(additional_kwargs={"tool_calls": [{**OPENAI_CALL, "function": {"name": "get_weather", "arguments": "{}"}}]}),
     "conflicting_tool_calls",
     "messages[2].data.tool_calls and messages[2].data.additional_kwargs.tool_calls hold different calls"),
    (_ai(additional_kwargs={"tool_calls": [{**OPENAI_CALL, "id": "call_9"}]}), "conflicting_tool_calls",
     "hold different calls"),
    (_ai(additional_kwargs={"tool_calls": [OPENAI_CALL, OPENAI_CALL]}), "conflicting_tool_calls", "hold different calls"),
    (_ai(tool_call_chunks=[{"name": "get_weather", "args": '{"city": "Rome"}', "index": 0}]), "conflicting_tool_calls",
     "messages[2].data.tool_calls and messages[2].data.tool_call_chunks hold different calls"),
    (_ai(tool_call_chunks=[{"name": "get_weather", "args": '{"city": ', "index": 0}]), "invalid_json",
     "messages[2].data.tool_call_chunks[0].arguments"),
    (_ai(additional_kwargs={"function_call": {"name": "other", "arguments": "{}"}}), "conflicting_tool_calls",
     "messages[2].data.additional_kwargs.function_call is none of the calls of messages[2].data.tool_calls"),
    (_ai(tool_calls=[{**CALL, "args": ["Paris"]}]), "arguments_not_object",
     "messages[2].data.tool_calls[0].arguments is a list"),
    (_ai(tool_calls=[{**CALL, "type": "server_tool_call"}]), "malformed_tool_call",
     "messages[2].data.tool_calls[0] has type 'server_tool_call'"),
    (_ai(tool_calls=[{**CALL, "name": None}]), "malformed_tool_call", "messages[2].data.tool_calls[0] has no function name"),
    (_ai(tool_calls="get_weather"), "malformed_row", "messages[2].data.tool_calls is 'get_weather', not a list"),
    ({**DICT_ROW, "tools": []}, "undeclared_tool", "messages[2].data calls 'get_weather', which the row does not declare"),
    (_ai(additional_kwargs={"reasoning_content": "Ask the tool.", "reasoning": "Something else."}),
     "conflicting_reasoning", "messages[2].data: reasoning_content and reasoning carry different reasoning"),
    (_ai(additional_kwargs={"reasoning": {"effort": "high"}}), "malformed_row",
     "messages[2].data.additional_kwargs.reasoning is a dict, not a string or an OpenAI Responses reasoning object"),
    (_ai(additional_kwargs={"reasoning": {"type": "reasoning", "summary": "Ask."}}), "malformed_row",
     "messages[2].data.additional_kwargs.reasoning.summary is not a list of summary_text parts"),
    (_ai(additional_kwargs={"reasoning_content": "Ask the tool.", "reasoning": RESPONSES_REASONING("Other.")}),
     "conflicting_reasoning", "reasoning_content and reasoning carry different reasoning"),
    (_ai(additional_kwargs={}, content=[{"type": "reasoning", "id": "rs_1"}]), "malformed_row",
     "messages[2].data.content[0] has no text"),
    (_ai(additional_kwargs={"reasoning_details": [{"type": "reasoning.x"}]}), "malformed_row",
     "messages[2].data.additional_kwargs.reasoning_details[0] is not a reasoning.text"),
    (_ai(additional_kwargs={"refusal": 3}), "malformed_row", "messages[2].data.additional_kwargs.refusal is a int"),
    (_ai(additional_kwargs={"audio": {"id": "audio_1", "data": "UklGR"}}), "non_text_content",
     "messages[2].data.additional_kwargs.audio"),
    (_ai(additional_kwargs=[]), "malformed_row", "messages[2].data.additional_kwargs is [], not an object"),
    (_ai(content=[{"type": "image_url", "image_url": {"url": "x"}}]), "non_text_content",
     "messages[2].data.content[0] is a 'image_url' part"),
    (_ai(content=[{"type": "invalid_tool_call", "name": "get_weather", "args": "{", "error": "bad"}]),
     "malformed_tool_call", "messages[2].data.content[0]: the model wrote a call LangChain could not parse"),
    (_lc_ai(THINKING, {**TOOL_USE, "partial_json": '{"city": "Rome"}'}), "malformed_tool_call",
     "messages[1].kwargs.content[1] writes its arguments twice, differently (input and partial_json)"),
    (_lc_ai(THINKING, {**TOOL_USE, "input": {}, "partial_json": '{"city": '}), "invalid_json",
     "messages[1].kwargs.content[1].arguments"),
    (_lc_ai(THINKING, {**TOOL_USE, "input": {"city": "Rome"}}), "conflicting_tool_calls",
     "messages[1].kwargs.content and messages[1].kwargs.tool_calls hold different calls"),
    (_lc_ai({**THINKING, "thinking": "Other."}, TOOL_USE, additional_kwargs={"reasoning_content": "Ask the tool."}),
     "conflicting_reasoning", "messages[1].kwargs: reasoning_content and reasoning part carry different reasoning"),
    (_lc_ai(THINKING, {"type": "redacted_thinking", "data": "x"}, TOOL_USE), "non_text_content",
     "messages[1].kwargs.content[1] is redacted (encrypted) reasoning beside readable reasoning"),
    (_lc_ai(THINKING, {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}), "malformed_row",
     "messages[1].kwargs.content[1] is a tool_result block in a message of role 'assistant'"),
    (_lc_ai(THINKING, {"type": "server_tool_use", "id": "s", "name": "web_search"}, TOOL_USE), "non_text_content",
     "messages[1].kwargs.content[1] is a 'server_tool_use' part"),
    (_replace(LC_ROW, 1, {"lc": 1, "type": "not_implemented", "id": ["openai", "OpenAI"], "repr": "<client>"}),
     "malformed_row", "messages[1] is an lc 'not_implemented' object (['openai', 'OpenAI']), not a message"),
    (_replace(LC_ROW, 1, {"lc": 1, "type": "secret", "id": ["OPENAI_API_KEY"]}), "malformed_row",
     "messages[1] is an lc 'secret' object"),
    (_replace(LC_ROW, 1, {**LC_ROW["messages"][1], "lc": 2}), "malformed_row", "messages[1].lc is 2, not 1"),
    (_replace(LC_ROW, 1, {**LC_ROW["messages"][1], "id": ["langchain", "schema", "messages", "RemoveMessage"]}),
     "unknown_role", "messages[1].id names 'langchain.schema.messages.RemoveMessage', not a LangChain message class"),
    (_replace(LC_ROW, 1, {**LC_ROW["messages"][1], "id": "AIMessage"}), "malformed_row",
     "messages[1].id is 'AIMessage', not a class path"),
    (_replace(LC_ROW, 1, {**LC_ROW["messages"][1], "kwargs": None}), "malformed_row", "messages[1].kwargs is None"),
    (_replace(LC_ROW, 0, _lc("HumanMessage", content="q", type="ai")), "malformed_row",
     "messages[0].kwargs.type is 'ai', but the message is a 'human' message"),
    (_replace(DICT_ROW, 1, {"type": "remove", "data": {"id": "m1"}}), "unknown_role", "messages[1].type is 'remove'"),
    (_replace(DICT_ROW, 1, {"type": "human", "data": "Weather?"}), "malformed_row", "messages[1].data is 'Weather?'"),
    (_replace(DICT_ROW, 1, {"role": "user", "content": "Weather?"}), "malformed_row",
     "messages[1] is not a LangChain message (neither type and data nor lc and kwargs; keys: 'role', 'content')"),
    (_replace(DICT_ROW, 1, "Weather?"), "malformed_row", "messages[1] is not an object"),
    (_replace(DICT_ROW, 1, _data("chat", content="Hi.", role="narrator")), "unknown_role",
     "messages[1].data.role has role 'narrator'"),
    (_replace(DICT_ROW, 1, _data("chat", content="Hi.", role="function_call")), "unknown_role",
     "messages[1].data.role is 'function_call', not a speaker"),
    (_replace(DICT_ROW, 1, _data("human", content=None)), "missing_content",
     "messages[1].data (user) has no content (keys: 'content', 'additional_kwargs', 'response_metadata', 'type'"),
    (_replace(LC_ROW, 0, _lc("HumanMessage", type="human")), "missing_content",
     "messages[0].kwargs (user) has no content (keys: 'type')"),
    (_replace(DICT_ROW, 1, _data("human", content=[{"type": "text", "text": "Weather?"},
                                                   {"type": "image_url", "image_url": {"url": "x"}}])),
     "non_text_content", "messages[1].data.content[1] is a 'image_url' part"),
    (_replace(DICT_ROW, 1, _data("human", content="q", additional_kwargs={"tool_calls": [OPENAI_CALL]})),
     "malformed_tool_call", "messages[1].data.additional_kwargs.tool_calls on a user message"),
    (_replace(DICT_ROW, 1, _data("human", content="q", tool_calls=[CALL])), "malformed_tool_call",
     "messages[1].data.tool_calls on a user message"),
    (_replace(DICT_ROW, 1, _data("human", content="q", additional_kwargs={"reasoning_content": "r"})), "malformed_row",
     "messages[1].data.additional_kwargs.reasoning_content on a user message"),
    (_replace(DICT_ROW, 1, _data("human", content="q", additional_kwargs={"__openai_role__": "developer"})),
     "malformed_row", "messages[1].data.additional_kwargs.__openai_role__ is 'developer' on a 'human' message"),
    (_replace(DICT_ROW, 3, _data("tool", content="18 C", tool_call_id="call_1", status="pending")), "malformed_row",
     "messages[3].data.status is 'pending', not 'success' or 'error'"),
    (_replace(DICT_ROW, 3, _data("tool", content="18 C", tool_call_id="call_9")), "tool_result_unmatched", ""),
    ({**DICT_ROW, "tools": [{"type": "code_interpreter"}]}, "bad_tool_definition", "tools[0]"),
    ({**DICT_ROW, "images": ["a.png"]}, "non_text_content", "images"),
    ({**DICT_ROW, "conversations": [{"from": "human", "value": "q"}]}, "conflicting_carriers", "messages and conversations"),
])
def test_near_misses_are_refused_with_their_code_and_place(row, code, message):
    assert classify(row, ColumnMap()) == "langchain"
    for format in ("langchain", "auto"):
        result = _convert(row, format=format)
        assert isinstance(result, Rejection), result
        assert (result.code, "\n" in result.message) == (code, False), result.message
        assert message in result.message, result.message


def test_a_mixed_file_is_detected_row_by_row(tmp_path):
    openai = {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "<think>Add.</think>4"}]}
    sharegpt = {"conversations": [{"from": "human", "value": "2+2?"}, {"from": "gpt", "value": "<think>Add.</think>4"}]}
    bare = DICT_ROW["messages"][1:]  # a file of LangGraph state dumps: the message list alone
    rows = [DICT_ROW, LC_ROW, openai, bare, sharegpt, _ai(invalid_tool_calls=[{"name": "f", "error": "e"}])]
    results, conversion = run_source(write_jsonl(tmp_path / "mixed.jsonl", rows), fill=None,
                                     require_declared_tools=False)
    assert codes(results) == ["kept", "kept", "kept", "kept", "kept", "malformed_tool_call"]
    assert dict(conversion.summary.formats) == {"langchain": 4, "openai": 1, "sharegpt": 1}
    assert conversion.format == "langchain"


@pytest.mark.parametrize("raw, expected", [
    (DICT_ROW, "langchain"),
    (LC_ROW["messages"], "langchain"),
    ({**LC_ROW, "tools": [{"name": "get_weather", "input_schema": PARAMS}]}, "langchain"),  # not anthropic's
    ({"messages": [{"role": "user", "content": "q", "type": "message"}]}, "openai"),
    ([{"role": "user", "content": "q"}], "openai"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": "q", "data": {}}]}]}, "openai"),
    ({"input": [{"type": "message", "role": "user", "content": "q"}], "output": []}, "responses"),
    ({"contents": [{"role": "user", "parts": [{"text": "q"}]}]}, "gemini"),
])
def test_classify_claims_langchain_lists_only(raw, expected):
    assert classify(raw, ColumnMap()) == expected


def test_under_another_format_the_message_says_whose_shape_it_is():
    found = _convert(DICT_ROW, format="openai")
    assert found.code == "malformed_row"
    assert found.message.endswith("(the row's shape is format langchain's: try format auto or langchain)")


def test_the_reader_never_raises_on_odd_rows():
    for raw in (None, 3, "text", [], {}, {"messages": "x"}, [None], [{"lc": None}], [{"type": 1, "data": {}}],
                {"messages": [{"lc": 1, "type": "constructor", "id": [1], "kwargs": {}}]},
                {"messages": [{"type": "ai", "data": {"tool_calls": [None], "content": [None]}}]}):
        result = convert_langchain(raw, options=ConvertOptions())
        assert isinstance(result, Rejection), raw


@pytest.mark.parametrize("messages", [DICT_ROW["messages"], LC_ROW["messages"]], ids=["messages_to_dict", "dumpd"])
def test_a_json_file_that_is_one_dumped_conversation_is_one_row(tmp_path, messages):
    """``json.dump(messages_to_dict(messages), f)``, the usual way one conversation is saved, was read as one
    row per message, each rejected (no 'messages' list)."""
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps(messages, indent=2))
    results, conversion = run_source(path, fill=None, require_declared_tools=False)  # (no tools column in a bare list)
    assert codes(results) == ["kept"] and conversion.format == "langchain"
    assert results[0]["messages"] == _convert(messages, require_declared_tools=False)["messages"]


def test_an_array_of_other_rows_shaped_type_and_data_stays_rows(tmp_path):
    rows = [{"type": "qa", "data": {"instruction": "2+2?", "output": "4"}},
            {"type": "qa", "data": {"instruction": "3+3?", "output": "6"}}]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    results, conversion = run_source(path, fill=None)
    assert conversion.summary.read == 2


def test_rows_shaped_type_and_data_with_content_stay_rows_unless_langchain_types(tmp_path):
    """The file-level check (data/sources.py) knows LangChain's own type names, the reader's table: an
    array of a set's rows `{"type": "qa", "data": {"content": ...}}` was merged into one record."""
    from beam_sft.convert.langchain import TYPES
    from beam_sft.data.sources import LANGCHAIN_TYPES

    assert LANGCHAIN_TYPES == set(TYPES)
    rows = [{"type": "qa", "data": {"content": "2+2?"}}, {"type": "qa", "data": {"content": "3+3?"}}]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    _, conversion = run_source(path, fill=None)
    assert conversion.summary.read == 2
