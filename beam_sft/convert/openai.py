"""OpenAI chat rows (``messages`` of role/content) -> BeamRow.

Read shapes:

- ``messages`` (or ``columns.messages``); exactly one list of role-bearing messages under any other
  key when the known ones are absent (a trajectory's ``traj``; named in ``meta.notes`` as
  ``messages_key:KEY``; two such keys are ``malformed_row`` naming both; under a prompt-side key whose partner
  column holds the answer as text, ``ANSWER_PARTNERS``, that answer ends the conversation:
  ``messages_key:input+output``); a bare list of messages (a file that is one
  conversation); a ``conversations`` list of role/content messages (a common hybrid); ToolBench's
  ``answer_generation.train_messages``, a list of growing copies of one conversation, of which the
  longest is kept when every other one is a prefix of it (else ``ambiguous_conversation``).
- ``content`` as a string, null, or a list of parts (parts.py).
- ``tool_calls`` with ``arguments`` as a dict or a JSON string, with or without ``id``/``type``;
  legacy ``function_call``; Qwen3-coder ``function_calls`` XML strings (used when there are no
  structured calls, checked against them when there are); ``tool_call`` content parts.
- Roles: the one alias table of parts.py (``function``/``observation`` are tool results,
  ``function_call`` a call turn, ``bot``/``gpt`` the assistant, ...). ``tool_call_ids`` with one
  id is that id; with several, one message answers several calls, which Beam cannot express
  (``tool_result_unmatched``). A user or system message without content (null, or no such
  key), and a tool message with no ``content`` key, are ``missing_content`` (a tool's explicit
  null is an empty result).
- ``tool_calls`` as a list, one object, a JSON string, or the empty placeholders ``""``/null/[].
- Tools from the row's ``tools``/``functions`` columns and from ``tools``/``functions`` on a
  system or developer message; the row's ``chat_template_kwargs`` and ``reasoning_effort``.
- Per-message ``weight``/``loss_weight``/``loss``/``train`` flags become ``weight``. Other keys
  are ignored; media columns (``images``, ...) reject the row (``non_text_content``).

>>> convert_openai({"messages": [
...     {"role": "user", "content": "Weather in Paris?"},
...     {"role": "assistant", "reasoning_content": "Use the tool.", "tool_calls": [
...         {"function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
...     {"role": "tool", "content": "18 C"}]}, options=ConvertOptions())["messages"][2]
{'role': 'tool', 'tool_call_id': 'call_0', 'name': 'get_weather', 'content': '18 C'}
"""

from __future__ import annotations

from typing import Any

from beam_sft.convert.assemble import (
    DROPPED,
    add_call_turn,
    add_system_column,
    convert_with,
    missing_content,
    place_drafts,
    read_call_value,
)
from beam_sft.convert.options import ColumnMap, ConvertOptions
from beam_sft.convert.parts import (
    LOSS_FLAGS,
    ROLE_ALIASES,
    canonical_role,
    check_untrained_weight,
    read_content,
    read_reasoning_fields,
    read_result_content,
    read_template_kwargs,
    read_tool_calls,
    read_weight,
)
from beam_sft.convert.rows import BeamRow, Rejection
from beam_sft.convert.tools import (
    merge_tools,
    normalize_tools,
    parse_json_text,
    parse_tool_call,
    parse_xml_function_calls,
    same_calls,
)
from beam_sft.visible import KEY_CHARS, quoted


def convert_openai(raw: Any, *, options: ConvertOptions) -> BeamRow | Rejection:
    """One OpenAI-style row -> a BeamRow (without ``meta``) or a Rejection; never raises."""
    row = convert_with(read_openai_row, raw, options=options)
    note = None if isinstance(row, Rejection) else messages_key_note(raw, options.columns)
    if note is not None:  # said in the summary's notes: which key the conversation came from
        meta = row.setdefault("meta", {})
        meta["notes"] = {**meta.get("notes", {}), note: 1}
    return row


