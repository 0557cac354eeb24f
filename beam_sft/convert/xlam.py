"""Salesforce xLAM / APIGen function-calling rows (``query``, ``answers``, ``tools``) -> BeamRow.

Salesforce/xlam-function-calling-60k (and the sets APIGen writes the same way) holds one request
and the calls that answer it:

- ``query``: the user's message.
- ``answers``: the parallel calls, ``[{"name", "arguments"}]``, as JSON text or a list; each call's
  ``arguments`` an object or JSON text. They are one assistant turn, the arguments as given.
  ``[]`` (the irrelevance sets: the model should answer without a call) holds no answer text, so
  there is nothing to train: ``empty_assistant``, never an invented reply.
- ``tools``: ``[{"name", "description", "parameters"}]``, as JSON text or a list. ``parameters`` is
  xLAM's map of parameter name -> ``{"type": "List[int]", "description", "default"?}``, written
  as JSON Schema by pytypes.py (its table; a type with no JSON Schema form is
  ``bad_tool_definition``); ``parameters`` that are JSON Schema already (a ``type`` name,
  ``properties`` of schemas: pytypes.is_json_schema) are read as every reader reads them.
- ``id`` and other columns: as the OpenAI reader treats a row's other keys (a ``system`` column is
  the system prompt; media columns are ``non_text_content``).

The rows have no reasoning: the turn goes through the missing-reasoning policy as any other (a
teacher can fill it). The row is rewritten into the OpenAI shape and read by the OpenAI reader, so a
call the data gets wrong is refused by the rules every reader's calls meet (``undeclared_tool``, a
number argument that is NaN as text, ...), named by the source's own keys (``answers``).

>>> row = convert_xlam({"id": 1, "query": "Beta giveaways?",
...     "answers": '[{"name": "live_giveaways_by_type", "arguments": {"type": "beta"}}]',
...     "tools": '[{"name": "live_giveaways_by_type", "description": "Live giveaways.", "parameters": '
...              '{"type": {"description": "game, loot or beta.", "type": "str", "default": "game"}}}]'},
...     options=ConvertOptions(missing_reasoning="unmask"))
>>> row["messages"][1]["tool_calls"][0]["function"]
{'name': 'live_giveaways_by_type', 'arguments': {'type': 'beta'}}
>>> row["tools"][0]["function"]["parameters"]
{'type': 'object', 'properties': {'type': {'type': 'string', 'description': 'game, loot or beta.', 'default': 'game'}}, 'required': []}
"""

from __future__ import annotations

from typing import Any

from beam_sft.convert.assemble import convert_with
from beam_sft.convert.openai import read_openai_row
from beam_sft.convert.options import ColumnMap, ConvertOptions
from beam_sft.convert.pytypes import is_json_schema, parameters_schema
from beam_sft.convert.rows import BeamRow, Rejection
from beam_sft.convert.tools import parse_json_text, parse_tool_call
from beam_sft.visible import quoted

# The row's own keys (the detector's), and those that hold its conversation: a message list beside
# them is the conversation twice (pipeline.conflicting_carriers).
XLAM_COLUMNS = ("query", "answers", "tools")
XLAM_CONVERSATION = ("query", "answers")


def convert_xlam(raw: Any, *, options: ConvertOptions) -> BeamRow | Rejection:
    """One xLAM row -> a BeamRow (without ``meta``) or a Rejection; never raises."""
    return convert_with(read_xlam_row, raw, options=options)


def is_xlam(raw: Any) -> bool:
    """The shape detect.py votes ``xlam`` for: ``query``, ``answers`` and ``tools`` keys, whatever
    their values (a near-miss is then refused by this reader with its code, not read as another)."""
    return isinstance(raw, dict) and all(key in raw for key in XLAM_COLUMNS)


def read_xlam_row(raw: Any, columns: ColumnMap) -> tuple[list[dict], list[dict], dict | None]:
    """``(draft messages, tools, template kwargs)``, by the OpenAI reader over ``openai_row``."""
    row, places = openai_row(raw)
    return read_openai_row(row, ColumnMap(), places)


def openai_row(raw: Any) -> tuple[dict, list[str]]:
    """The xLAM row in the OpenAI shape, and the key each message was read from."""
    if not isinstance(raw, dict):
        raise Rejection("malformed_row", f"a row is a {type(raw).__name__}, not an object")
    query = raw.get("query")
    if query is None:
        raise Rejection("missing_content", "query (user) has no text")
    if not isinstance(query, str):
        raise Rejection("malformed_row", f"query is a {type(query).__name__}, not text")
    calls = read_answers(raw.get("answers"))
    row: dict[str, Any] = {k: v for k, v in raw.items() if k not in XLAM_COLUMNS}
    row["messages"] = [{"role": "user", "content": query}, {"role": "assistant", "tool_calls": calls}]
    row["tools"] = read_tools(raw.get("tools"))
    return row, ["query", "answers"]


def _decoded(value: Any, where: str) -> Any:
    return parse_json_text(value, where) if isinstance(value, str) else value


def read_answers(value: Any) -> list[dict]:
    """The calls of ``answers`` (JSON text or a list of ``{name, arguments}``)."""
    if value is None:
        raise Rejection("malformed_row", "no answers in the row (the calls that answer the query)")
    calls = _decoded(value, "answers")
    if not isinstance(calls, list):
        raise Rejection("malformed_row", f"answers is {quoted(calls, 60)}, not a list of calls")
    if not calls:
        raise Rejection("empty_assistant", "answers is [] (the model should answer without a call, but the row "
                        "holds no answer text: nothing to train)")
    return [parse_tool_call(call, f"answers[{j}]") for j, call in enumerate(calls)]


def read_tools(value: Any) -> list[dict]:
    """``tools`` with each xLAM parameter map written as JSON Schema (pytypes.py); the OpenAI reader
    then reads them as any row's tools (names, duplicates, schema depth)."""
    tools = _decoded(value, "tools") if value != "" else []
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise Rejection("bad_tool_definition", f"tools is {quoted(tools, 60)}, not a list of tools")
    return [_tool(tool, f"tools[{i}]") for i, tool in enumerate(tools)]


def _tool(tool: Any, where: str) -> Any:
    """A tool whose ``parameters`` (flat, or in an OpenAI ``function`` object) are an xLAM map, with
    them as JSON Schema; any other value as it is, for normalize_tools to read or refuse."""
    if not isinstance(tool, dict):
        return tool
    nested = isinstance(tool.get("function"), dict)
    fn = tool["function"] if nested else tool
    params = fn.get("parameters")
    if params is None or (isinstance(params, dict) and is_json_schema(params)):
        return tool  # none, or JSON Schema already
    at = f"{where}.function.parameters" if nested else f"{where}.parameters"
    if not isinstance(params, dict):
        raise Rejection("bad_tool_definition", f"{at} is {quoted(params, 60)}, not an object")
    fn = {**fn, "parameters": parameters_schema(params, at)}
    return {**tool, "function": fn} if nested else fn
