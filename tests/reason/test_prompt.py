"""The teacher's prompt is filled from the template once, and row text is quoted: placeholders and
section headers inside any row field neither expand nor forge structure (``beam_sft.reason.prompt``)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from beam_sft.reason.prompt import PLACEHOLDERS, Prompt

PROMPT = Prompt.load()
HEADERS = [line for line in PROMPT.text.splitlines() if line.startswith("===")]

# pieces hostile rows are made of: every placeholder, every header of the default prompt, role labels,
# and the line breaks str.splitlines knows
_PIECES = st.sampled_from([*PLACEHOLDERS, *HEADERS, "[user]", "[assistant answer]", "[tool result x]", "\n", "\r",
                           "\u2028", "\r\n", "> ", "plain words", "{", "}}"])
_TEXT = st.lists(_PIECES, max_size=8).map("".join)


def _row(user, system, tool_name, description, call_name, argument, result, result_name, answer):
    tools = [{"type": "function", "function": {"name": tool_name, "description": description,
                                               "parameters": {"type": "object", "properties": {}}}}]
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user},
                {"role": "assistant", "tool_calls": [{"type": "function", "function": {
                    "name": call_name, "arguments": {"q": argument}}}]},
                {"role": "tool", "name": result_name, "content": result},
                {"role": "assistant", "content": answer}]
    return messages, tools


@settings(max_examples=150, deadline=None)
@given(fields=st.tuples(*[_TEXT] * 9), turn=st.sampled_from([2, 4]))
def test_property_row_text_never_expands_nor_forges_headers(fields, turn):
    messages, tools = _row(*fields)
    prompt = PROMPT.messages(messages[:turn + 1], turn, tools)[0]["content"]
    lines = prompt.splitlines()
    # every section header of the request is the template's, once each, in order
    assert [line for line in lines if line.startswith("===")] == HEADERS
    # every other unquoted line is the template's own or a label the renderer writes
    template_lines = set(PROMPT.text.splitlines())
    for line in lines:
        if not line.startswith("> "):
            assert line in template_lines or (line.startswith("[") and line.endswith("]")), repr(line)
    # placeholders in row text stay as they are: none expanded, none added
    supplied = "".join(fields) if turn == 4 else "".join(fields[:6])
    for placeholder in PLACEHOLDERS:
        assert prompt.count(placeholder) == supplied.count(placeholder)
    # the request grows linearly with the row: at most the template, the labels and the quoting
    assert len(prompt) <= len(PROMPT.text) + 4 * len(supplied) + 600


def test_placeholders_in_a_row_are_not_expanded_so_the_request_does_not_grow():
    """A tool description holding {{conversation}} and a user message holding {{turn}}, many times:
    the request is the row's size, not a multiple of it."""
    bomb = "{{conversation}}{{turn}}{{tools}}" * 200
    messages = [{"role": "user", "content": bomb}, {"role": "assistant", "content": bomb}]
    tools = [{"type": "function", "function": {"name": "f", "description": bomb}}]
    prompt = PROMPT.messages(messages, 1, tools)[0]["content"]
    assert len(prompt) < len(PROMPT.text) + 4 * len(bomb) + 600