def read_openai_row(raw: Any, columns: ColumnMap, places: list[str] | None = None
                    ) -> tuple[list[dict], list[dict], dict | None]:
    """``(draft messages, tools, template kwargs)`` of one row (see assemble.py for drafts).

    ``places``: a reader that rewrote its own format into this shape names the source entry of each
    message it wrote (``contents[2]``); without it, the entries of the list read are named.
    """
    messages, row, found = locate_messages(raw, columns)
    drafts, prompt_tools = read_messages(messages, found if places is None else places)
    add_system_column(drafts, row.get(columns.system), columns.system)
    return drafts, merge_tools(row_tools(row, columns), prompt_tools), read_template_kwargs(row)


def _indexed(key: str, items: list) -> list[str]:
    return [f"{key}[{i}]" for i in range(len(items))]


def locate_messages(raw: Any, columns: ColumnMap) -> tuple[list, dict, list[str]]:
    """``(message list, row dict, the name of each message in the row)`` of the shapes this converter
    reads: a message is named by the row's own key and index (``traj[3]``, ``completion[0]``).

    >>> locate_messages({"prompt": [{"role": "user", "content": "q"}],
    ...                  "completion": [{"role": "assistant", "content": "a"}]}, ColumnMap())[2]
    ['prompt[0]', 'completion[0]']
    """
    if isinstance(raw, list):
        return raw, {}, _indexed("row", raw)
    if not isinstance(raw, dict):
        raise Rejection("malformed_row", f"a row is a {type(raw).__name__}, not an object")
    value = raw.get(columns.messages)
    if isinstance(value, list):
        return value, raw, _indexed(columns.messages, value)
    value = raw.get(columns.conversations)
    if isinstance(value, list) and all(isinstance(m, dict) and "role" in m for m in value):
        return value, raw, _indexed(columns.conversations, value)
    nested = raw.get("answer_generation")
    if isinstance(nested, dict) and isinstance(nested.get("train_messages"), list):
        return _toolbench(nested)
    if holds_prompt_completion(raw):
        return (prompt_completion(raw), {k: v for k, v in raw.items() if k not in PROMPT_COMPLETION},
                _indexed("prompt", raw["prompt"]) + _indexed("completion", raw["completion"]))
    keys = message_keys(raw, columns)
    if len(keys) == 1:
        key = keys[0]
        answer = answer_column(raw, key)
        if answer is not None:
            return (raw[key] + [{"role": "assistant", "content": raw[answer]}],
                    {k: v for k, v in raw.items() if k not in (key, answer)}, _indexed(key, raw[key]) + [answer])
        return raw[key], {k: v for k, v in raw.items() if k != key}, _indexed(key, raw[key])
    if len(keys) > 1:
        raise Rejection("malformed_row", f"the row holds role-bearing message lists under {quoted(keys[0])} and "
                        f"{quoted(keys[1])}: which conversation is meant is unclear; map one with columns: {{messages: KEY}}")
    raise Rejection("malformed_row", no_list_message(columns.messages, raw))


PROMPT_COMPLETION = ("prompt", "completion")
# A conversation under a prompt-side key whose answer is text in its partner column: NVIDIA's
# Llama-Nemotron post-training sets (``input`` messages, ``output`` text), and the flat pairs
# (flat.KNOWN_COLUMNS) with their prompt as a message list. Without this the answer was dropped unsaid.
ANSWER_PARTNERS: dict[str, tuple[str, ...]] = {
    "input": ("output",),
    "prompt": ("completion", "response"),
    "question": ("answer",),
    "query": ("response",),
    "problem": ("solution",),
}


def answer_column(raw: dict, key: str) -> str | None:
    """The column holding the text answer to the conversation under ``key`` (``ANSWER_PARTNERS``), or
    None where there is no such column (absent or null). Raises a Rejection where the answer cannot
    follow the conversation: a partner that is not text, two partners, or a conversation that already
    ends with an assistant turn (which of the two answers is meant cannot be told).

    >>> answer_column({"input": [{"role": "user", "content": "hi"}], "output": "Hello"}, "input")
    'output'
    """
    found = [name for name in ANSWER_PARTNERS.get(key, ()) if raw.get(name) is not None]
    if not found:
        return None
    if len(found) > 1:
        raise Rejection("malformed_row", f"the conversation under {quoted(key)} has two answer columns, "
                        f"{quoted(found[0])} and {quoted(found[1])}: which one the row means cannot be told")
    name = found[0]
    if not isinstance(raw[name], str):
        raise Rejection("malformed_row", f"{name}: the answer to the conversation under {quoted(key)} is a "
                        f"{type(raw[name]).__name__}, not text")
    role = raw[key][-1].get("role")
    if isinstance(role, str) and ROLE_ALIASES.get(role.lower()) == "assistant":
        raise Rejection("malformed_row", f"{key}[{len(raw[key]) - 1}] is an assistant turn and {quoted(name)} holds "
                        "another answer: which one the row means cannot be told")
    return name


