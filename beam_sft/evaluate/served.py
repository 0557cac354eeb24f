"""``beam-sft eval --base-url``: the turns sent to an OpenAI-compatible server (vLLM, ``transformers
serve``) as chat completions with ``tools``, greedy (``temperature: 0``), one request at a time.

What is sent: the prompt's messages in the OpenAI form (assistant ``tool_calls`` with their arguments
as JSON text, earlier reasoning as ``reasoning_content``, tool results with ``tool_call_id`` and
``name``), the row's tools, and its chat-template arguments as ``chat_template_kwargs`` (vLLM and
``transformers serve`` both pass them to the template). What is read: ``content``,
``reasoning_content`` (or ``reasoning``, vLLM's newer name), ``tool_calls``, and ``finish_reason``:
``stop`` -> the turn returned, ``tool_calls`` -> it called, anything else (``length``) -> it did not end.

The key comes from an environment variable only (``--api-key-env``; default ``OPENAI_API_KEY`` when
set), never from a flag: a command line is visible to every user of the machine.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from beam_sft.data import jsontext
from beam_sft.errors import BeamError
from beam_sft.evaluate.metrics import STOP_CALL, STOP_RETURN, ServedTurn
from beam_sft.evaluate.turns import EvalTurn
from beam_sft.reason.client import TeacherClient, TeacherError, TeacherStopped, join_content

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
MAX_RESPONSE_BYTES = 16 << 20  # one turn's reply: far above any max_tokens a turn is given
_STOPS = {"stop": STOP_RETURN, "tool_calls": STOP_CALL}


def api_key(env: str | None) -> str | None:
    """The key from ``env`` (must be set when named), else from OPENAI_API_KEY when set, else none."""
    if env:
        if env not in os.environ:
            raise BeamError(f"the API key variable {env} is not set")
        return os.environ[env]
    return os.environ.get(DEFAULT_KEY_ENV) or None


def openai_messages(messages: Sequence[dict]) -> list[dict]:
    """A BeamRow's messages in the chat-completions request form.

    >>> openai_messages([{"role": "assistant", "reasoning_content": "r", "weight": 0, "tool_calls": [
    ...     {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"n": 3}}}]}])
    [{'role': 'assistant', 'content': None, 'reasoning_content': 'r', 'tool_calls': [{'id': 'c1', 'type': 'function', 'function': {'name': 'f', 'arguments': '{"n": 3}'}}]}]
    """
    out = []
    for i, message in enumerate(messages):
        role = message.get("role")
        item: dict = {"role": role, "content": message.get("content")}
        if role == "assistant":
            reasoning = message.get("thinking") or message.get("reasoning_content") or message.get("reasoning")
            if reasoning:
                item["reasoning_content"] = reasoning
            if message.get("tool_calls"):
                calls = []
                for j, call in enumerate(message["tool_calls"]):
                    fn = call.get("function", call)
                    args = fn.get("arguments", {})
                    calls.append({"id": call.get("id") or f"call_{i}_{j}", "type": "function",
                                  "function": {"name": fn.get("name"),
                                               "arguments": args if isinstance(args, str)
                                               else json.dumps(args, ensure_ascii=False)}})
                item["tool_calls"] = calls
        elif role == "tool":
            for key in ("tool_call_id", "name"):
                if message.get(key) is not None:
                    item[key] = message[key]
        elif item["content"] is None:
            item["content"] = ""
        out.append(item)
    return out


def served_turn(choice: Any) -> ServedTurn:
    """One chat-completions choice as the scorer reads it; a shape no chat completion has (content that
    is neither text nor text parts, a call without a function name, a message that is not an object)
    is an unreadable turn (``ServedTurn.problem``), scored wrong, never an exception.

    >>> served_turn({"finish_reason": "tool_calls", "message": {"content": "", "reasoning_content": "r",
    ...     "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}}).stop
    'call'
    >>> served_turn({"finish_reason": "stop", "message": {"content": [{"type": "text", "text": "Hi"}]}}).message["content"]
    'Hi'
    >>> served_turn({"finish_reason": "stop", "message": {"content": "x", "tool_calls": [{"function": None}]}}).problem
    'the reply cannot be read as a message: tool_calls[0].function is NoneType, not an object'
    """
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    raw = json.dumps(choice, sort_keys=True, ensure_ascii=False, default=repr)
    try:
        message = _message(choice)
        if finish is not None and not isinstance(finish, str):
            raise ValueError(f"finish_reason is {_kind(finish)}, not text")
    except ValueError as exc:
        return ServedTurn({}, None, raw, finish_reason=None, problem=f"the reply cannot be read as a message: {exc}")
    return ServedTurn(message, _STOPS.get(finish), json.dumps({"message": message, "finish_reason": finish},
                                                              sort_keys=True, ensure_ascii=False), finish_reason=finish)


def _kind(value: Any) -> str:
    return type(value).__name__


def _message(choice: Any) -> dict:
    """The message of a choice with every field the scorer reads checked for its type (ValueError)."""
    if not isinstance(choice, dict):
        raise ValueError(f"choices[0] is {_kind(choice)}, not an object")
    message = choice.get("message")
    message = {} if message is None else message
    if not isinstance(message, dict):
        raise ValueError(f"choices[0].message is {_kind(message)}, not an object")
    out: dict[str, Any] = {"content": join_content(message.get("content"))}
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"message.{key} is {_kind(value)}, not text")
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if reasoning is not None:
        out["reasoning_content"] = reasoning
    calls = message.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            raise ValueError(f"tool_calls is {_kind(calls)}, not a list")
        out["tool_calls"] = []
        for i, call in enumerate(calls):
            fn = call.get("function", call) if isinstance(call, dict) else call  # a bare {name, arguments} too
            if not isinstance(fn, dict):
                raise ValueError(f"tool_calls[{i}].function is {_kind(fn)}, not an object")
            name, arguments = fn.get("name"), fn.get("arguments")
            if not isinstance(name, str) or not name:
                raise ValueError(f"tool_calls[{i}].function.name is {_kind(name)}, not a name")
            if arguments is not None and not isinstance(arguments, (str, dict)):
                raise ValueError(f"tool_calls[{i}].function.arguments is {_kind(arguments)}, not JSON text")
            out["tool_calls"].append({"id": call.get("id") if isinstance(call, dict) else None, "type": "function",
                                      "function": {"name": name, "arguments": arguments}})
    return out


class ServedRunStopped(BeamError):
    """A served eval stopped at a turn whose request failed after its retries (or whose reply is no chat
    completion); ``done`` holds the turns generated before it, which the caller still scores and writes."""

    def __init__(self, message: str, done: Sequence[ServedTurn] = ()):
        self.done = list(done)
        super().__init__(message)

    def __reduce__(self):
        return type(self), (str(self), self.done)


def generate_served(base_url: str, model: str, turns: Sequence[EvalTurn], *, max_new_tokens: int,
                    api_key_value: str | None = None, timeout: float = 300.0, retries: int = 4,
                    progress: Callable[[int], None] | None = None) -> list[ServedTurn]:
    """One greedy chat completion per turn, through the teacher's client (``reason/client.py``): a whole-
    request deadline, retries with backoff on 429/5xx/timeouts, a stop at 401/403/404, the reply read
    within a byte bound, every message redacted. A request that still fails, or a reply that is not a
    chat completion at all, is a one-line ``ServedRunStopped`` naming the turn, holding the turns before it."""
    client = TeacherClient(base_url, model, api_key=api_key_value, timeout=timeout, retries=retries, concurrency=1,
                           max_response_bytes=MAX_RESPONSE_BYTES)
    out = []
    try:
        for i, turn in enumerate(turns):
            body: dict = {"model": model, "messages": openai_messages(turn.messages), "temperature": 0,
                          "max_tokens": max_new_tokens, "stream": False}
            if turn.tools:
                body["tools"] = turn.tools
            if turn.chat_template_kwargs:
                body["chat_template_kwargs"] = turn.chat_template_kwargs
            try:
                data = client.send(body)
            except (TeacherError, TeacherStopped) as exc:
                raise ServedRunStopped(f"turn {turn.source}: {exc}", out) from None
            try:
                payload = jsontext.loads(data)
                choices = payload["choices"]
                if not isinstance(choices, list) or not choices:
                    raise ValueError("no choices")
            except (ValueError, KeyError, TypeError) as exc:
                quoted = client.redact(data[:300].decode("utf-8", "replace"))
                raise ServedRunStopped(f"{client.host}: turn {turn.source}: not a chat completion ({exc}): {quoted!r}",
                                       out) from None
            out.append(served_turn(choices[0]))
            if progress is not None:
                progress(i + 1)
    finally:
        client.close()
    return out
