"""Compare an assistant turn parsed back from its trained tokens with the source message."""

from __future__ import annotations

import json

from beam_sft.visible import quoted


def reasoning_of(message: dict) -> str:
    """The reasoning the template renders: ``thinking``, else ``reasoning_content``, else ``reasoning``.

    >>> reasoning_of({"reasoning_content": "", "reasoning": "why"})
    'why'
    """
    return message.get("thinking") or message.get("reasoning_content") or message.get("reasoning") or ""


def value_text(value) -> str:
    """An argument value as the template writes it: strings as is, the rest as JSON in given order.

    >>> value_text({"a": [1, True, None]})
    '{"a": [1, true, null]}'
    >>> value_text("Paris")
    'Paris'
    """
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _call_parts(call: dict) -> tuple[str | None, dict | None]:
    fn = call.get("function", call) if isinstance(call, dict) else {}
    name = fn.get("name", call.get("name") if isinstance(call, dict) else None)
    args = fn.get("arguments", call.get("arguments") if isinstance(call, dict) else None)
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return name, {"<unparsed>": args}
    return name, args


def _same_value(parsed, source) -> bool:
    # A parser without the tool's schema returns strings; the text the model learns is what counts.
    return parsed == source or value_text(parsed) == value_text(source)


def compare_turn(parsed: dict, source: dict) -> list[str]:
    """Differences between a parsed turn and its source message (empty when they agree).

    >>> compare_turn({"thinking": "t", "content": "4"}, {"reasoning_content": "t", "content": "4"})
    []
    >>> compare_turn({"thinking": "t", "content": "5"}, {"reasoning_content": "t", "content": "4"})
    ["content: parsed '5', source '4'"]
    """
    diffs: list[str] = []
    thinking = parsed.get("thinking") or ""
    if thinking != reasoning_of(source):
        diffs.append(f"reasoning: parsed {_short(thinking)}, source {_short(reasoning_of(source))}")
    source_calls = source.get("tool_calls") or []
    source_content = source.get("content") or ""
    parsed_content = parsed.get("content") or ""
    if source_calls and parsed_content:
        diffs.append(f"content: parsed {_short(parsed_content)} beside tool calls")
    # Beside tool calls the template renders no answer, so there is nothing to give back: that
    # loss is counted in the report (``notes``), since it is the data's doing, not the encoder's.
    if not source_calls and parsed_content != source_content:
        diffs.append(f"content: parsed {_short(parsed_content)}, source {_short(source_content)}")
    parsed_calls = parsed.get("tool_calls") or []
    if len(parsed_calls) != len(source_calls):
        diffs.append(f"tool calls: parsed {len(parsed_calls)}, source {len(source_calls)}")
        return diffs
    for n, (got, want) in enumerate(zip(parsed_calls, source_calls, strict=True)):
        got_name, got_args = _call_parts(got)
        want_name, want_args = _call_parts(want)
        if got_name != want_name:
            diffs.append(f"tool call {n}: name parsed {quoted(got_name)}, source {quoted(want_name)}")
        got_args, want_args = got_args or {}, want_args or {}
        if list(got_args) != list(want_args):
            diffs.append(f"tool call {n}: arguments parsed {quoted(list(got_args))}, source {quoted(list(want_args))}")
            continue
        for key in want_args:
            if not _same_value(got_args[key], want_args[key]):
                diffs.append(f"tool call {n}: argument {quoted(key)} parsed {_short(got_args[key])}, "
                             f"source {_short(want_args[key])}")
    return diffs


def content_beside_tool_calls(message: dict) -> bool:
    """True when the template will drop this message's answer: it renders none beside tool calls.

    >>> content_beside_tool_calls({"content": "Let me check.", "tool_calls": [{"function": {"name": "f"}}]})
    True
    """
    return bool(message.get("tool_calls")) and bool(message.get("content"))


def _short(value) -> str:
    return quoted(value, 60)  # a difference shows the start of both texts, side by side
