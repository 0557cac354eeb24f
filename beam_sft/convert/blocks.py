"""Messages of content blocks (Bedrock Converse, Anthropic Messages) -> OpenAI messages: the rules the
block readers share, in one place.

- Encrypted reasoning (Bedrock's ``redactedContent``, Anthropic's ``redacted_thinking``) alone in a
  turn is no reasoning: the block is skipped and the missing-reasoning policy applies, as for the
  Responses API's ``encrypted_content``. Beside readable reasoning in one turn it is
  ``non_text_content``: the text kept would be part of the reasoning, read as the whole of it.
- A message of tool results (sent in a user message by both APIs) is one tool message per result;
  results mixed with any other content are ``tool_response_mixed``. Only a user message carries
  results (a ``tool`` message too, in rows that mix shapes): one in an assistant's or system's message
  is ``malformed_row`` naming the block, never read as a tool message its role would not allow.
- Every other block becomes a content part at its own index (a skipped block leaves ``NO_PART``),
  so the OpenAI reader names each part by its place in the source.

>>> shape = BlockShape(kind=lambda b: b.get("k"), part=lambda b, w: {"type": "text", "text": b["t"]},
...                    result=lambda b, w: {"role": "tool", "content": b["t"]}, result_name="result")
>>> block_message({"role": "user", "content": [{"k": "result", "t": "a"}, {"k": "result", "t": "b"}]}, "m[2]", shape)
[({'role': 'tool', 'content': 'a'}, 'm[2].content[0]'), ({'role': 'tool', 'content': 'b'}, 'm[2].content[1]')]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from beam_sft.convert.parts import NO_PART, canonical_role
from beam_sft.convert.rows import Rejection
from beam_sft.visible import quoted

# What BlockShape.kind says of a block; None: any other block, read by BlockShape.part.
SKIP, REASONING, ENCRYPTED, RESULT = "skip", "reasoning", "encrypted", "result"


@dataclass(frozen=True)
class BlockShape:
    """How one API writes its blocks."""

    kind: Callable[[Any], str | None]  # SKIP (a marker carrying nothing), REASONING, ENCRYPTED, RESULT or None
    part: Callable[[Any, str], Any]  # (block, place) -> an OpenAI content part
    result: Callable[[Any, str], dict]  # (block, place) -> one tool message
    result_name: str  # how the API calls its result blocks, for messages


def block_message(msg: Any, where: str, shape: BlockShape) -> list[tuple[Any, str]]:
    """The OpenAI messages of one block message, each with the entry it was read from (a block is named
    by its index in the message's own ``content``, skipped blocks counted)."""
    if not isinstance(msg, dict) or not isinstance(msg.get("content"), list):
        return [(msg, where)]  # not blocks: the OpenAI reader reads (or rejects) it as it is
    blocks = msg["content"]
    kinds = [shape.kind(b) for b in blocks]
    skipped = {j for j, k in enumerate(kinds) if k == SKIP}
    encrypted = [j for j, k in enumerate(kinds) if k == ENCRYPTED]
    if encrypted:
        readable = [j for j, k in enumerate(kinds) if k == REASONING]
        if readable:
            raise Rejection("non_text_content", f"{where}.content[{encrypted[0]}] is redacted (encrypted) reasoning "
                                                f"beside readable reasoning ({where}.content[{readable[0]}]): "
                                                f"only part of the turn's reasoning can be read")
        skipped |= set(encrypted)  # encrypted only: the turn has no reasoning to read (the missing-reasoning policy)
    kept = [j for j in range(len(blocks)) if j not in skipped]
    results = [j for j in kept if kinds[j] == RESULT]
    if results:
        role = msg.get("role")
        if canonical_role(role, f"{where}.role") not in ("user", "tool"):  # an unknown role: unknown_role
            raise Rejection("malformed_row", f"{where}.content[{results[0]}] is a {shape.result_name} block in a message "
                                             f"of role {quoted(role)}: only a user (or tool) message carries tool results")
        if len(results) != len(kept):
            raise Rejection("tool_response_mixed", f"{where} mixes {shape.result_name} blocks with other content")
        return [(shape.result(blocks[j], f"{where}.content[{j}]"), f"{where}.content[{j}]") for j in results]
    parts = [NO_PART if j in skipped else shape.part(b, f"{where}.content[{j}]") for j, b in enumerate(blocks)]
    return [({**{k: v for k, v in msg.items() if k != "content"}, "content": parts}, where)]


def tool_message(texts: list[str], call_id: Any, status: Any) -> dict:
    """The tool message of one result block: its texts one a line, the id of the call it answers, and a
    ``status`` other than success, which read_tool_result counts (``status_dropped``), never drops unsaid."""
    msg: dict[str, Any] = {"role": "tool", "content": "\n".join(texts)}
    if call_id is not None:
        msg["tool_call_id"] = call_id
    if status is not None:
        msg["status"] = status
    return msg
