"""Digest primitives every layer shares: a file's SHA-256 and the names of a tokenizer's files.

A leaf (imports nothing of beam_sft) so that ``dataset_folder/`` (the contract) and ``verify/`` can use
them without importing ``data/``, which sits above ``dataset_folder/``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

_CHUNK = 1 << 20

# The files of a tokenizer folder that decide its token ids (saved, copied and digested together).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "vocab.json", "vocab.txt", "merges.txt", "tokenizer.model", "spiece.model")


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks (a large file never sits in memory whole)."""
    sha = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_CHUNK):
            sha.update(block)
    return sha.hexdigest()
