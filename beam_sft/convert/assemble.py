"""The steps every converter shares once it has read its format into draft messages.

A draft is a BeamRow message plus, on assistant turns, ``reasoning`` (a list of ``(carrier, text)``
pairs still to be merged). ``finish_row`` then, in order:

0. with ``pythonic_tool_calls``, reads an assistant text that ends in ``[name(arg=value)]`` as
   those calls (convert/pythonic.py), the text before them said before the calls;
1. takes a ``<tools>`` block out of the leading system prompt(s) (``system_tools``); a system
   message that held nothing else is dropped (its content is now the row's ``tools``); Llama 3.1's
   template's function block likewise out of a leading system prompt or the first user turn
   (``tools.extract_llama_tools``), in every reader;
2. settles each assistant turn's reasoning (fields, parts, inline tags anywhere in the text: see
   reasoning.py), strips ``<answer>`` tags, and applies ``tool_call_content`` to text said before
   the calls (kept in its order with the reasoning blocks) and ``text_after_tool_call`` to text
   said after the first call (never moved before it: rejected, or dropped and noted in
   ``meta.notes``);
3. splits a tool message that holds a JSON list of ``{tool_call_id?, name?, content}`` results
   (LLaMA-Factory's parallel results), or of two or more ``{name, results}`` (ToolACE's), into one
   message per result;
4. gives every call without an id the id ``call_<n>`` (n counts the row's calls from 0), and
   names a tool result from the call at its position when the result has neither name nor id, or
   when its id is reused so that the template would resolve it to a different call. A result
   whose id matches no call at all, answering a call that had no id in the source, takes that
   call's new id (LLaMA-Factory writes result ids for id-less calls; position is the only link),
   and so does a result that only names the call at its position.

Tool results are never reordered or re-matched here: validate.py checks that they follow their
calls in order, by position, as Beam reads them.

Every message named in a rejection is named by the source's own entry (``conversations[3]``,
``contents[2].parts[1]``, a flat row's column), not by its index in the converted row, which a
system column, a merged call turn or a split result shifts: each reader puts that name on its
drafts (``PLACE``), a merged turn names both entries (``conversations[2..3]``), and ``finish_row``
hands the names on (``meta.places``, when ``options.message_places`` asks) for validate.py's messages.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from beam_sft.convert.literals import RepeatedKey, TooSmall
from beam_sft.convert.options import ColumnMap, ConvertOptions
from beam_sft.convert.parts import reject_media, result_text
from beam_sft.convert.pythonic import parse_pythonic_calls
from beam_sft.convert.reasoning import merge_reasoning, read_inline, split_inline_reasoning, strip_answer_tags
from beam_sft.convert.rows import BeamRow, Rejection
from beam_sft.convert.tools import (
    extract_llama_tools,
    extract_system_tools,
    maybe_json,
    merge_tools,
    parse_json_text,
    parse_tool_call,
)
from beam_sft.visible import quoted

_ENVELOPE_KEYS = frozenset({"tool_call_id", "name", "content"})

# A converter's reader: one raw row -> (draft messages, tools, template kwargs), or it raises a Rejection.
RowReader = Callable[[Any, ColumnMap], tuple[list[dict], list[dict], dict | None]]


def convert_with(read_row: RowReader, raw: Any, *, options: ConvertOptions) -> BeamRow | Rejection:
    """``read_row`` then ``finish_row``: a BeamRow (without ``meta``) or the Rejection it raised."""
    try:
        reject_media(raw)
        drafts, tools, kwargs = read_row(raw, options.columns)
        return finish_row(drafts, tools=tools, kwargs=kwargs, options=options)
    except Rejection as exc:
        return exc


def missing_content(msg: dict, where: str, role: str) -> Rejection:
    """A user/system/tool message whose text is null or absent (a misspelled key included)."""
    keys = ", ".join(repr(k) for k in msg) or "none"
    return Rejection("missing_content", f"{where} ({role}) has no content (keys: {keys})")


def read_call_value(value: Any, where: str) -> list[dict]:
    """The calls of a call turn (ShareGPT ``function_call``): a JSON string or object, or a list."""
    if isinstance(value, str):
        value = parse_json_text(value, where)
    items = value if isinstance(value, list) else [value]
    if not items:
        raise Rejection("malformed_tool_call", f"{where} holds no call")
    return [
        parse_tool_call(c, f"{where}[{j}]" if isinstance(value, list) else where) for j, c in enumerate(items)
    ]


def add_call_turn(drafts: list[dict], calls: list[dict], reasoning: list, weight: int | None, where: str) -> None:
    """Calls join the assistant draft just before them (the same speaker said the text and made
    the calls), else start a new assistant draft."""
    last = drafts[-1] if drafts else None
    if last is not None and last["role"] == "assistant" and not last.get("text_after_calls"):
        if weight is not None and last["weight"] is not None and weight != last["weight"]:
            raise Rejection("bad_weight", f"{joined_place(place_of(last, len(drafts) - 1), where)}: the call "
                            "and the text of one turn have different weights")
        last["tool_calls"] = last["tool_calls"] + calls
        last["reasoning"] = last["reasoning"] + reasoning
        last["weight"] = last["weight"] if last["weight"] is not None else weight
        last[PLACE] = joined_place(place_of(last, len(drafts) - 1), where)
    else:
        drafts.append({"role": "assistant", "content": None, "reasoning": reasoning, "tool_calls": calls,
                       "weight": weight, PLACE: where})


def place_drafts(drafts: list[dict], since: int, where: str) -> None:
    """Name ``where`` on the drafts a reader appended for one source entry (from index ``since``)
    that do not name their own (a merged call turn names both of its entries already)."""
    for draft in drafts[since:]:
        draft.setdefault(PLACE, where)


def place_of(draft: dict, i: int) -> str:
    """The source entry a draft was read from; a draft no reader named, by its index (a bug's fallback)."""
    return draft.get(PLACE) or f"messages[{i}]"


_INDEXED = re.compile(r"(?P<key>.*)\[(?P<first>\d+)(?:\.\.(?P<last>\d+))?\]")


def joined_place(first: str, then: str) -> str:
    """The name of one turn read from two source entries: a run of one list's entries as a range.

    >>> joined_place("conversations[2]", "conversations[3]"), joined_place("conversations[2..3]", "conversations[4]")
    ('conversations[2..3]', 'conversations[2..4]')
    >>> joined_place("system", "conversations[0]")
    'system + conversations[0]'
    """
    a, b = _INDEXED.fullmatch(first), _INDEXED.fullmatch(then)
    if a and b and a["key"] == b["key"] and b["last"] is None and int(b["first"]) == int(a["last"] or a["first"]) + 1:
        return f"{a['key']}[{a['first']}..{b['first']}]"
    return f"{first} + {then}"


def finish_row(
    drafts: list[dict], *, tools: list[dict], kwargs: dict | None, options: ConvertOptions
) -> BeamRow:
    """Drafts -> a BeamRow without ``meta`` (the pipeline adds it).

    >>> finish_row([{"role": "user", "content": "2+2?"},
    ...             {"role": "assistant", "content": "<think>Add.</think> 4", "reasoning": [], "tool_calls": []}],
    ...            tools=[], kwargs=None, options=ConvertOptions())
    {'messages': [{'role': 'user', 'content': '2+2?'}, {'role': 'assistant', 'reasoning_content': 'Add.', 'content': '4'}]}
    """
    if not drafts:
        raise Rejection("malformed_row", "the conversation has no messages")
    prompt_tools: list[dict] = []
    messages: list[dict] = []
    notes: dict[str, int] = {}
    origins: dict[int, str] = {}  # message index -> where its reasoning came from, when not a field
    places: list[str] = []  # message index -> the source entry it was read from
    leading = True
    called: set[str] = set()  # the names the assistant turns so far call (an envelope may name them)
    for i, draft in enumerate(drafts):
        role = draft["role"]
        where = place_of(draft, i)
        for field in draft.get(DROPPED, ()):  # what Beam's template has no place for, counted, never silent
            notes[f"{field}_dropped"] = notes.get(f"{field}_dropped", 0) + 1
        opening = leading  # only system turns before this one
        leading = leading and role in ("system", "developer")
        if options.system_tools and (leading or (opening and role == "user")) and isinstance(draft["content"], str):
            # Llama 3.1's template declares the tools in a system turn or the first user turn
            text, found = extract_llama_tools(draft["content"], role, where)
            prompt_tools.extend(found)
            draft = {**draft, "content": text}
        if leading and options.system_tools and draft["content"]:
            text, found = extract_system_tools(draft["content"], where)
            if found and not text:
                prompt_tools.extend(found)
                continue  # the message held only the tools block, which is now the row's tools
            prompt_tools.extend(found)
            draft = {**draft, "content": text}
        if role == "assistant":
            if options.pythonic_tool_calls:
                try:
                    draft = _pythonic(draft)
                except RepeatedKey:
                    raise Rejection("duplicate_key", f"{where}: a key appears twice in one dict of "
                                    "its pythonic tool call") from None
                except TooSmall as exc:
                    raise Rejection("non_standard_number", f"{where}: its pythonic tool call: {exc}") from None
            try:
                message, origin = _finish_assistant(draft, where, options, notes)
            except Rejection as exc:  # reasoning.py's readers see a text, not the turn: the turn is named here
                if exc.message.startswith(where):
                    raise
                raise Rejection(exc.code, f"{where}: {exc.message}") from None
            if origin != "data":
                origins[len(messages)] = origin
            messages.append(message)
            called.update(c["function"]["name"] for c in message.get("tool_calls") or ())
        elif role == "tool":
            known = called.union(t["function"]["name"] for t in (*tools, *prompt_tools))
            messages.extend(_split_results(_envelope_or_text(draft, known), known))
        else:
            messages.append({"role": role, "content": draft["content"] or ""})
        places.extend([where] * (len(messages) - len(places)))
    generated = _assign_call_ids(messages)
    _name_results(messages, generated)
    row: BeamRow = {"messages": messages}
    all_tools = merge_tools(tools, prompt_tools)
    if all_tools:
        row["tools"] = all_tools
    if kwargs is not None:
        row["chat_template_kwargs"] = kwargs
    if notes:
        row["meta"] = {"notes": notes}
    if origins and options.reasoning_origins:  # for a fill's provenance (convert_row asks when it has one)
        row.setdefault("meta", {})["reasoning_origins"] = origins
    if options.message_places:  # for validate.py's messages (convert_row asks, and takes them off)
        row.setdefault("meta", {})["places"] = places
    return row


def _pythonic(draft: dict) -> dict:
    """A turn whose text ends in a pythonic call list (convert/pythonic.py) as those calls; the text
    before the list is said before the calls. Every other turn as it is."""
    content = draft.get("content")
    if draft.get("tool_calls") or not isinstance(content, str):
        return draft
    parsed = parse_pythonic_calls(content)
    if parsed is None:
        return draft
    said, calls = parsed
    return {**draft, "content": said if said.strip() else None, "tool_calls": calls}


def _finish_assistant(draft: dict, where: str, options: ConvertOptions, notes: dict[str, int]) -> tuple[dict, str]:
    """The assistant message, and where its reasoning came from: ``data`` (a field or a reasoning
    part), ``inline_tags`` (<think> blocks in the text) or ``text_before_calls`` (what a tool-call
    turn said before its calls)."""
    carriers = list(draft.get("reasoning") or [])
    origin = "data" if merge_reasoning(carriers) is not None else None
    content = draft.get("content")
    calls = draft.get("tool_calls") or []
    late = draft.get("text_after_calls")
    if late is not None and late.strip():
        if not calls:  # text after calls that were not read as calls: a reader bug, never trained
            raise Rejection("tool_call_markup_in_text", f"{where} has text after calls it does not hold")
        if options.text_after_tool_call == "reject":
            raise Rejection("text_after_tool_call", f"{where} has text after its tool call(s): {quoted(late.strip(), 60)}")
        notes["text_after_tool_call_dropped"] = notes.get("text_after_tool_call_dropped", 0) + 1
    said_before_calls: str | None = None
    if content and calls:
        inline = read_inline(content)
        carriers.append(("inline tag", inline.blocks()))
        said_before_calls = inline.text()
        if origin is None:
            origin = "inline_tags" if inline.blocks() is not None else "text_before_calls"
        if said_before_calls is not None and options.tool_call_content == "reject":
            raise Rejection("content_with_tool_calls", f"{where} has text beside its tool calls")
        explicit = merge_reasoning(carriers[:-1])
        reasoning = merge_reasoning(carriers)
        if said_before_calls is not None:
            # Everything said before the calls is analysis: with no explicit reasoning field, the
            # blocks and the text keep their order; after an explicit field, the text follows it.
            reasoning = f"{explicit}\n\n{said_before_calls}" if explicit else inline.in_order()
        content = None
    else:
        if content:
            inline_reasoning, content = split_inline_reasoning(content)
            if inline_reasoning is not None:
                carriers.append(("inline tag", inline_reasoning))
                origin = origin or "inline_tags"
            if options.strip_answer_tags:
                content = strip_answer_tags(content)
        reasoning = merge_reasoning(carriers)
    out: dict[str, Any] = {"role": "assistant"}
    if reasoning is not None:
        out["reasoning_content"] = reasoning
    if content and not calls:
        out["content"] = content
    if calls:
        out["tool_calls"] = calls
    if draft.get("weight") is not None:
        out["weight"] = draft["weight"]
    return out, (origin or "data")


def _is_envelope(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and "content" in item
        and set(item) <= _ENVELOPE_KEYS
        and any(isinstance(item.get(k), str) and item[k] for k in ("name", "tool_call_id"))
        and all(isinstance(item.get(k, ""), str) for k in ("name", "tool_call_id"))
    )


def parse_envelope(text: str) -> dict | None:
    """A tool message from a JSON envelope ``{"tool_call_id"?, "name"?, "content"}``, else None.

    Text that is not valid JSON, or JSON of another shape, is not an envelope: it stays the
    result's text.

    >>> {k: v for k, v in parse_envelope('{"name": "f", "content": {"t": 20}}').items() if k != ENVELOPE_TEXT}
    {'role': 'tool', 'name': 'f', 'content': '{"t": 20}'}
    >>> parse_envelope('{"tool_call_id": "c1, "content": 1}') is None
    True
    """
    if not text.lstrip().startswith("{"):
        return None
    value = maybe_json(text, "a tool result")
    # the text is kept: an envelope naming no tool of the row is a result that is itself such an object
    return {**unwrap_envelope(value), ENVELOPE_TEXT: text} if _is_envelope(value) else None


ENVELOPE_TEXT = "_envelope_text"  # a draft's key, never a message's: finish_row reads and drops it
# A draft's key: the source fields the message carried that Beam's template has no place for (a
# participant's ``name``); finish_row counts them in the row's notes (meta.notes, the summary's notes).
DROPPED = "_dropped"
# A draft's key: the source entry it was read from (``conversations[3]``), for every message that names it.
PLACE = "_place"


def add_system_column(drafts: list[dict], value: Any, column: str) -> None:
    """A row's system prompt given as a column beside its messages (``system``: ShareGPT's, and the
    OpenAI rows Anthropic-style exports write), put before them; the OpenAI reader dropped it unsaid.
    The same text already opening the conversation as a system message is not written twice.

    >>> drafts = [{"role": "user", "content": "hi"}]
    >>> add_system_column(drafts, "Be brief.", "system"); [d["role"] for d in drafts]
    ['system', 'user']
    >>> add_system_column(drafts, "Be brief.", "system"); [d["role"] for d in drafts]
    ['system', 'user']
    """
    if value is None:
        return
    if not isinstance(value, str):
        raise Rejection("malformed_row", f"{column!r} is not a string")
    if not value:
        return
    if drafts and drafts[0].get("role") == "system" and drafts[0].get("content") == value:
        return
    drafts.insert(0, {"role": "system", "content": value, PLACE: column})


def _envelope_or_text(draft: dict, known: set[str]) -> dict:
    """A tool draft read as an envelope, kept as one only when it carries a call id or names a tool the
    row declares or calls; otherwise the JSON was the tool's own result (``{"name": "README.md",
    "content": "..."}`` from a file reader) and the whole text is the result.

    >>> d = parse_envelope('{"name": "README.md", "content": "# hi"}')
    >>> _envelope_or_text(d, {"read_file"})["content"], _envelope_or_text(d, {"README.md"})["content"]
    ('{"name": "README.md", "content": "# hi"}', '# hi')
    """
    text = draft.get(ENVELOPE_TEXT)
    draft = {k: v for k, v in draft.items() if k != ENVELOPE_TEXT}
    if text is None or draft.get("tool_call_id") or draft.get("name") in known:
        return draft
    return {"role": "tool", "content": text}


def unwrap_envelope(item: dict) -> dict:
    """``{tool_call_id?, name?, content}`` -> a tool message."""
    msg: dict[str, Any] = {"role": "tool"}
    for key in ("tool_call_id", "name"):
        if item.get(key):
            msg[key] = item[key]
    msg["content"] = result_text(item["content"])
    return msg


def _is_named_results(item: Any) -> bool:
    """ToolACE's result of one call among several: ``{"name": NAME, "results": VALUE}``."""
    return isinstance(item, dict) and set(item) == {"name", "results"} and isinstance(item["name"], str) and bool(
        item["name"])


def _split_results(draft: dict, known: set[str]) -> list[dict]:
    content = draft.get("content") or ""
    if "tool_call_id" not in draft and "name" not in draft and content.lstrip().startswith("["):
        items = maybe_json(content, "a tool result")
        if isinstance(items, list) and items and all(_is_envelope(item) and (item.get("tool_call_id")
                                                                             or item.get("name") in known)
                                                     for item in items):
            return [unwrap_envelope(item) for item in items]
        if isinstance(items, list) and len(items) > 1 and all(_is_named_results(item) for item in items):
            # several calls answered in one message (ToolACE): one result each, in the calls' order
            return [{"role": "tool", "name": item["name"], "content": result_text(item["results"])} for item in items]
    msg: dict[str, Any] = {"role": "tool"}
    for key in ("tool_call_id", "name"):
        if draft.get(key) is not None:
            msg[key] = draft[key]
    msg["content"] = content
    return [msg]


def _assign_call_ids(messages: list[dict]) -> set[str]:
    """Ids for calls without one; returns the ids it made up."""
    n = 0
    made: set[str] = set()
    for msg in messages:
        for i, call in enumerate(msg.get("tool_calls") or []):
            if "id" not in call:
                msg["tool_calls"][i] = {"id": f"call_{n}", **call}
                made.add(f"call_{n}")
            n += 1
    return made


def _name_results(messages: list[dict], generated: set[str]) -> None:
    pending: list[dict] = []
    earlier: list[tuple[str, str]] = []  # (id, name) of every call so far, as the template registers them
    all_ids = {c["id"] for m in messages for c in m.get("tool_calls") or []}
    for msg in messages:
        if msg["role"] == "assistant" and msg.get("tool_calls"):
            pending = list(msg["tool_calls"])
            earlier.extend((c["id"], c["function"]["name"]) for c in pending)
        elif msg["role"] == "tool" and pending:
            expected = pending.pop(0)
            name = expected["function"]["name"]
            # The source gave the call no id, and this result an id no call has (LLaMA-Factory
            # writes result ids for id-less calls): the position is the only link, as in Beam.
            if (
                msg.get("tool_call_id") not in all_ids
                and "tool_call_id" in msg
                and expected["id"] in generated
            ):
                msg["tool_call_id"] = expected["id"]
            # A result named like the call at its position, whose id we made up, gets that id.
            if "tool_call_id" not in msg and msg.get("name") == name and expected["id"] in generated:
                content = msg.pop("content")
                del msg["name"]
                msg.update(tool_call_id=expected["id"], name=name, content=content)
            # pop and re-add content so the key order stays role, tool_call_id, name, content
            if "tool_call_id" not in msg and "name" not in msg:
                content = msg.pop("content")
                msg.update(tool_call_id=expected["id"], name=name, content=content)
            elif "name" not in msg and msg["tool_call_id"] == expected["id"]:
                resolved = [n for i, n in earlier if i == msg["tool_call_id"]][-1]
                if resolved != name:
                    content = msg.pop("content")
                    msg.update(name=name, content=content)
        elif msg["role"] != "tool":
            pending = []
