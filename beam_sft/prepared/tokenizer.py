"""The one way a tokenizer is loaded and saved, for ``prepare``, its workers, ``verify`` and ``train``.

``load_tokenizer(name)`` takes a folder or hub id; ``prepared_tokenizer(DIR)`` the one saved beside
a prepared dataset (so ids and template agree with the data); ``save_tokenizer`` writes DIR/tokenizer.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from beam_sft.data.fingerprint import TOKENIZER_FILES
from beam_sft.errors import ConfigError, PreparedError
from beam_sft.prepared.layout import TOKENIZER_DIR


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

            return PreTrainedTokenizerFast.from_pretrained(str(name))
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(name))
    except (OSError, ValueError) as exc:
        raise ConfigError(key, f"cannot load {str(name)!r}: {exc}") from exc


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
