"""Chat-template transcripts in a text column (convert/transcripts.py, read by the Hermes reader):
ChatML (Qwen, OpenHermes, axolotl/unsloth exports; Phi-4's <|im_sep|>) and Llama 3."""

from __future__ import annotations

import json

import pytest

from beam_sft.convert import ConvertOptions, Rejection
from beam_sft.convert.pipeline import convert_row
from beam_sft.convert.transcripts import read_template_transcript
from tests.convert.readers_util import codes, run_source, write_jsonl

OPTIONS = ConvertOptions()
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}
# Qwen2.5's template with tools: its default identity, then the tools block and its instructions.
QWEN_SYSTEM = (
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\nYou may call one or more "
    "functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> "
    "XML tags:\n<tools>\n" + json.dumps(WEATHER) + "\n</tools>\n\nFor each function call, return a json object "
    "with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>"
)


def convert(raw, *, fmt: str = "auto", options: ConvertOptions = OPTIONS):
    result = convert_row(raw, format=fmt, options=options, source="s", row=0)
    if not isinstance(result, Rejection):
        result = {k: v for k, v in result.items() if k != "meta"} | (
            {"notes": result["meta"]["notes"]} if "notes" in result["meta"] else {})
    return result


def chatml(*turns: tuple[str, str]) -> str:
    """What a ChatML template writes: ``<|im_start|>ROLE\\nTEXT<|im_end|>\\n`` per turn."""
    return "".join(f"<|im_start|>{role}\n{text}<|im_end|>\n" for role, text in turns)


def llama3(*turns: tuple[str, str], end: str = "<|eot_id|>") -> str:
    """What Llama 3's template writes: BOS, then ``<|start_header_id|>ROLE<|end_header_id|>\\n\\nTEXT<|eot_id|>``."""
    return "<|begin_of_text|>" + "".join(
        f"<|start_header_id|>{role}<|end_header_id|>\n\n{text}{end}" for role, text in turns)


def test_a_chatml_text_row_with_system_turns_and_think_tags():
    text = chatml(("system", "Be brief."), ("user", "Hi"), ("assistant", "<think>\nGreet.\n</think>\n\nHello!"),
                  ("user", "2+2?"), ("assistant", "<think>Add.</think>4"))
    assert convert({"text": text}) == {"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "reasoning_content": "Greet.", "content": "Hello!"},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "reasoning_content": "Add.", "content": "4"}]}
    # a row that is the string, and a row whose only value is it, read alike; --format hermes alike
    assert convert(text) == convert({"sample": text}) == convert({"text": text}, fmt="hermes") == convert({"text": text})


def test_the_qwen_tool_round_trip_calls_parallel_results_and_the_tools_block():
    # Qwen2.5's layout: calls after the text, each "\n<tool_call>\n{...}\n</tool_call>"; the results of
    # consecutive tool messages in ONE user turn, each "\n<tool_response>\n...\n</tool_response>".
    text = (
        f"<|im_start|>system\n{QWEN_SYSTEM}<|im_end|>\n"
        "<|im_start|>user\nWeather in Paris and Rome?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nAsk for both.\n</think>\n\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\n18 C\n</tool_response>\n<tool_response>\n22 C\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>Both known.</think>\n\nParis 18 C, Rome 22 C.<|im_end|>\n"
    )
    calls = [{"id": f"call_{i}", "type": "function", "function": {"name": "get_weather", "arguments": {"city": c}}}
             for i, c in enumerate(("Paris", "Rome"))]
    assert convert({"text": text}) == {
        "messages": [
            {"role": "system", "content": "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."},
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {"role": "assistant", "reasoning_content": "Ask for both.", "tool_calls": calls},
            {"role": "tool", "tool_call_id": "call_0", "name": "get_weather", "content": "18 C"},
            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "22 C"},
            {"role": "assistant", "reasoning_content": "Both known.", "content": "Paris 18 C, Rome 22 C."}],
        "tools": [WEATHER]}


