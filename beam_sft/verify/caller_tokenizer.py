"""Whether a tokenizer object a caller already holds is the one saved beside a prepared dataset
(DIR/tokenizer), proven without loading that one (loading a 200k vocabulary takes a second).

``differences(tokenizer, folder, files)`` is empty when all of these hold, else names what does not:

- The object was loaded from local files that are byte for byte DIR/tokenizer's: every tokenizer
  file (``TOKENIZER_FILES``, chat templates) has the same SHA-256 on both sides and none is on one
  side only. ``files`` gives the digests of the files the caller loaded (``{name: sha256}``); without
  it they are taken from the object's ``name_or_path`` folder. So a fresh load of DIR/tokenizer gives
  what a fresh load of the caller's files gave, in this process.
- Nothing was changed on the object since it was loaded, in what verify reads: its class is the one
  ``load_tokenizer`` picks for DIR/tokenizer, its chat template is the saved template text, its
  added tokens (ids, text and flags) are tokenizer.json's ``added_tokens``, its special tokens are
  tokenizer_config.json's, and its normalizer, pre-tokenizer, post-processor and decoder serialise
  to tokenizer.json's. (Only the prefix of tokenizer.json before the vocabulary is parsed.)

Anything not provable this way (a tokenizer from the hub, a folder with ``special_tokens_map.json``
or several templates) is a difference too: the caller's object is then not used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from beam_sft.dataset_folder.tokenizer import is_plain_fast_tokenizer
from beam_sft.digests import TOKENIZER_FILES, file_digest

TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
BACKEND_PARTS = ("normalizer", "pre_tokenizer", "post_processor", "decoder")
_PREFIX = 1 << 22  # bytes of tokenizer.json read for the parts before "model"


def tokenizer_files(folder: Path) -> dict[str, str]:
    """``{name: sha256}`` of the tokenizer files in ``folder`` (what ``files`` expects)."""
    out = {name: file_digest(folder / name) for name in (*TOKENIZER_FILES, *TEMPLATE_FILES)
           if (folder / name).is_file()}
    extra = folder / "additional_chat_templates"
    if extra.is_dir():
        for path in sorted(p for p in extra.rglob("*") if p.is_file()):
            out[str(path.relative_to(folder))] = file_digest(path)
    return out


def _backend_prefix(path: Path) -> dict | None:
    """tokenizer.json's top-level entries before ``model``, parsed (None when they cannot be read)."""
    with path.open("rb") as fh:
        head = fh.read(_PREFIX).decode("utf-8", errors="ignore")
    decoder = json.JSONDecoder()
    out: dict = {}
    at = head.index("{") + 1 if "{" in head else -1
    if at < 0:
        return None
    try:
        while True:
            while head[at] in " \t\r\n,":
                at += 1
            if head[at] == "}":
                return out
            key, at = decoder.raw_decode(head, at)
            while head[at] in " \t\r\n:":
                at += 1
            if key == "model":
                return out
            out[key], at = decoder.raw_decode(head, at)
    except (ValueError, IndexError):
        return None


def _template_text(folder: Path, config: dict):
    if (folder / "chat_template.json").is_file() or (folder / "additional_chat_templates").is_dir():
        return None  # several templates: not compared cheaply
    path = folder / "chat_template.jinja"
    if path.is_file():
        return path.read_text(encoding="utf-8")
    return config.get("chat_template")


def differences(tokenizer, folder: str | Path, files: Mapping[str, str] | None = None) -> list[str]:
    """Why ``tokenizer`` cannot be taken as DIR/tokenizer's (``folder``), or [] (module docstring)."""
    folder = Path(folder)
    if files is None:
        source = Path(str(getattr(tokenizer, "name_or_path", "") or ""))
        if not source.is_dir():
            return ["the tokenizer was not loaded from a local folder"]
        files = tokenizer_files(source)
    saved = tokenizer_files(folder)
    if dict(files) != saved:
        changed = sorted(n for n in set(files) | set(saved) if files.get(n) != saved.get(n))
        return [f"tokenizer files differ from the saved ones: {changed}"]
    if not is_plain_fast_tokenizer(folder):
        return ["the saved tokenizer is not a plain fast tokenizer folder"]
    if (folder / "special_tokens_map.json").is_file():
        return ["the saved tokenizer has special_tokens_map.json (not compared cheaply)"]
    from transformers import PreTrainedTokenizerFast

    if type(tokenizer) is not PreTrainedTokenizerFast:
        return [f"class {type(tokenizer).__name__}, load_tokenizer gives {PreTrainedTokenizerFast.__name__}"]
    out = []
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    template = _template_text(folder, config)
    if template is None or tokenizer.chat_template != template:
        out.append("the chat template is not the saved one")
    prefix = _backend_prefix(folder / "tokenizer.json")
    if prefix is None or not isinstance(prefix.get("added_tokens"), list):
        return [*out, "tokenizer.json's added tokens cannot be read"]
    try:
        want = {int(t["id"]): (t["content"], t["special"], t["lstrip"], t["rstrip"], t["normalized"],
                               t["single_word"]) for t in prefix["added_tokens"]}
    except (KeyError, TypeError, ValueError):
        return [*out, "tokenizer.json's added tokens cannot be read"]
    got = {int(i): (t.content, t.special, t.lstrip, t.rstrip, t.normalized, t.single_word)
           for i, t in tokenizer.added_tokens_decoder.items()}
    if got != want:
        out.append(f"added tokens differ ({len(got)} held, {len(want)} saved)")
    special = {}
    for attr in getattr(tokenizer, "SPECIAL_TOKENS_ATTRIBUTES", ()):
        value = config.get(attr)
        value = value.get("content") if isinstance(value, dict) else value
        if value is not None:
            special[attr] = str(value)
    if dict(tokenizer.special_tokens_map) != special:
        out.append("special tokens differ from tokenizer_config.json's")
    backend = tokenizer.backend_tokenizer
    for part in BACKEND_PARTS:
        component = getattr(backend, part)
        held = json.loads(component.__getstate__()) if component is not None else None
        if held != prefix.get(part):
            out.append(f"the {part} differs from tokenizer.json's")
    return out