def _role_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) and "role" in m for m in value)


def holds_prompt_completion(raw: Any) -> bool:
    """TRL's conversational prompt-completion row: ``prompt`` and ``completion``, each a list of messages."""
    return isinstance(raw, dict) and all(_role_list(raw.get(key)) for key in PROMPT_COMPLETION)


def prompt_completion(raw: dict) -> list[dict]:
    """The conversation of a prompt-completion row: the prompt, then the completion. As in TRL (its
    completion-only loss), only the completion trains: an assistant turn of the prompt is context
    (weight 0) unless it carries a loss flag of its own.

    >>> prompt_completion({"prompt": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
    ...                    "completion": [{"role": "assistant", "content": "b"}]})[1]
    {'role': 'assistant', 'content': 'a', 'weight': 0}
    """
    context = [{**m, "weight": 0} if m.get("role") == "assistant" and not any(f in m for f in LOSS_FLAGS) else m
               for m in raw["prompt"]]
    return context + list(raw["completion"])


def message_keys(raw: dict, columns: ColumnMap) -> list[str]:
    """The keys, other than the mapped message and conversation columns, whose value is a non-empty
    list of role-bearing messages (objects with a ``role``): where a trajectory keeps its turns.

    >>> message_keys({"task_id": 3, "traj": [{"role": "user", "content": "hi"}], "info": {}}, ColumnMap())
    ['traj']
    """
    known = (columns.messages, columns.conversations)
    return [k for k, v in raw.items() if k not in known and isinstance(v, list) and v
            and all(isinstance(m, dict) and "role" in m for m in v)]


def messages_key_note(raw: Any, columns: ColumnMap) -> str | None:
    """The ``meta.notes`` key that says a row's messages were read from another key (``messages_key:traj``)."""
    if not isinstance(raw, dict) or isinstance(raw.get(columns.messages), list):
        return None
    if isinstance(raw.get(columns.conversations), list) or isinstance(raw.get("answer_generation"), dict):
        return None
    if holds_prompt_completion(raw):
        return "messages_key:prompt+completion"
    keys = message_keys(raw, columns)
    if len(keys) != 1:
        return None
    answer = answer_column(raw, keys[0])
    return f"messages_key:{keys[0]}" if answer is None else f"messages_key:{keys[0]}+{answer}"



def no_list_message(key: str, raw: dict) -> str:
    """Why a row has no conversation: the key looked for, the keys found, and the option to map them."""
    if key in raw and raw[key] is not None:  # present but not a list: "keys found: 'messages'" misled
        value = raw[key]
        shown = f"the text {quoted(value, 60)}" if isinstance(value, str) \
            else f"{'an' if type(value).__name__[0] in 'aeiou' else 'a'} {type(value).__name__}"
        hint = ("; it looks like JSON text of a list: write the list itself into the row"
                if isinstance(value, str) and value.lstrip().startswith("[") else "")
        return f"{key!r} is {shown}, not a list of messages{hint}"
    found = ", ".join(quoted(k, KEY_CHARS) for k in list(raw)[:12]) or "none"
    flat = sum(isinstance(v, str) for v in raw.values()) >= 2  # a prompt and an answer column, unmapped
    wrapped = _wrapped_rows(raw)
    if wrapped is not None:  # a file that is one object holding its rows: datasets reads it as one row too
        name, count = wrapped
        return (f"no {key!r} list in the row: its {name!r} holds {count} rows (a file that is one JSON object "
                f"wrapping its rows, read as one row, as datasets reads it without field: {name}); write the "
                f"rows out one a line (jq -c '.{name}[]' FILE > rows.jsonl), or in a dataset repository's "
                f"README.md config add field: {name}")
    return (f"no {key!r} list in the row (keys found: {found}); if the conversation is under another "
            f"key, map it with the convert option columns: {{messages: KEY}} (or conversations: KEY)"
            + ("; a flat row of text columns names its prompt and answer columns: columns: {prompt: COLUMN, "
               "answer: COLUMN} (--columns prompt=COLUMN answer=COLUMN)" if flat else ""))


