"""Harmony transcripts (Beam's, or gpt-oss's) -> BeamRow.

A row is a transcript string, a ``text`` column, or a row whose only value is a string; a
``tools`` column, when present, gives the tools (else they are read back from the TypeScript
declarations, see harmony_tools.py), and a ``system`` column is the system prompt as beside any
message list (``assemble.add_system_column``: put first, not written twice). The transcript is split into messages with
``beam_sft.harmony.response.split_harmony_messages``; a trailing generation prompt
(``<|start|>assistant``) is ignored.

- ``system``: the Beam system block gives ``model_identity`` (unless it is Beam's or gpt-oss's
  default line),
  ``reasoning_effort`` (``Reasoning effort: N``, or gpt-oss's ``Reasoning: high``) and built-in
  tools; it is template output, not a system message.
- ``developer``: ``# Instructions`` becomes the system message, ``# Tools`` the tools (the last
  ``# Tools`` that declares one: a ``# Tools`` line in the instructions is their text).
- Assistant turns (consecutive assistant messages): a Beam turn is read by the response parser,
  ``parse_assistant_turn(turn, tools)``, so it comes back exactly as Beam would parse its own
  output (argument values cast to the tools' schema types). A gpt-oss turn (``commentary``
  channel, ``functions.`` recipients, JSON arguments) is read by the small reader below:
  ``analysis`` is reasoning, ``final`` the answer, a ``commentary`` message without recipient (a
  preamble) is appended to the reasoning, calls keep their JSON arguments.
- ``NAME to=assistant`` messages are tool results named ``NAME`` (``functions.`` dropped).

Call ids do not exist in Harmony; calls get ``call_<n>`` and results are matched by position.
"""

from __future__ import annotations

from typing import Any

from beam_sft.convert.assemble import PLACE, add_system_column, finish_row
from beam_sft.convert.harmony_tools import parse_typescript_tools
from beam_sft.convert.options import ConvertOptions
from beam_sft.convert.parts import reject_media
from beam_sft.convert.rows import BeamRow, Rejection
from beam_sft.convert.tools import merge_tools, normalize_tools, parse_arguments
from beam_sft.harmony import markers
from beam_sft.harmony.response import HarmonyMessage, parse_assistant_turn, split_harmony_messages
from beam_sft.visible import quoted

_GENERATION_PROMPT = markers.START + "assistant"
_INSTRUCTIONS = "# Instructions\n\n"
_TOOLS = "# Tools\n\n"
_GPT_OSS_EFFORT = "Reasoning: "
# Identity lines that are a template's default, not a choice of the data: not carried over.
_DEFAULT_IDENTITIES = (
    markers.DEFAULT_MODEL_IDENTITY,
    "You are ChatGPT, a large language model trained by OpenAI.",
)


def convert_harmony(raw: Any, *, options: ConvertOptions) -> BeamRow | Rejection:
    """One Harmony transcript -> a BeamRow (without ``meta``) or a Rejection; never raises.

    >>> convert_harmony("<|start|>user<|message|>2+2?<|end|>"
    ...     "<|start|>assistant<|channel|>analysis<|message|>Add.<|end|>"
    ...     "<|start|>assistant<|channel|>final<|message|>4<|return|>", options=ConvertOptions())
    {'messages': [{'role': 'user', 'content': '2+2?'}, {'role': 'assistant', 'reasoning_content': 'Add.', 'content': '4'}]}
    """
    try:
        reject_media(raw)
        text, given_tools, system = _read_row(raw, options)
        if text.endswith(_GENERATION_PROMPT):
            text = text[: -len(_GENERATION_PROMPT)]
        try:
            messages = split_harmony_messages(text)
        except Rejection as exc:
            raise Rejection("harmony_malformed", str(exc)) from None
        return _convert(messages, given_tools, options, system)
    except Rejection as exc:
        return exc


def _read_row(raw: Any, options: ConvertOptions) -> tuple[str, list[dict] | None, Any]:
    """``(transcript, the tools column's tools or None, the system column's value or None)``."""
    if isinstance(raw, str):
        return raw, None, None
    if isinstance(raw, dict):
        text = raw.get(options.columns.text)
        if not isinstance(text, str):  # a row whose only value is the transcript: no other column
            values = [v for v in raw.values() if isinstance(v, str)]
            if len(raw) == 1 and values:
                return values[0], None, None
        if isinstance(text, str):
            tools = raw.get(options.columns.tools)
            return (text, normalize_tools(tools, options.columns.tools) if tools is not None else None,
                    raw.get(options.columns.system))
    raise Rejection(
        "malformed_row",
        f"no Harmony transcript in the row (expected a string or a {options.columns.text!r} column)",
    )


def _convert(
    messages: list[HarmonyMessage], given_tools: list[dict] | None, options: ConvertOptions, system: Any = None
) -> BeamRow:
    kwargs: dict[str, Any] = {}
    declared: list[dict] = []
    drafts: list[dict] = []
    turn: list[HarmonyMessage] = []
    first = 0  # the index in the transcript of the turn's first message

    def flush() -> None:
        if turn:
            where = message_place(first, first + len(turn) - 1)
            draft = _assistant(turn, given_tools if given_tools is not None else declared, where)
            drafts.append({**draft, PLACE: where})
            turn.clear()

    for k, msg in enumerate(messages):
        where = message_place(k)
        if msg.author == "assistant":
            first = first if turn else k
            turn.append(msg)
            continue
        flush()
        if msg.author == "system":
            declared = merge_tools(declared, _read_system(msg.body, kwargs))
        elif msg.author == "developer":
            instructions, tools = _read_developer(msg.body)
            declared = merge_tools(declared, tools)
            if instructions:
                drafts.append({"role": "system", "content": instructions, PLACE: where})
        elif msg.author == "user":
            drafts.append({"role": "user", "content": msg.body, PLACE: where})
        elif msg.recipient == "assistant":
            drafts.append({"role": "tool", "name": _bare(msg.author), "content": msg.body, PLACE: where})
        else:
            raise Rejection("harmony_malformed", f"{where}: a message from {quoted(msg.author)} to {quoted(msg.recipient)}")
    flush()
    add_system_column(drafts, system, options.columns.system)  # (it was dropped unsaid)
    return finish_row(
        drafts,
        tools=given_tools if given_tools is not None else declared,
        kwargs=kwargs or None,
        options=options,
    )


