"""The one way a tokenizer is loaded and saved, for ``prepare``, its workers, ``verify`` and ``train``.

``load_tokenizer(name)`` takes a folder or hub id; ``prepared_tokenizer(DIR)`` the one saved beside
a prepared dataset (so ids and template agree with the data); ``save_tokenizer`` writes DIR/tokenizer.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from beam_sft.dataset_folder.layout import TOKENIZER_DIR
from beam_sft.digests import TOKENIZER_FILES
from beam_sft.errors import ConfigError, PreparedError


def load_tokenizer(name: str | Path | None, *, key: str = "tokenizer"):
    """A tokenizer from a local folder or hub id; ConfigError naming ``key`` when it cannot be loaded."""
    if not name:
        raise ConfigError(key, "no tokenizer: set data.prepare.tokenizer, --tokenizer or $BEAM_MODEL_ID")
    from beam_sft.paths import check_local_or_hub_id

    check_local_or_hub_id(name, key)
    try:
        if is_plain_fast_tokenizer(Path(name)):
            # The class AutoTokenizer would pick, without importing torch on the way.
            from transformers import PreTrainedTokenizerFast

            return PreTrainedTokenizerFast.from_pretrained(str(name), **added_tokens_kwargs(Path(name)))
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(name))
    except (OSError, ValueError) as exc:  # (the hub client's message runs over several lines)
        raise ConfigError(key, f"cannot load {str(name)!r}: {' '.join(str(exc).split())}") from exc


def prepared_tokenizer(directory: str | Path):
    """The tokenizer saved with a prepared dataset (DIR/tokenizer)."""
    path = Path(directory) / TOKENIZER_DIR
    if not path.is_dir():
        raise PreparedError(path, "no tokenizer saved with the prepared dataset; re-run `beam-sft prepare`")
    try:
        return load_tokenizer(path)
    except ConfigError as exc:
        raise PreparedError(path, str(exc)) from exc


def save_tokenizer(tokenizer, name: str | Path, out: Path) -> None:
    """DIR/tokenizer: the source files as they are when ``load_tokenizer`` read them from a plain
    tokenizer folder (a 200k vocabulary saves in seconds), else ``save_pretrained``."""
    source = Path(name)
    if is_plain_fast_tokenizer(source):
        out.mkdir(parents=True)
        for file in sorted(source.iterdir()):
            if file.is_file() and (file.name in TOKENIZER_FILES or file.name.startswith("chat_template")):
                shutil.copy2(file, out / file.name)
        return
    tokenizer.save_pretrained(str(out))


def is_plain_fast_tokenizer(directory: Path) -> bool:
    """A folder with tokenizer.json whose class is the plain fast tokenizer (no remote code)."""
    try:
        config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (directory / "tokenizer.json").is_file() and isinstance(config, dict) and config.get(
        "tokenizer_class") in ("PreTrainedTokenizerFast", "TokenizersBackend") and not config.get("auto_map")


_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace


def added_tokens_entries(path: Path) -> list | None:
    """tokenizer.json's ``added_tokens``, parsed by ``json``'s own decoder key by key, stopping there.

    The keys before it (version, truncation, padding) are small and the vocabulary and merges come
    after it: this reads the added tokens without building the whole file in Python (0.8 s of CPU for
    a 200k vocabulary), decoding only the file's head (the whole file's decode and a copy of it were
    0.15 s more). None when the file is not laid out so, or names ``added_tokens`` more than once (the
    caller then lets transformers read it as always)."""
    data = path.read_bytes()
    if data.count(b'"added_tokens"') != 1:  # none, or maybe a second one, which a full parse would take
        return None
    size = PREFIX_BYTES
    while True:  # the decoded text of the file's head, grown until the added tokens are in it
        cut = min(size, len(data))
        while cut < len(data) and data[cut] & 0xC0 == 0x80:  # (not inside a character)
            cut -= 1
        whole = cut >= len(data)
        try:
            return _added_tokens_in(data[:cut].decode("utf-8"), whole)
        except ValueError:  # (a head cut short: JSON cut inside a value, or _Short)
            if whole:
                raise
        size *= 4


class _Short(ValueError):
    """The head ended before the parse could say."""


PREFIX_BYTES = 1 << 20  # the added tokens of a 200k vocabulary (gpt-oss) take 40 kB


def _added_tokens_in(text: str, whole: bool) -> list | None:
    decoder = json.JSONDecoder()

    def at(i: int) -> str:
        if i >= len(text) and not whole:
            raise _Short
        return text[i:i + 1]

    i = _SPACE.match(text).end()
    if at(i) != "{":
        return None
    i = _SPACE.match(text, i + 1).end()
    while at(i) == '"':
        key, i = decoder.raw_decode(text, i)
        i = _SPACE.match(text, i).end()
        if at(i) != ":":
            return None
        value, i = decoder.raw_decode(text, _SPACE.match(text, i + 1).end())
        if key == "added_tokens":
            return value if isinstance(value, list) and all(isinstance(e, dict) and "id" in e for e in value) else None
        i = _SPACE.match(text, i).end()
        if at(i) != ",":
            return None
        i = _SPACE.match(text, i + 1).end()
    return None


def added_tokens_kwargs(directory: Path) -> dict:
    """``added_tokens_decoder`` for ``from_pretrained`` of a plain fast tokenizer folder whose
    tokenizer_config.json has none: exactly what transformers' legacy branch builds from
    tokenizer.json's ``added_tokens`` (one ``AddedToken(**entry)`` per entry, keyed by its id), read
    without parsing the whole file in Python a second time (the backend reads it anyway). Only where
    that branch would read nothing else (no special_tokens_map.json, no added_tokens.json); {} otherwise,
    and transformers reads the folder as it always does. (tests/dataset_folder/test_tokenizer_load.py: both
    loads give the same tokenizer.)"""
    try:
        config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
        if not isinstance(config, dict) or "added_tokens_decoder" in config or any(
                (directory / name).exists() for name in ("special_tokens_map.json", "added_tokens.json")):
            return {}
        entries = added_tokens_entries(directory / "tokenizer.json")
    except (OSError, ValueError):
        return {}
    if entries is None:
        return {}
    return {"added_tokens_decoder": {int(e["id"]): {k: v for k, v in e.items() if k != "id"} for e in entries}}