# The keys whose list is a conversation in a row of a known format: a list of dicts holding one of
# these is a list of rows, not of messages.
_ROW_KEYS = ("messages", "conversations", "contents", "chat", "traj")


def _wrapped_rows(raw: dict) -> tuple[str, int] | None:
    """``(key, count)`` when one value of ``raw`` is a list of rows (``{"version": 1, "data": [{"messages":
    ...}, ...]}``: how SQuAD-style files and some exports wrap their rows), else None."""
    for name, value in raw.items():
        if isinstance(value, list) and value and all(
                isinstance(item, dict) and any(isinstance(item.get(k), (list, str)) for k in _ROW_KEYS)
                for item in value[:8]):
            return str(name), len(value)
    return None


def _toolbench(nested: dict) -> tuple[list, dict, list[str]]:
    copies = nested["train_messages"]
    if not copies or not all(isinstance(c, list) for c in copies):
        raise Rejection("malformed_row", "answer_generation.train_messages is not a list of message lists")
    at = max(range(len(copies)), key=lambda k: len(copies[k]))  # the first longest, as max() picks
    longest = copies[at]
    if any(longest[: len(c)] != c for c in copies):
        raise Rejection(
            "ambiguous_conversation", "answer_generation.train_messages are not prefixes of one conversation"
        )
    return longest, {"functions": nested.get("function")}, _indexed(f"answer_generation.train_messages[{at}]", longest)


def row_tools(row: dict, columns: ColumnMap) -> list[dict]:
    return merge_tools(
        normalize_tools(row.get(columns.tools), columns.tools),
        normalize_tools(row.get("functions"), "functions"),
    )


def read_messages(messages: list, places: list[str] | None = None) -> tuple[list[dict], list[dict]]:
    """Draft messages (see assemble.py) and the tools declared on system messages. ``places``: each
    message's name in the source (``messages[i]`` without it), named in every rejection."""
    drafts: list[dict] = []
    prompt_tools: list[dict] = []
    for i, msg in enumerate(messages):
        where = places[i] if places is not None else f"messages[{i}]"
        since = len(drafts)
        role = _read_message(msg, where, drafts)
        place_drafts(drafts, since, where)
        if role in ("system", "developer"):
            prompt_tools = merge_tools(
                prompt_tools,
                normalize_tools(msg.get("tools"), f"{where}.tools"),
                normalize_tools(msg.get("functions"), f"{where}.functions"),
            )
    return drafts, prompt_tools


def _read_message(msg: Any, where: str, drafts: list[dict]) -> str:
    """Read one message onto ``drafts`` (a call turn may join the draft before it); its role."""
    if not isinstance(msg, dict):
        raise Rejection("malformed_row", f"{where} is not an object")
    if "role" not in msg:
        raise Rejection("malformed_row", f"{where} has no role (keys: {', '.join(map(repr, msg)) or 'none'})")
    role = canonical_role(msg["role"], where)
    if role == "assistant":
        drafts.append({**read_assistant(msg, where), **_dropped(msg)})
    elif role == "call":
        add_call_turn(drafts, read_call_value(msg.get("content"), where), read_reasoning_fields(msg, where),
                      read_weight(msg, where), where)
    elif role == "tool":
        check_untrained_weight(msg, where, role)
        drafts.append(read_tool_result(msg, where))
    else:
        check_untrained_weight(msg, where, role)
        text, _, _, _ = read_content(msg.get("content"), where, role=role)
        declares = role in ("system", "developer") and (msg.get("tools") or msg.get("functions"))
        if text is None and not declares:
            raise missing_content(msg, where, role)
        drafts.append({"role": role, "content": text, **_dropped(msg)})
    return role


