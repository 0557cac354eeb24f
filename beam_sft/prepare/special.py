"""No text may spell one of the tokenizer's added or special tokens (``<|endoftext|>``, a reserved
token, a marker): the tokenizer would turn it into that control token, and a control token inside
trained text teaches the model to emit it (issue 9 item 2). The Harmony markers are caught by
validation already (``harmony_marker_in_text``); this covers every added token of the tokenizer
actually used, in every string the template can render (``convert.validate.iter_rendered_text``:
contents, reasoning, tool names, arguments, declarations and schemas, template kwargs, keys too).
"""

from __future__ import annotations

import re
from functools import lru_cache

from beam_sft.errors import RowError

CODE = "special_token_in_text"


def added_token_strings(tokenizer) -> tuple[str, ...]:
    """Every added or special token's text, longest first (as the tokenizer matches them)."""
    tokens = set(getattr(tokenizer, "added_tokens_encoder", {}) or {})
    tokens.update(t for t in getattr(tokenizer, "all_special_tokens", ()) if t)
    return tuple(sorted(tokens, key=lambda t: (-len(t), t)))


@lru_cache(maxsize=8)
def _pattern(tokens: tuple[str, ...]) -> re.Pattern | None:
    return re.compile("|".join(map(re.escape, tokens))) if tokens else None


def check_row(row: dict, tokens: tuple[str, ...]) -> None:
    """Raise RowError(``special_token_in_text``) naming the field and the token, if any text holds one.

    >>> check_row({"messages": [{"role": "user", "content": "pre<|endoftext|>post"}]}, ("<|endoftext|>",))
    Traceback (most recent call last):
    ...
    beam_sft.errors.RowError: [special_token_in_text] messages[0].content contains the tokenizer's added token '<|endoftext|>'
    """
    from beam_sft.convert.validate import iter_rendered_text

    pattern = _pattern(tokens)
    if pattern is None:
        return
    for path, text in iter_rendered_text(row):
        found = pattern.search(text)
        if found:
            raise RowError(CODE, f"{path} contains the tokenizer's added token {found.group(0)!r}")
