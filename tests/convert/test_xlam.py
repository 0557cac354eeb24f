"""The xlam reader on rows shaped as Salesforce/xlam-function-calling-60k's (``query``, ``answers`` and
``tools`` as JSON text, xLAM's parameter maps of Python type strings), each quirk converted exactly or
refused with its code and place; pytypes.py's type table, entry by entry."""

from __future__ import annotations

import json

import pytest

from beam_sft.convert import ConvertOptions, Rejection, convert_row
from beam_sft.convert.detect import classify
from beam_sft.convert.options import ColumnMap
from beam_sft.convert.pytypes import Unmappable, parameter_schema, type_schema
from beam_sft.convert.xlam import convert_xlam
from tests.convert.readers_util import codes, give_reasoning, run_source, write_jsonl

GIVEAWAYS = {"name": "live_giveaways_by_type",
             "description": "Retrieve live giveaways from the GamerPower API based on the specified type.",
             "parameters": {"type": {"description": "The type of giveaways to retrieve (e.g., game, loot, beta).",
                                     "type": "str", "default": "game"}}}
SUM = {"name": "sum_of_multiples", "description": "Sum the multiples of some numbers in a range.",
       "parameters": {"upper": {"description": "The end of the range.", "type": "int"},
                      "multiples": {"description": "The numbers.", "type": "List[int]"},
                      "inclusive": {"description": "Count the end too.", "type": "bool, optional"}}}
# The dataset's own row 1 (its example in the brief): everything is JSON text, the calls parallel.
ROW = {"id": 1, "query": "Where can I find live giveaways for beta access?",
       "answers": json.dumps([{"name": "live_giveaways_by_type", "arguments": {"type": "beta"}},
                              {"name": "live_giveaways_by_type", "arguments": {"type": "game"}}]),
       "tools": json.dumps([GIVEAWAYS])}
SUM_ROW = {"id": 2, "query": "Sum the multiples of 3 and 5 below 1000.",
           "answers": [{"name": "sum_of_multiples", "arguments": '{"upper": 999, "multiples": [3, 5]}'}],
           "tools": [SUM, GIVEAWAYS]}
REASONING = "I work out what the user needs."


def _convert(raw, **options):
    return convert_row(raw, format="xlam", options=ConvertOptions(**options), source="s", row=0, fill=give_reasoning)


def test_the_datasets_row_converts_exactly():
    assert _convert(ROW) == {
        "messages": [
            {"role": "user", "content": "Where can I find live giveaways for beta access?"},
            {"role": "assistant", "tool_calls": [
                {"id": "call_0", "type": "function",
                 "function": {"name": "live_giveaways_by_type", "arguments": {"type": "beta"}}},
                {"id": "call_1", "type": "function",
                 "function": {"name": "live_giveaways_by_type", "arguments": {"type": "game"}}}],
             "reasoning_content": REASONING}],
        "tools": [{"type": "function", "function": {
            "name": "live_giveaways_by_type",
            "description": "Retrieve live giveaways from the GamerPower API based on the specified type.",
            "parameters": {"type": "object", "properties": {"type": {
                "type": "string", "description": "The type of giveaways to retrieve (e.g., game, loot, beta).",
                "default": "game"}}, "required": []}}}],
        "meta": {"source": "s", "row": 0}}


