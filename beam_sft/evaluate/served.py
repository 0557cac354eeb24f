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

from beam_sft.errors import BeamError
from beam_sft.evaluate.metrics import STOP_CALL, STOP_RETURN, ServedTurn
from beam_sft.evaluate.turns import EvalTurn

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
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


def served_turn(choice: dict) -> ServedTurn:
    """One chat-completions choice as the scorer reads it.

    >>> served_turn({"finish_reason": "tool_calls", "message": {"content": "", "reasoning_content": "r",
    ...     "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}}).stop
    'call'
    """
    message = dict(choice.get("message") or {})
    if not message.get("reasoning_content") and message.get("reasoning"):
        message["reasoning_content"] = message["reasoning"]
    stop = _STOPS.get(choice.get("finish_reason"))
    return ServedTurn(message, stop, json.dumps({"message": message, "finish_reason": choice.get("finish_reason")},
                                               sort_keys=True, ensure_ascii=False))


def generate_served(base_url: str, model: str, turns: Sequence[EvalTurn], *, max_new_tokens: int,
                    api_key_value: str | None = None, timeout: float = 300.0,
                    progress: Callable[[int], None] | None = None) -> list[ServedTurn]:
    """One greedy chat completion per turn; a failed request is a one-line BeamError naming the turn."""
    import httpx

    headers = {"Authorization": f"Bearer {api_key_value}"} if api_key_value else {}
    url = base_url.rstrip("/") + "/chat/completions"
    out = []
    with httpx.Client(timeout=timeout, headers=headers) as client:
        for i, turn in enumerate(turns):
            body: dict = {"model": model, "messages": openai_messages(turn.messages), "temperature": 0,
                          "max_tokens": max_new_tokens, "stream": False}
            if turn.tools:
                body["tools"] = turn.tools
            if turn.chat_template_kwargs:
                body["chat_template_kwargs"] = turn.chat_template_kwargs
            try:
                response = client.post(url, json=body)
            except httpx.HTTPError as exc:
                raise BeamError(f"{url}: turn {turn.source}: {type(exc).__name__}: {exc}") from None
            if response.status_code != 200:
                raise BeamError(f"{url}: turn {turn.source}: HTTP {response.status_code}: {response.text[:300]}")
            try:
                choice = response.json()["choices"][0]
            except (ValueError, KeyError, IndexError, TypeError):
                raise BeamError(f"{url}: turn {turn.source}: not a chat completion: {response.text[:300]}") from None
            out.append(served_turn(choice))
            if progress is not None:
                progress(i + 1)
    return out