def _dropped(msg: dict) -> dict:
    """A participant's ``name`` (multi-party chats, few-shot "example_user"): Beam's template renders no
    name, so it is dropped and counted (``name_dropped`` in meta.notes and the summary), not lost unsaid."""
    name = msg.get("name")
    return {DROPPED: ("name",)} if isinstance(name, str) and name.strip() else {}


def read_assistant(msg: dict, where: str) -> dict:
    text, reasoning_parts, part_calls, late = read_content(msg.get("content"), where, role="assistant")
    refusal = msg.get("refusal")
    if isinstance(refusal, str) and refusal.strip() and not text:
        # OpenAI's refusal: the model's answer, written in ``refusal`` with ``content`` null. Never
        # dropped for ``empty_assistant`` ("neither an answer nor a tool call") when it is the answer.
        text = refusal
    carriers = read_reasoning_fields(msg, where) + [("reasoning part", "".join(reasoning_parts))]
    calls = read_calls(msg, where, part_calls)
    return {
        "role": "assistant",
        "content": text,
        "text_after_calls": late,
        "reasoning": carriers,
        "tool_calls": calls,
        "weight": read_weight(msg, where),
    }


def read_calls(msg: dict, where: str, part_calls: list) -> list[dict]:
    """The turn's calls from ``tool_calls``, ``tool_call`` parts, ``function_call`` or ``function_calls``."""
    raw_calls = read_tool_calls(msg.get("tool_calls"), where)
    calls = [parse_tool_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(raw_calls)]
    parts = [
        parse_tool_call(
            parse_json_text(c, f"{where}.content tool_call") if isinstance(c, str) else c,
            f"{where}.content tool_call",
        )
        for c in part_calls
    ]
    if calls and parts:
        raise Rejection("conflicting_tool_calls", f"{where} has tool_calls and tool_call parts")
    calls = calls or parts
    legacy = msg.get("function_call")
    if legacy is not None:
        if calls:
            raise Rejection("conflicting_tool_calls", f"{where} has both tool_calls and function_call")
        calls = [parse_tool_call(legacy, f"{where}.function_call")]
    xml = msg.get("function_calls")
    if xml is not None:
        if not isinstance(xml, str):
            raise Rejection("malformed_row", f"{where}.function_calls is not a string")
        parsed = parse_xml_function_calls(xml, f"{where}.function_calls")
        if not calls:
            calls = parsed
        elif not same_calls(calls, parsed):
            raise Rejection("conflicting_tool_calls", f"{where}: function_calls and tool_calls differ")
    return calls


def read_tool_result(msg: dict, where: str) -> dict:
    text = read_result_content(msg.get("content"), where)
    if "content" not in msg:  # an explicit null is an empty result; no key at all is a mistake
        raise missing_content(msg, where, "tool")
    draft: dict[str, Any] = {"role": "tool", "content": text or ""}
    call_id = msg.get("tool_call_id")
    ids = msg.get("tool_call_ids")
    if ids is not None:
        if not isinstance(ids, list):
            raise Rejection("malformed_row", f"{where}.tool_call_ids is not a list")
        if len(ids) > 1:
            raise Rejection("tool_result_unmatched", f"{where} answers {len(ids)} calls in one message")
        if ids and call_id is None:
            call_id = ids[0]
    if isinstance(call_id, int) and not isinstance(call_id, bool):
        call_id = str(call_id)
    if call_id is not None:
        if not isinstance(call_id, str):
            raise Rejection("malformed_row", f"{where}.tool_call_id is not a string")
        if call_id:
            draft["tool_call_id"] = call_id
    name = msg.get("name")
    if name is not None:
        if not isinstance(name, str):
            raise Rejection("malformed_row", f"{where}.name is not a string")
        if name:
            draft["name"] = name
    status = msg.get("status")
    if status is not None and status != "success":
        # Bedrock's toolResult.status "error" (carried here by its reader): the template has no place
        # for it, so the result's text goes on alone, counted (status_dropped), never dropped unsaid
        draft[DROPPED] = ("status",)
    return draft