def message_place(first: int, last: int | None = None) -> str:
    """How a rejection names messages of the transcript: by their index in it (from 0, each
    ``<|start|>`` one message), as the source holds them (an assistant turn is several).

    >>> message_place(3), message_place(4, 6), message_place(4, 4)
    ('transcript message 3', 'transcript messages 4..6', 'transcript message 4')
    """
    return f"transcript message {first}" if last is None or last == first else f"transcript messages {first}..{last}"


def _read_system(body: str, kwargs: dict) -> list[dict]:
    first, _, rest = body.partition("\n")
    if first and first not in _DEFAULT_IDENTITIES and not first.startswith(("Knowledge cutoff", "Reasoning")):
        kwargs["model_identity"] = first
    tools: list[dict] = []
    for line in body.split("\n"):
        if line.startswith("Reasoning effort: "):
            value = line[len("Reasoning effort: ") :].strip()
            kwargs["reasoning_effort"] = int(value) if value.lstrip("-").isdigit() else value
        elif line.startswith(_GPT_OSS_EFFORT):
            kwargs["reasoning_effort"] = line[len(_GPT_OSS_EFFORT) :].strip()
    if _TOOLS in body:
        tools = parse_typescript_tools(body[body.index(_TOOLS) :])
        builtin = [t["function"]["name"] for t in tools if t["function"]["name"] in ("search", "browse")]
        if builtin:
            kwargs["builtin_tools"] = builtin
    return tools


def _read_developer(body: str) -> tuple[str, list[dict]]:
    r"""``# Instructions`` and ``# Tools`` of a developer message.

    The template writes the tools section last, and within it every description line behind
    ``// ``, so the section's header is the last ``# Tools`` that declares a tool. Instructions are
    the user's text and may hold a ``# Tools`` line of their own: one that declares nothing is
    instructions, not a section (cutting there would garble them and drop what follows).

    >>> _read_developer("# Instructions\n\n# Tools\n\nbe brief")
    ('# Tools\n\nbe brief', [])
    >>> instructions, tools = _read_developer("# Instructions\n\na\n\n# Tools\n\nb\n\n# Tools\n\ntype f = (_: any) => any;")
    >>> instructions, [t["function"]["name"] for t in tools]
    ('a\n\n# Tools\n\nb', ['f'])
    """
    starts = [0] if body.startswith(_TOOLS) else []
    at = body.find("\n\n" + _TOOLS)
    while at >= 0:
        starts.append(at + 2)
        at = body.find("\n\n" + _TOOLS, at + 1)
    instructions, tools = body, []
    for start in reversed(starts):
        tools = parse_typescript_tools(body[start:])
        if tools:
            instructions = body[: max(0, start - 2)]
            break
    if instructions.startswith(_INSTRUCTIONS):
        instructions = instructions[len(_INSTRUCTIONS) :]
    return instructions, tools


def _bare(name: str) -> str:
    return name[len("functions.") :] if name.startswith("functions.") else name


def _is_gpt_oss(turn: list[HarmonyMessage]) -> bool:
    return any(
        m.channel == "commentary" or (m.recipient or "").startswith("functions.") or m.constrain == "json"
        for m in turn
    )


def _assistant(turn: list[HarmonyMessage], tools: list[dict], where: str) -> dict:
    if _is_gpt_oss(turn):
        return _gpt_oss_turn(turn, where)
    text = "".join(markers.START + m.header + markers.MESSAGE + m.body + m.end for m in turn)
    text = text[len(_GENERATION_PROMPT) :]
    try:
        parsed = parse_assistant_turn(text, tools or None, check_response_template=False)
    except Rejection as exc:  # its own code kept (harmony_malformed_turn, ..._arguments): the table counts them
        raise Rejection(exc.code, f"{where}: {exc.message}") from None
    return {
        "role": "assistant",
        "content": parsed.get("content"),
        "reasoning": [("analysis", parsed["thinking"])],
        "tool_calls": [{"type": "function", "function": c["function"]} for c in parsed.get("tool_calls", [])],
        "weight": None,
    }


def _gpt_oss_turn(turn: list[HarmonyMessage], where: str) -> dict:
    reasoning: list[str] = []
    content = None
    calls = []
    for msg in turn:
        if msg.recipient:
            if msg.constrain not in (None, "json"):
                raise Rejection(
                    "harmony_malformed", f"{where}: arguments constrained to {quoted(msg.constrain)}"
                )
            args = parse_arguments(msg.body, f"{where} call to {msg.recipient}")
            calls.append({"type": "function", "function": {"name": _bare(msg.recipient), "arguments": args}})
        elif msg.channel in ("analysis", "commentary"):
            reasoning.append(msg.body)
        elif msg.channel == "final":
            content = msg.body
        else:
            raise Rejection("harmony_malformed", f"{where}: channel {quoted(msg.channel)}")
    joined = "\n\n".join(r.strip() for r in reasoning if r.strip())
    return {
        "role": "assistant",
        "content": content,
        "reasoning": [("analysis", joined)],
        "tool_calls": calls,
        "weight": None,
    }