def test_required_optional_and_typed_parameters_of_a_tool():
    row = _convert(SUM_ROW)
    assert row["tools"][0]["function"]["parameters"] == {"type": "object", "properties": {
        "upper": {"type": "integer", "description": "The end of the range."},
        "multiples": {"type": "array", "items": {"type": "integer"}, "description": "The numbers."},
        "inclusive": {"type": "boolean", "description": "Count the end too."}}, "required": ["upper", "multiples"]}
    assert row["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"upper": 999, "multiples": [3, 5]}
    assert [t["function"]["name"] for t in row["tools"]] == ["sum_of_multiples", "live_giveaways_by_type"]


def test_json_text_and_list_forms_read_alike():
    listed = {**ROW, "answers": json.loads(ROW["answers"]), "tools": json.loads(ROW["tools"])}
    args_as_text = {**listed, "answers": [{"name": c["name"], "arguments": json.dumps(c["arguments"])}
                                          for c in listed["answers"]]}
    assert _convert(ROW) == _convert(listed) == _convert(args_as_text)


def test_tools_already_in_json_schema_are_read_as_json_schema():
    schema = {"type": "object", "properties": {"type": {"type": "string"}}, "required": ["type"]}
    row = _convert({**ROW, "tools": [{**GIVEAWAYS, "parameters": schema}]})
    assert row["tools"][0]["function"]["parameters"] == schema
    openai_shape = {"type": "function", "function": GIVEAWAYS}
    assert _convert({**ROW, "tools": [openai_shape]})["tools"] == _convert(ROW)["tools"]


def test_a_row_without_reasoning_meets_the_missing_reasoning_policy():
    drop = convert_row(ROW, format="xlam", options=ConvertOptions(), source="s", row=0)
    unmask = convert_row(ROW, format="xlam", options=ConvertOptions(missing_reasoning="unmask"), source="s", row=0)
    assert (drop.code, unmask.code) == ("missing_reasoning", "no_trained_turn")
    assert "answers is trained but has no reasoning" in drop.message


@pytest.mark.parametrize("text, schema", [
    ("str", {"type": "string"}),
    ("int", {"type": "integer"}),
    ("float", {"type": "number"}),
    ("bool", {"type": "boolean"}),
    ("None", {"type": "null"}),
    ("string", {"type": "string"}),
    ("INTEGER", {"type": "integer"}),
    ("list", {"type": "array"}),
    ("List", {"type": "array"}),
    ("tuple", {"type": "array"}),
    ("set", {"type": "array", "uniqueItems": True}),
    ("dict", {"type": "object"}),
    ("Dict", {"type": "object"}),
    ("object", {"type": "object"}),
    ("Any", {}),
    ("", {}),
    ("List[int]", {"type": "array", "items": {"type": "integer"}}),
    ("List[str]", {"type": "array", "items": {"type": "string"}}),
    ("typing.List[float]", {"type": "array", "items": {"type": "number"}}),
    ("Set[str]", {"type": "array", "uniqueItems": True, "items": {"type": "string"}}),
    ("List[List[int]]", {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}),
    ("List[Dict[str, int]]", {"type": "array", "items": {"type": "object", "additionalProperties": {"type": "integer"}}}),
    ("Dict[str, Any]", {"type": "object"}),
    ("Dict[str, List[str]]", {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}}),
    ("Tuple[float, float]", {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}),
    ("Tuple[int, str]", {"type": "array", "items": [{"type": "integer"}, {"type": "string"}], "minItems": 2,
                         "maxItems": 2}),
    ("Tuple[int, ...]", {"type": "array", "items": {"type": "integer"}}),
    ("Optional[int]", {"type": ["integer", "null"]}),
    ("Union[int, float]", {"type": ["integer", "number"]}),
    ("int | None", {"type": ["integer", "null"]}),
    ("int or float", {"type": ["integer", "number"]}),
    ("Optional[List[int]]", {"oneOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]}),
    ("Union[List[int], List[float]]", {"anyOf": [{"type": "array", "items": {"type": "integer"}},
                                                  {"type": "array", "items": {"type": "number"}}]}),
    ("Union[int, Any]", {}),
])
def test_the_type_table(text, schema):
    assert type_schema(text) == (schema, False, type_schema("")[2])
    assert type_schema(f"{text}, optional")[:2] == (schema, True)


@pytest.mark.parametrize("text, why", [
    ("Callable", "'Callable' has no JSON Schema type"),
    ("Callable[[float], float]", "'Callable' has no JSON Schema type"),
    ("function", "'function' has no JSON Schema type"),
    ("datetime", "'datetime' has no JSON Schema type"),
    ("np.ndarray", "'np.ndarray' has no JSON Schema type"),
    ("List[Callable]", "'Callable' has no JSON Schema type"),
    ("Dict[int, str]", "the keys of 'Dict' are not str"),
    ("List[int, str]", "'List' does not take 2 type argument(s)"),
    ("str[int]", "'str' does not take 1"),
    ("Optional", "'Optional' needs its member types"),
    ("List[int", "the arguments of 'List' are not closed"),
    ("List[int]]", "']' is not part of an annotation"),
    ("str optional", "'optional' is not part of an annotation"),
    ("str, required", "'required' is neither 'optional' nor a default"),
    ("str, default=London", "its default 'London' is not a Python literal"),
    ("List[" * 80 + "int" + "]" * 80, "nests past 64 deep"),
    ("x" * 5000, "a type text of 5000 characters is no annotation"),
    ("[int]", "it is not an annotation"),
])
def test_a_type_with_no_json_schema_form_is_unmappable(text, why):
    with pytest.raises(Unmappable, match=None) as info:
        type_schema(text)
    assert why in str(info.value)


@pytest.mark.parametrize("spec, schema, required", [
    ({"type": "str", "description": "d"}, {"type": "string", "description": "d"}, True),
    ({"type": "str, optional", "description": "d"}, {"type": "string", "description": "d"}, False),
    ({"type": "int, optional", "default": 5}, {"type": "integer", "default": 5}, False),
    ({"type": "str", "default": ""}, {"type": "string", "default": ""}, False),  # any default makes it optional
    ({"type": "str", "default": None}, {"type": "string", "default": None}, False),
    ({"type": "str, default='London'"}, {"type": "string", "default": "London"}, False),
    ({"type": "int, optional, default=10", "default": 10}, {"type": "integer", "default": 10}, False),
    ({"type": "default='London'"}, {"default": "London"}, False),  # no type written: any value
    ({"description": "no type"}, {"description": "no type"}, True),
    ({"type": "int", "required": True, "default": 1}, {"type": "integer", "default": 1}, True),  # said decides
    ({"type": "int", "required": False}, {"type": "integer"}, False),
    ({"type": "str", "enum": ["a", "b"]}, {"type": "string", "enum": ["a", "b"]}, True),
    ({"type": "string", "items": None, "minimum": 0}, {"type": "string", "items": None, "minimum": 0}, True),
    ({"type": "Dict", "properties": {"a": {"type": "integer"}}, "required": ["a"], "default": {}},  # JSON Schema's list
     {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "default": {}}, False),
])
def test_optional_and_default_handling(spec, schema, required):
    assert parameter_schema(spec, "p") == (schema, required)


def _tools(spec) -> dict:
    return {**SUM_ROW, "tools": [{**SUM, "parameters": {**SUM["parameters"], "multiples": spec}}]}


@pytest.mark.parametrize("row, code, message", [
    ({**ROW, "answers": "[{\"name\": \"live_giveaways_by_type\", "}, "invalid_json", "answers: "),
    ({**ROW, "answers": "[{\"name\": \"x\", \"name\": \"y\"}]"}, "duplicate_key", "answers: "),
    ({**ROW, "answers": "{\"name\": \"live_giveaways_by_type\", \"arguments\": {}}"}, "malformed_row",
     "answers is {'name': 'live_giveaways_by_type', 'arguments': {}}, not a list of calls"),
    ({**ROW, "answers": 7}, "malformed_row", "answers is 7, not a list of calls"),
    ({**ROW, "answers": None}, "malformed_row", "no answers in the row"),
    ({**ROW, "answers": "[]"}, "empty_assistant", "answers is [] (the model should answer without a call"),
    ({**ROW, "answers": []}, "empty_assistant", "answers is []"),
    ({**ROW, "answers": [{"arguments": {"type": "beta"}}]}, "malformed_tool_call", "answers[0] has no function name"),
    ({**ROW, "answers": [{"name": "", "arguments": {}}]}, "malformed_tool_call", "answers[0] has no function name"),
    ({**ROW, "answers": ["live_giveaways_by_type"]}, "malformed_tool_call", "answers[0] is not an object"),
    ({**ROW, "answers": [{"name": "live_giveaways_by_type", "arguments": "[1]"}]}, "arguments_not_object",
     "answers[0].arguments is a list"),
    ({**ROW, "answers": [{"name": "live_giveaways_by_type", "arguments": "{type: beta}"}]}, "invalid_json",
     "answers[0].arguments"),
    ({**ROW, "answers": [{"name": "get_weather", "arguments": {}}]}, "undeclared_tool",
     "answers calls 'get_weather', which the row does not declare"),
    ({**SUM_ROW, "answers": [{"name": "sum_of_multiples", "arguments": {"upper": "NaN", "multiples": []}}]},
     "non_standard_number", "answers.tool_calls[0].function.arguments.upper, typed a number"),
    ({**ROW, "query": None}, "missing_content", "query (user) has no text"),
    ({**ROW, "query": ["Where?"]}, "malformed_row", "query is a list, not text"),
    ({**ROW, "tools": "[{\"name\": "}, "invalid_json", "tools: "),
    ({**ROW, "tools": json.dumps(GIVEAWAYS)}, "bad_tool_definition", "tools is {'name': 'live_giveaways_by_type'"),
    ({**ROW, "tools": 3}, "bad_tool_definition", "tools is 3, not a list of tools"),
    ({**ROW, "tools": ["live_giveaways_by_type"]}, "bad_tool_definition", "tools[0] is not an object"),
    ({**ROW, "tools": [{**GIVEAWAYS, "name": None}]}, "bad_tool_definition", "tools[0] has no name"),
    ({**ROW, "tools": [GIVEAWAYS, GIVEAWAYS]}, "bad_tool_definition", "declares 'live_giveaways_by_type' twice"),
    ({**ROW, "tools": [{**GIVEAWAYS, "parameters": ["type"]}]}, "bad_tool_definition",
     "tools[0].parameters is ['type'], not an object"),
    ({**ROW, "tools": [{"type": "function", "function": {**GIVEAWAYS, "parameters": {"type": {"type": "set[int]]"}}}}]},
     "bad_tool_definition", "tools[0].function.parameters.type.type 'set[int]]': ']' is not part of an annotation"),
    ({**ROW, "tools": [{**GIVEAWAYS, "parameters": {"type": "object", "properties": []}}]},  # JSON Schema's rules
     "bad_tool_definition", "tools[0].function.parameters.properties is [], not an object of named schemas"),
    (_tools("List[int]"), "bad_tool_definition",
     "tools[0].parameters.multiples is 'List[int]', not a parameter spec"),
    (_tools({"type": ["int"]}), "bad_tool_definition", "tools[0].parameters.multiples.type is ['int'], not a type text"),
    (_tools({"type": 3}), "bad_tool_definition", "tools[0].parameters.multiples.type is 3"),
    (_tools({"type": "Callable"}), "bad_tool_definition",
     "tools[0].parameters.multiples.type 'Callable': 'Callable' has no JSON Schema type"),
    (_tools({"type": "List[int]", "optional": True}), "bad_tool_definition",
     "tools[0].parameters.multiples has the key 'optional', which is neither xLAM's"),
    (_tools({"type": "List[int]", "required": "yes"}), "bad_tool_definition",
     "tools[0].parameters.multiples.required is 'yes', not true or false"),
    (_tools({"type": "List[int], optional", "required": True}), "bad_tool_definition",
     "tools[0].parameters.multiples is required, but its type says optional"),
    (_tools({"type": "int, default=1", "default": 2}), "bad_tool_definition",
     "tools[0].parameters.multiples gives two defaults, 1 in its type and 2"),
    (_tools({"type": "List[int]", "items": {"type": "string"}}), "bad_tool_definition",
     "tools[0].parameters.multiples.items differs from what its type 'List[int]' says"),
    (_tools({"type": "List[int]", "description": 5}), "bad_tool_definition",
     "tools[0].parameters.multiples.description is not a string"),
    (_tools({"type": "int, default={'a': 1, 'a': 2}"}), "duplicate_key",
     "tools[0].parameters.multiples.type: its default: a key appears twice"),
    ({**ROW, "tools": [{**GIVEAWAYS, "parameters": {"type": {"type": "List[" * 70 + "int" + "]" * 70}}}]},
     "bad_tool_definition", "nests past 64 deep"),
    ({**ROW, "images": ["x.png"]}, "non_text_content", "images"),
    ({**ROW, "messages": [{"role": "user", "content": "q"}]}, "conflicting_carriers",
     "the row holds messages and query/answers"),
])
def test_near_misses_are_refused_with_their_code_and_place(tmp_path, row, code, message):
    results, _ = run_source(write_jsonl(tmp_path / "xlam.jsonl", [ROW, row, SUM_ROW]))
    assert codes(results) == ["kept", code, "kept"], [getattr(r, "message", "") for r in results]
    assert message in results[1].message and "\n" not in results[1].message, results[1].message


def test_a_file_of_xlam_rows_is_detected_and_read_by_its_own_shape(tmp_path):
    flat = {"query": "2+2?", "response": "4"}  # MetaMathQA's pair: not xLAM's, never stolen
    path = write_jsonl(tmp_path / "mixed.jsonl", [ROW, SUM_ROW, {**ROW, "answers": "[]"}, flat])
    results, conversion = run_source(path)
    assert codes(results) == ["kept", "kept", "empty_assistant", "kept"]
    assert dict(conversion.summary.formats) == {"xlam": 3, "alpaca": 1}
    assert (conversion.format, conversion.detection) == ("xlam", "xlam: 3 of 4 sampled rows; each row read by its own shape")


@pytest.mark.parametrize("raw, expected", [
    (ROW, "xlam"),
    ({"query": "q", "answers": "not json", "tools": None}, "xlam"),  # a near miss: read, then refused
    ({"query": "q", "response": "a"}, "alpaca"),
    ({"query": "q", "answers": "[]"}, None),  # no tools column: not xLAM's own keys
    ({"messages": [{"role": "user", "content": "q"}], "tools": []}, "openai"),
])
def test_classify(raw, expected):
    assert classify(raw, ColumnMap()) == expected


def test_the_reader_never_raises_on_odd_rows():
    for raw in (None, 3, "text", [], {}, {"query": 1, "answers": {}, "tools": {}}, {"query": "q", "answers": [[]]}):
        result = convert_xlam(raw, options=ConvertOptions())
        assert isinstance(result, Rejection), raw


def test_a_kept_row_renders_through_beams_template(render_beam):
    row = _convert(SUM_ROW)
    text = render_beam(row["messages"], tools=row["tools"])
    assert "upper: number," in text and "multiples: number[]," in text and "inclusive?: boolean," in text


# The same maps in other readers' tools (a set converted to the OpenAI or ShareGPT shape with its maps kept):
# read as JSON Schema they showed the model a tool without parameters; now the schema they say.
OPENAI = {"messages": [{"role": "user", "content": "Sum the multiples of 3 and 5 below 1000."},
                       {"role": "assistant", "tool_calls": [{"type": "function", "function": {
                           "name": "sum_of_multiples", "arguments": '{"upper": 999, "multiples": [3, 5]}'}}]}],
          "tools": [{"type": "function", "function": SUM}]}
SHAREGPT = {"conversations": [{"from": "human", "value": "Sum the multiples of 3 and 5 below 1000."},
                              {"from": "function_call",
                               "value": '{"name": "sum_of_multiples", "arguments": {"upper": 999, "multiples": [3, 5]}}'}],
            "tools": json.dumps([SUM])}


@pytest.mark.parametrize("raw", [OPENAI, SHAREGPT], ids=["openai", "sharegpt"])
def test_other_readers_read_xlam_parameter_maps_as_the_schema_they_say(raw):
    row = convert_row(raw, format="auto", options=ConvertOptions(), source="s", row=0, fill=give_reasoning)
    assert row["tools"] == _convert(SUM_ROW)["tools"][:1]


@pytest.mark.parametrize("parameters", [
    {"type": "object", "properties": {"type": {"type": "string"}}},
    {"properties": {"city": {"type": "string"}}},  # no type: JSON Schema still, by its properties of schemas
    {"anyOf": [{"type": "object"}]},
    {},
])
def test_json_schema_parameters_are_never_read_as_a_map(parameters):
    raw = {**OPENAI, "tools": [{"type": "function", "function": {**SUM, "parameters": parameters}}]}
    row = convert_row(raw, format="openai", options=ConvertOptions(require_declared_tools=False), source="s",
                      row=0, fill=give_reasoning)
    assert row["tools"][0]["function"]["parameters"] == parameters


def test_an_unmappable_type_in_another_readers_tools_is_refused_naming_it():
    tools = [{"type": "function", "function": {**SUM, "parameters": {"f": {"type": "Callable"}}}}]
    result = convert_row({**OPENAI, "tools": tools}, format="openai", options=ConvertOptions(), source="s", row=0,
                         fill=give_reasoning)
    assert (result.code, result.message) == (
        "bad_tool_definition", "tools[0].function.parameters.f.type 'Callable': 'Callable' has no JSON Schema type")
