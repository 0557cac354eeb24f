"""Fingerprints: one digest of everything a prepared dataset depends on, and of nothing else.

The parts: the bytes of every input file, the converter's and the encoder's code (with their
version numbers), the chat template, the tokenizer (vocabulary, merges, added tokens and their
flags, special tokens), the libraries that render and tokenize, and every option that changes the
output. Not in it: where the output goes, how many processes run, batch sizes, verification.
Change any one part and the digest changes, so the cache misses and the data is encoded again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


def digest_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_json(value: Any) -> str:
    """Digest of a JSON-able value, independent of dict order.

    >>> digest_json({"a": 1, "b": [2]}) == digest_json({"b": [2], "a": 1})
    True
    """
    return digest_bytes(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode())


def file_digest(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_CHUNK):
            sha.update(block)
    return sha.hexdigest()


def data_digest(path: str | Path) -> str:
    """Digest of a file's bytes, or of every file under a directory (names and bytes, sorted).

    A path that is neither (a ``datasets`` hub name) is digested by name only.
    """
    path = Path(path)
    if path.is_file():
        return file_digest(path)
    if path.is_dir():
        sha = hashlib.sha256()
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            sha.update(str(file.relative_to(path)).encode() + b"\0" + file_digest(file).encode())
        return sha.hexdigest()
    return digest_bytes(f"name:{path}".encode())


def code_digest(files: Iterable[Path]) -> str:
    """Digest of source files (their names and bytes), so that any code change is a new version."""
    sha = hashlib.sha256()
    for file in sorted(Path(f) for f in files):
        sha.update(file.name.encode() + b"\0" + file.read_bytes())
    return sha.hexdigest()


def package_digest(package: str) -> str:
    """Digest of a package's ``.py`` files (``beam_sft.convert``), found through its import path."""
    import importlib

    module = importlib.import_module(package)
    root = Path(module.__file__).parent
    return code_digest(sorted(root.rglob("*.py")))  # subpackages too (encode/fast)


RESULT_PACKAGES = ("beam_sft.encode", "beam_sft.prepare", "beam_sft.prepared", "beam_sft.convert", "beam_sft.data")


def results_code_digest() -> str:
    """Digest of the code that decides a prepared folder's content."""
    return digest_json({name: package_digest(name) for name in RESULT_PACKAGES})


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "vocab.json", "vocab.txt", "merges.txt", "tokenizer.model", "spiece.model")


def tokenizer_digest(tokenizer) -> str:
    """Digest of what decides token ids: the backend (model, normalizer, pre-tokenizer, added tokens
    with their flags) and the special tokens. The chat template is digested on its own.

    A tokenizer loaded from a local folder is digested by its files (fast: no re-serialising a
    200k vocabulary), plus what it holds in memory (a flag changed after loading counts too).
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    folder = Path(str(getattr(tokenizer, "name_or_path", "") or ""))
    files = [folder / name for name in TOKENIZER_FILES if (folder / name).is_file()] if folder.is_dir() else []
    if files:
        backend_digest = code_digest(files)
    else:
        backend_digest = digest_bytes(backend.to_str().encode()) if backend is not None else None
    parts = {
        "backend": backend_digest,
        "class": type(tokenizer).__name__,
        "added": {str(i): [t.content, t.special, t.lstrip, t.rstrip, t.normalized, t.single_word]
                  for i, t in sorted(tokenizer.added_tokens_decoder.items())},
        "special": dict(tokenizer.special_tokens_map),
    }
    return digest_json(parts)


def library_versions(names: Iterable[str] = ("transformers", "tokenizers", "jinja2", "datasets")) -> dict[str, str]:
    from importlib import metadata

    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def combine(parts: Mapping[str, Any]) -> str:
    """The fingerprint: a digest of the named parts."""
    return digest_json(dict(parts))
