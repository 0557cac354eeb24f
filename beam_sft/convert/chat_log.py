"""Chat-completion logs (a ``request`` with its ``response``) -> BeamRow: one conversation, the
request's messages then the response's message as the trained turn, its reasoning kept.

Read shapes of ``response``:

- OpenAI's chat completion: ``choices[0].message`` (``content``, ``reasoning_content`` /
  ``reasoning``, ``tool_calls``, explicit ``null`` for what is unused: ``function_call``,
  ``tool_calls``, ``refusal``, ``audio``); more than one choice is ``ambiguous_conversation`` (which
  one was kept cannot be told). A ``message`` at the top of the response (Ollama) reads alike.
- A proxy's record (the AI SDK's ``generateText`` result, as gateways log it): ``text``,
  ``reasoningText`` (or ``reasoning`` as text), ``toolCalls`` of ``{toolCallId, toolName, input}``
  (``args`` in older versions).
- Earlier turns in the request as the AI SDK writes them (assistant ``tool-call`` parts, ``tool``
  messages of ``tool-result`` parts) read as OpenAI's (``sdk_message``).
- A Batch API output's ``response.body`` (the batch join, data/batch_api.py, hands the body here;
  for an Anthropic Message Batches pair, the result's ``message``: a logged Anthropic call, below).
- A logged Anthropic Messages call (a response of ``content`` blocks and a ``stop_reason``; the
  request's ``system``, blocks and ``input_schema`` tools): read by anthropic.py, the response's
  content the last assistant turn (``response.content[1]``); ``stop_reason`` ``max_tokens`` (or
  ``pause_turn``, ``refusal``) is ``response_cut_off``.
- A logged Responses API call (a request ``input`` beside the response's ``output`` items, a Batch
  API pair on ``/v1/responses`` too): read by responses.py, its places named ``request.input[3]``,
  ``response.output[0]``.

A response that did not finish (``finish_reason`` ``length``, ``content_filter``, the proxy's
``finishReason`` ``length`` or ``content-filter``: anything but a reason that says the model ended
its turn, ``FINISHED``) is ``response_cut_off``: its answer is not whole, or not the model's. The request's ``tools`` (or
``functions``) are the row's tools, its ``reasoning_effort`` the template's; a request
``messages`` list is required (a completions ``prompt`` is not a conversation).

>>> row = convert_chat_log({"request": {"messages": [{"role": "user", "content": "2+2?"}]},
...     "response": {"choices": [{"message": {"role": "assistant", "content": "4", "reasoning_content": "Add.",
...                                           "tool_calls": None, "function_call": None}, "finish_reason": "stop"}]}},
...     options=ConvertOptions())
>>> row["messages"][1]
{'role': 'assistant', 'reasoning_content': 'Add.', 'content': '4'}
"""

from __future__ import annotations

import json
from typing import Any

from beam_sft.convert.anthropic import openai_row as anthropic_row
from beam_sft.convert.assemble import convert_with
from beam_sft.convert.openai import read_openai_row
from beam_sft.convert.options import ColumnMap, ConvertOptions
from beam_sft.convert.parts import canonical_role
from beam_sft.convert.responses import openai_row as responses_row
from beam_sft.convert.rows import BeamRow, Rejection
from beam_sft.visible import KEY_CHARS, quoted

# The finish reasons that say the model ended its turn itself (OpenAI, the AI SDK, Anthropic/Bedrock,
# TGI), compared case-folded with "-" read as "_"; absent counts as finished (many logs omit it).
FINISHED = frozenset({"stop", "tool_calls", "function_call", "end_turn", "tool_use", "stop_sequence", "eos_token",
                      "eos"})
_REQUEST_KEYS = ("tools", "functions", "reasoning_effort", "chat_template_kwargs")


def convert_chat_log(raw: Any, *, options: ConvertOptions) -> BeamRow | Rejection:
    """One logged request/response -> a BeamRow (without ``meta``) or a Rejection; never raises."""
    return convert_with(read_chat_log_row, raw, options=options)


def is_chat_log(raw: Any) -> bool:
    """The shape detect.py votes ``chat_log`` for: a ``request`` object beside a ``response``."""
    return isinstance(raw, dict) and isinstance(raw.get("request"), dict) and "response" in raw