def test_a_chatml_tool_turn_and_a_tools_column_beside_the_text():
    text = chatml(("user", "Paris?"),
                  ("assistant", '<think>Ask.</think>\n<tool_call>\n{"name": "get_weather", "arguments": '
                                '{"city": "Paris"}}\n</tool_call>'),
                  ("tool", "18 C"), ("assistant", "<think>Say it.</think>18 C."))
    row = convert({"text": text, "tools": [WEATHER], "id": "r1"})
    assert row["tools"] == [WEATHER]
    assert row["messages"][2:] == [
        {"role": "tool", "tool_call_id": "call_0", "name": "get_weather", "content": "18 C"},
        {"role": "assistant", "reasoning_content": "Say it.", "content": "18 C."}]
    # without the column the call names an undeclared tool: refused, never kept with the tools dropped
    assert convert({"text": text}).code == "undeclared_tool"


def test_a_llama3_transcript_with_a_json_call_and_an_ipython_result():
    text = llama3(("system", "Be exact."), ("user", "Weather in Paris?"),
                  ("assistant", '{"name": "get_weather", "parameters": {"city": "Paris"}}'),
                  ("ipython", '{"temp_c": 18}'), ("assistant", "<think>Report it.</think>It is 18 C."))
    row = convert({"text": text, "tools": json.dumps([WEATHER])}, options=ConvertOptions(missing_reasoning="unmask"))
    assert row == {
        "messages": [
            {"role": "system", "content": "Be exact."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "weight": 0, "tool_calls": [
                {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
            {"role": "tool", "tool_call_id": "call_0", "name": "get_weather", "content": '{"temp_c": 18}'},
            {"role": "assistant", "reasoning_content": "Report it.", "content": "It is 18 C."}],
        "tools": [WEATHER]}
    # <|python_tag|> before the JSON and <|eom_id|> after it (Llama 3.1 with built-in tools) read alike
    tagged = text.replace('\n\n{"name"', '\n\n<|python_tag|>{"name"').replace("}}<|eot_id|>", "}}<|eom_id|>")
    assert tagged != text
    assert convert({"text": tagged, "tools": [WEATHER]}, options=ConvertOptions(missing_reasoning="unmask")) == row


# Llama 3.1's template (transformers' tokenizer_config.json of Llama 3.1/3.2 Instruct) with tools: its
# system header lines, then the tool block in the first user turn (tools_in_user_message, the default) or
# in the system turn; each tool is `tojson(indent=4)` and a blank line.
LLAMA_HEADER = "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
LLAMA_FORMAT = 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.'
LLAMA_USER_BLOCK = ("Given the following functions, please respond with a JSON for a function call with its proper "
                    "arguments that best answers the given prompt.\n\n" + LLAMA_FORMAT + "Do not use variables.\n\n")
LLAMA_SYSTEM_BLOCK = ("You have access to the following functions. To call a function, please respond with JSON for "
                      "a function call." + LLAMA_FORMAT + "Do not use variables.\n\n")
ADD = {"type": "function", "function": {"name": "add", "description": "Add two integers.", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}


def _tool_block(head: str, *tools: dict) -> str:
    return head + "".join(json.dumps(t, indent=4) + "\n\n" for t in tools)


def _llama31(system_text: str, user_text: str) -> str:
    return llama3(("system", system_text), ("user", user_text),
                  ("assistant", '{"name": "get_weather", "parameters": {"city": "Paris"}}'),
                  ("ipython", '{"temp_c": 18}'), ("assistant", "<think>Report it.</think>It is 18 C."))


def test_llama31s_own_tool_block_is_the_rows_tools_in_the_user_or_the_system_turn():
    """The tools a Llama 3.1 transcript declares were left in the prompt's text (and every call was then
    undeclared_tool): the template's block is now taken out and read as the row's tools."""
    unmask = ConvertOptions(missing_reasoning="unmask")
    in_user = convert(_llama31(LLAMA_HEADER + "Be exact.", _tool_block(LLAMA_USER_BLOCK, WEATHER, ADD) + "Weather in Paris?"),
                      options=unmask)
    assert in_user["tools"] == [WEATHER, ADD]
    assert in_user["messages"][:2] == [{"role": "system", "content": LLAMA_HEADER + "Be exact."},
                                       {"role": "user", "content": "Weather in Paris?"}]
    in_system = convert(_llama31(LLAMA_HEADER + _tool_block(LLAMA_SYSTEM_BLOCK, WEATHER, ADD) + "Be exact.",
                                 "Weather in Paris?"), options=unmask)
    assert in_system == in_user
    # beside a tools column: one tool declared twice alike is one; with other parameters, refused
    assert convert({"text": _llama31("Be exact.", _tool_block(LLAMA_USER_BLOCK, WEATHER) + "Weather in Paris?"),
                    "tools": [ADD, WEATHER]}, options=unmask)["tools"] == [ADD, WEATHER]
    other = {"type": "function", "function": {**WEATHER["function"], "parameters": {"type": "object", "properties": {}}}}
    clash = convert({"text": _llama31("Be exact.", _tool_block(LLAMA_USER_BLOCK, WEATHER) + "Weather in Paris?"),
                     "tools": [other]}, options=unmask)
    assert isinstance(clash, Rejection) and clash.code == "bad_tool_definition"
    # Meta's own prompt format writes ". Do not use variables." (a space), and its tools as bare functions
    meta = LLAMA_USER_BLOCK.replace(".Do not", ". Do not")
    bare = convert(_llama31("Be exact.", _tool_block(meta, WEATHER["function"]) + "Weather in Paris?"), options=unmask)
    assert bare["tools"] == [WEATHER] and bare["messages"][1] == {"role": "user", "content": "Weather in Paris?"}
    # without the block every call is to an undeclared tool, as before
    plain = convert(_llama31("Be exact.", "Weather in Paris?"), options=unmask)
    assert isinstance(plain, Rejection) and plain.code == "undeclared_tool"


def test_llama31s_block_is_read_in_every_reader_as_in_a_transcript():
    """Rows whose messages were written by that template's prompt (an OpenAI or a ShareGPT row) hold the
    same block: one rule in assemble.finish_row, beside the <tools> block, reads it in every reader."""
    unmask = ConvertOptions(missing_reasoning="unmask")
    user = _tool_block(LLAMA_USER_BLOCK, WEATHER, ADD) + "Weather in Paris?"
    want = convert(_llama31("Be exact.", user), options=unmask)
    call = {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    openai = {"messages": [{"role": "system", "content": "Be exact."}, {"role": "user", "content": user},
                           {"role": "assistant", "tool_calls": [call]},
                           {"role": "tool", "tool_call_id": "call_0", "content": '{"temp_c": 18}'},
                           {"role": "assistant", "content": "<think>Report it.</think>It is 18 C."}]}
    sharegpt = {"conversations": [{"from": "system", "value": "Be exact."}, {"from": "human", "value": user},
                                  {"from": "function_call", "value": '{"name": "get_weather", "arguments": {"city": "Paris"}}'},
                                  {"from": "observation", "value": '{"temp_c": 18}'},
                                  {"from": "gpt", "value": "<think>Report it.</think>It is 18 C."}]}
    for row, fmt in ((openai, "openai"), (sharegpt, "sharegpt")):
        got = convert(row, fmt=fmt, options=unmask)
        assert got["tools"] == want["tools"] == [WEATHER, ADD] and got["messages"][:2] == want["messages"][:2], got
    # system_tools off: the block stays the user's text, as the <tools> block stays the system's
    kept = convert(_llama31("Be exact.", user), options=ConvertOptions(missing_reasoning="unmask", system_tools=False,
                                                                        require_declared_tools=False))
    assert "tools" not in kept and kept["messages"][1]["content"] == user


def test_llama31s_block_ends_at_the_users_own_text():
    unmask = ConvertOptions(missing_reasoning="unmask")
    # a user message that starts with JSON which is no tool stays the user's text, whole
    question = '{"city": "Paris"}\n\nWhat does this ask?'
    row = convert(_llama31("Be exact.", _tool_block(LLAMA_USER_BLOCK, WEATHER) + question), options=unmask)
    assert row["tools"] == [WEATHER] and row["messages"][1]["content"] == question
    # the sentences only where the template writes them: in a later user turn they are the user's text
    text = llama3(("user", "Hi"), ("assistant", "<think>a</think>Hello."),
                  ("user", _tool_block(LLAMA_USER_BLOCK, WEATHER) + "Weather?"), ("assistant", "<think>b</think>Sunny."))
    row = convert(text)
    assert "tools" not in row and row["messages"][2]["content"].startswith("Given the following functions")
    # a block whose tool is no valid definition is refused, naming the turn
    broken = {"type": "function", "function": {"name": "get_weather", "parameters": "city"}}
    bad = convert(_llama31("Be exact.", _tool_block(LLAMA_USER_BLOCK, broken) + "Weather in Paris?"), options=unmask)
    assert isinstance(bad, Rejection) and bad.code == "bad_tool_definition", bad
    assert "transcript turn 1" in bad.message and "Llama 3.1's function block" in bad.message
    # the one JSON rule holds in the block: a key twice, a NaN, refused by their codes
    for tool_text, code in (('{"type": "function", "type": "function", "function": {"name": "f"}}', "duplicate_key"),
                            ('{"type": "function", "function": {"name": "f", "x": NaN}}', "non_standard_number")):
        got = convert(_llama31("Be exact.", LLAMA_USER_BLOCK + tool_text + "\n\nWeather in Paris?"), options=unmask)
        assert isinstance(got, Rejection) and got.code == code and "transcript turn 1" in got.message, got
    # hostile: a user text of deep braces after the block is the user's, read without a crash
    deep = "{" * 100_000
    row = convert(_llama31("Be exact.", _tool_block(LLAMA_USER_BLOCK, WEATHER) + deep), options=unmask)
    assert row["messages"][1]["content"] == deep


def test_layout_is_taken_off_and_text_kept_byte_for_byte():
    # ChatML: the newline after the role; whitespace between turns, a BOS and an EOS around them
    text = ("<s>\n<|im_start|>user\n  two  spaces \n<|im_end|>\n\n\n<|im_start|>assistant\n<think>a</think>\n"
            "line one\n\nline two\n<|im_end|>\n<|endoftext|>\n")
    drafts = read_template_transcript(text)
    assert [d["content"] for d in drafts] == ["  two  spaces \n", "<think>a</think>\nline one\n\nline two\n"]
    # the reasoning split then trims the answer around the tags, as in any row
    assert convert(text)["messages"] == [{"role": "user", "content": "  two  spaces \n"},
                                         {"role": "assistant", "reasoning_content": "a", "content": "line one\n\nline two"}]
    # Phi-4's <|im_sep|> ends the role, with no newline after it
    phi = "<|im_start|>user<|im_sep|>Hi<|im_end|><|im_start|>assistant<|im_sep|><think>a</think>b<|im_end|>"
    assert convert(phi)["messages"] == [{"role": "user", "content": "Hi"},
                                        {"role": "assistant", "reasoning_content": "a", "content": "b"}]
    # Llama 3: its \n\n after <|end_header_id|>, nothing more; Hermes 2 Pro writes ChatML after <|begin_of_text|>
    text = llama3(("user", "\nHi"), ("assistant", "<think>a</think>b")) + "<|end_of_text|>"
    assert convert(text)["messages"][0] == {"role": "user", "content": "\nHi"}
    assert convert("<|begin_of_text|>" + chatml(("user", "Hi"), ("assistant", "<think>a</think>b")))["messages"][0] == {
        "role": "user", "content": "Hi"}


def test_an_empty_trailing_generation_prompt_is_taken_off_and_counted():
    text = chatml(("user", "Hi"), ("assistant", "<think>a</think>b")) + "<|im_start|>assistant\n"
    assert convert(text) == {"messages": [{"role": "user", "content": "Hi"},
                                          {"role": "assistant", "reasoning_content": "a", "content": "b"}],
                             "notes": {"generation_prompt_dropped": 1}}
    prompt = llama3(("user", "Hi"), ("assistant", "<think>a</think>b")) + "<|start_header_id|>assistant<|end_header_id|>\n\n"
    assert convert(prompt)["notes"] == {"generation_prompt_dropped": 1}
    # a prompt with nothing after it is no conversation: no assistant turn is left to train
    assert convert(chatml(("user", "Hi")) + "<|im_start|>assistant\n").code == "no_trained_turn"


# Each near-miss: (text, code, what the message names).
NEAR_MISSES = [
    # the answer cut off: an open turn that holds text is no generation prompt
    (chatml(("user", "Hi")) + "<|im_start|>assistant\n<think>a</think>Hel", "malformed_row",
     "transcript turn 1 ('assistant') has no <|im_end|>: the transcript ends inside it"),
    (chatml(("user", "Hi")) + "<|im_start|>assistant\n<think>\n\n</think>\n\n", "malformed_row", "transcript turn 1"),
    ("<|im_start|>user\nHi\n" + chatml(("assistant", "<think>a</think>b")), "malformed_row",
     "transcript turn 0 ('user') has no <|im_end|> before the next <|im_start|>"),
    ("Conversation:\n" + chatml(("user", "Hi"), ("assistant", "b")), "malformed_row",
     "transcript character 0: text outside any turn 'Conversation:'"),
    (chatml(("user", "Hi")) + "note\n" + chatml(("assistant", "b")), "malformed_row",
     "transcript character 30: text outside any turn 'note'"),
    (chatml(("user", "Hi")) + "<|im_end|>\n" + chatml(("assistant", "b")), "malformed_row",
     "text outside any turn '<|im_end|>'"),
    (chatml(("user", "Hi"), ("assistant", "b")) + "<|endoftext|><|endoftext|>", "malformed_row",
     "text outside any turn '<|endoftext|><|endoftext|>'"),
    (chatml(("narrator", "Hi"), ("assistant", "b")), "unknown_role", "transcript turn 0 has role 'narrator'"),
    (chatml(("user ", "Hi"), ("assistant", "b")), "unknown_role", "transcript turn 0 has role 'user '"),
    ("<|im_start|>user Hi<|im_end|>" + chatml(("assistant", "b")), "unknown_role", "role 'user Hi'"),
    (chatml(("user", "Hi<|endoftext|>more"), ("assistant", "b")), "separator_in_text",
     "transcript turn 0 holds <|endoftext|> at character 2 of its text"),
    (chatml(("user", "<|vision_start|><|image_pad|><|vision_end|>What is this?"), ("assistant", "b")),
     "non_text_content", "transcript turn 0 holds <|vision_start|>"),
    (chatml(("user", "Hi<|eot_id|>"), ("assistant", "b")), "malformed_row",
     "a Llama 3 marker in a ChatML transcript"),
    (chatml(("user", "Hi")) + llama3(("assistant", "b"))[len("<|begin_of_text|>"):], "malformed_row",
     "holds a Llama 3 marker in a ChatML transcript"),
    (llama3(("user", "Hi<|im_end|>"), ("assistant", "b")), "malformed_row", "a ChatML marker in a Llama 3 transcript"),
    (chatml(("user", "Say <|fim_prefix|>"), ("assistant", "b")), "malformed_row",
     "transcript turn 0 holds <|fim_prefix|> at character 4 of its text: a control token"),
    (llama3(("user", "Hi"), ("assistant", "<think>a</think>b"))[:-len("<|eot_id|>")], "malformed_row",
     "transcript turn 1 ('assistant') has no <|eot_id|> or <|eom_id|>"),
    ("<|start_header_id|>user\n\nHi<|eot_id|>", "malformed_row", "transcript turn 0: no <|end_header_id|> after its role"),
    (llama3(("user", "Hi"), ("assistant", "<|python_tag|>brave_search.call(query=\"x\")")), "non_text_content",
     "transcript turn 1: a built-in tool call after <|python_tag|>"),
    (llama3(("user", "Hi"), ("assistant", '<|python_tag|>{"query": "x"}')), "malformed_tool_call", "transcript turn 1"),
    (llama3(("user", "Hi"), ("assistant", 'a<|python_tag|>{"name": "f", "parameters": {}}')), "malformed_row",
     "transcript turn 1 holds <|python_tag|> at character 1"),
    (llama3(("user", "Hi<|python_tag|>"), ("assistant", "b")), "malformed_row", "transcript turn 0 holds <|python_tag|>"),
    (llama3(("user", "Hi"), ("assistant", '{"name": "f", "parameters": {"x": NaN}}')), "non_standard_number",
     "transcript turn 1"),
    (chatml(("user", "Hi"), ("assistant", "<think>a</think><|start|>b")), "harmony_marker_in_text", "<|start|>"),
    (chatml(("user", "Hi"), ("assistant", "<think>a</think>b<tool_call>{}")), "malformed_tool_call",
     "transcript turn 1 has an unclosed <tool_call>"),
    (chatml(("user", "Hi"), ("assistant", "<think>a")), "unclosed_reasoning_tag", "transcript turn 1"),
]


@pytest.mark.parametrize("text, code, fragment", NEAR_MISSES, ids=[f"{i}:{c}" for i, (_, c, _) in enumerate(NEAR_MISSES)])
def test_near_misses_are_rejected_with_their_code_and_place(text, code, fragment):
    for fmt in ("auto", "hermes"):
        result = convert({"text": text}, fmt=fmt, options=ConvertOptions(require_declared_tools=False))
        assert isinstance(result, Rejection), (fmt, result)
        assert (result.code, fragment in result.message) == (code, True), (fmt, result.message)
        assert "\n" not in result.message


def test_hostile_sizes_are_bounded_and_linear():
    huge_role = "<|im_start|>" + "r" * 1_000_000 + "\nHi<|im_end|>"
    result = convert(huge_role)
    assert result.code == "unknown_role" and len(result.message) < 700
    many = chatml(*[("user", "Hi"), ("assistant", "<think>a</think>b")] * 20_000)
    assert len(convert(many, options=ConvertOptions(max_row_chars=None))["messages"]) == 40_000
    assert convert("<|im_start|>" * 100_000).code == "malformed_row"


def test_format_auto_reads_a_file_of_such_rows(tmp_path):
    rows = [
        {"text": chatml(("user", "Hi"), ("assistant", "<think>Greet.</think>Hello!"))},
        llama3(("user", "Hi"), ("assistant", "<think>Greet.</think>Hello!")),
        {"text": chatml(("user", "Hi"), ("assistant", "<think>Greet.</think>Hello!")), "source": "x"},
        {"text": chatml(("user", "Hi")) + "<|im_start|>assistant\nHel"},
        {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<think>a</think>b"}]},
    ]
    results, conversion = run_source(write_jsonl(tmp_path / "chatml.jsonl", rows))
    assert conversion.format == "hermes"
    assert codes(results) == ["kept", "kept", "kept", "malformed_row", "kept"]
    assert results[1]["messages"] == [{"role": "user", "content": "Hi"},
                                      {"role": "assistant", "reasoning_content": "Greet.", "content": "Hello!"}]