def read_chat_log_row(raw: Any, columns: ColumnMap) -> tuple[list[dict], list[dict], dict | None]:
    """``(draft messages, tools, template kwargs)``, by the OpenAI reader over ``openai_row``."""
    row, places = openai_row(raw)
    return read_openai_row(row, ColumnMap(), places)


def openai_row(raw: Any) -> tuple[dict, list[str]]:
    """The request's messages plus the response's message, with the request's tools and kwargs; and
    the entry each message was read from (``request.messages[2]``, ``response.choices[0].message``),
    for rejections to name."""
    if not is_chat_log(raw):
        raise Rejection("malformed_row", "not a {request: {...}, response: {...}} record")
    request = raw["request"]
    if "messages" not in request and "input" in request:  # a logged Responses API call: responses.py reads it
        response = raw["response"]
        body = isinstance(response, dict) and isinstance(response.get("body"), dict)  # a Batch API output's
        return responses_row(request, response["body"] if body else response, request_at="request.",
                             response_at="response.body." if body else "response.")
    if is_messages_response(raw["response"]):  # a logged Anthropic Messages call: anthropic.py reads it
        _check_finish(raw["response"].get("stop_reason"), "response.stop_reason")
        return anthropic_row(request, ColumnMap(), answer=raw["response"]["content"], at="request.",
                             answer_at="response")
    messages = request.get("messages")
    if not isinstance(messages, list):
        raise Rejection("malformed_row", "request has no 'messages' list")
    row: dict[str, Any] = {k: request[k] for k in _REQUEST_KEYS if request.get(k) is not None}
    history = [m for i, msg in enumerate(messages) for m in sdk_message(msg, f"request.messages[{i}]")]
    answer, place = response_message(raw["response"])
    row["messages"] = [*(m for m, _ in history), answer]
    return row, [*(p for _, p in history), place]


def is_messages_response(response: Any) -> bool:
    """An Anthropic Messages API response: its ``content`` blocks beside a ``stop_reason`` (or ``type: message``).

    >>> is_messages_response({"type": "message", "role": "assistant", "content": [], "stop_reason": "end_turn"})
    True
    """
    return isinstance(response, dict) and isinstance(response.get("content"), list) and (
        response.get("type") == "message" or "stop_reason" in response)


def sdk_message(msg: Any, where: str) -> list[tuple[Any, str]]:
    """A request message in the AI SDK's shape (how a proxy logs earlier turns) in OpenAI's: an
    assistant's ``tool-call`` parts (``toolCallId``, ``toolName``, ``input``/``args``) as calls, a
    tool message's ``tool-result`` parts (``output: {type, value}``, or ``result``) one tool message
    each (named by its part; in a message of another role, ``malformed_row``); a part the provider ran
    itself (``providerExecuted``: a hosted web search) is ``non_text_content``, as Anthropic's server
    tools are. Any other message as it is (the OpenAI reader reads or rejects it).
    Each message with the entry it was read from."""
    content = msg.get("content") if isinstance(msg, dict) else None
    if not isinstance(content, list):
        return [(msg, where)]
    kinds = {p.get("type") for p in content if isinstance(p, dict)}
    hosted = next((j for j, p in enumerate(content) if isinstance(p, dict) and p.get("providerExecuted") is True
                   and p.get("type") in ("tool-call", "tool-result")), None)
    if hosted is not None:  # a tool the provider ran (a web search): its call and result are not the model's text
        raise Rejection("non_text_content", f"{where}.content[{hosted}] is a provider-executed "
                        f"{quoted(content[hosted]['type'])} part (a tool the provider ran itself, as Anthropic's "
                        f"server tools): the template has no place for it")
    if "tool-result" in kinds:
        role = msg.get("role")
        if canonical_role(role, f"{where}.role") != "tool":  # the AI SDK sends results in tool messages only
            j = next(j for j, p in enumerate(content) if isinstance(p, dict) and p.get("type") == "tool-result")
            raise Rejection("malformed_row", f"{where}.content[{j}] is a tool-result part in a message of role "
                            f"{quoted(role)}: only a tool message carries tool results")
        if kinds != {"tool-result"}:
            raise Rejection("tool_response_mixed", f"{where} mixes tool-result parts with other parts")
        return [(_sdk_result(p, f"{where}.content[{j}]"), f"{where}.content[{j}]") for j, p in enumerate(content)]
    if "tool-call" not in kinds:
        return [(msg, where)]
    parts = [{"type": "tool_call", "value": _proxy_call(p, f"{where}.content[{j}]")}
             if isinstance(p, dict) and p.get("type") == "tool-call" else p for j, p in enumerate(content)]
    return [({**msg, "content": parts}, where)]


def _sdk_result(part: dict, where: str) -> dict:
    output = part.get("output", part.get("result"))
    if isinstance(output, dict) and "value" in output and output.get("type") in ("text", "json", "error-text",
                                                                                  "error-json"):
        output = output["value"]
    msg: dict[str, Any] = {"role": "tool", "content": output if isinstance(output, str) else json.dumps(
        output, ensure_ascii=False)}
    if part.get("toolCallId") is not None:
        msg["tool_call_id"] = part["toolCallId"]
    if isinstance(part.get("toolName"), str):
        msg["name"] = part["toolName"]
    return msg


def response_message(raw: Any) -> tuple[dict, str]:
    """The assistant message of a logged response (any shape of the module docstring), and where in
    the record it is (``response.choices[0].message``)."""
    if not isinstance(raw, dict):
        raise Rejection("malformed_row", f"response is a {type(raw).__name__}, not an object")
    body = isinstance(raw.get("body"), dict)  # a Batch API output line's response
    response = raw["body"] if body else raw
    at = "response.body" if body else "response"
    message, place = _response_message(response)
    return message, f"{at}{place}"


def _response_message(response: dict) -> tuple[dict, str]:
    choices = response.get("choices")
    if choices is not None:
        if not isinstance(choices, list) or not choices:
            raise Rejection("malformed_row", "response.choices is not a non-empty list")
        if len(choices) > 1:
            raise Rejection("ambiguous_conversation", f"response has {len(choices)} choices: which one was "
                            "kept cannot be told")
        choice = choices[0]
        if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
            raise Rejection("malformed_row", "response.choices[0] has no message")
        _check_finish(choice.get("finish_reason"), "response.choices[0].finish_reason")
        return {**choice["message"], "role": "assistant"}, ".choices[0].message"
    if isinstance(response.get("message"), dict):
        _check_finish(response.get("done_reason"), "response.done_reason")
        return {**response["message"], "role": "assistant"}, ".message"
    if any(k in response for k in ("text", "toolCalls", "reasoningText")):
        return _proxy_message(response), ""
    keys = ", ".join(quoted(k, KEY_CHARS) for k in list(response)[:12]) or "none"
    raise Rejection("malformed_row", f"response has no choices, message or text (keys: {keys})")


def _check_finish(reason: Any, where: str) -> None:
    """
    >>> _check_finish("content_filter", "finish_reason")
    Traceback (most recent call last):
    ...
    beam_sft.errors.Rejection: [response_cut_off] finish_reason is 'content_filter': the response did not finish (not a whole answer of the model's)
    >>> _check_finish("tool-calls", "finishReason"), _check_finish(None, "finish_reason")
    (None, None)
    """
    if reason is None:
        return
    if not isinstance(reason, str) or reason.strip().lower().replace("-", "_") not in FINISHED:
        raise Rejection("response_cut_off", f"{where} is {quoted(reason)}: the response did not finish (not a whole "
                        "answer of the model's)")


def _proxy_message(response: dict) -> dict:
    _check_finish(response.get("finishReason"), "response.finishReason")
    msg: dict[str, Any] = {"role": "assistant", "content": response.get("text")}
    reasoning = response.get("reasoningText", response.get("reasoning"))
    if reasoning is not None and not isinstance(reasoning, str):
        raise Rejection("malformed_row", "response.reasoningText is not a string")
    if reasoning is not None:
        msg["reasoning_content"] = reasoning
    calls = response.get("toolCalls")
    if calls is not None:
        if not isinstance(calls, list):
            raise Rejection("malformed_tool_call", "response.toolCalls is not a list")
        msg["tool_calls"] = [_proxy_call(c, f"response.toolCalls[{i}]") for i, c in enumerate(calls)]
    return msg


def _proxy_call(call: Any, where: str) -> dict:
    if not isinstance(call, dict):
        raise Rejection("malformed_tool_call", f"{where} is not an object")
    out: dict[str, Any] = {"name": call.get("toolName"), "arguments": call.get("input", call.get("args"))}
    if call.get("toolCallId") is not None:
        out = {"id": call["toolCallId"], **out}
    return out
