"""Fixtures for the encode tests: the realistic (gpt-oss) tokenizer tier and small data files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def realistic_dir() -> Path | None:
    """$BEAM_REALISTIC_TOKENIZER, else .cache/gptoss-tokenizer/beam (scripts/get_realistic_tokenizer.sh)."""
    env = os.environ.get("BEAM_REALISTIC_TOKENIZER")
    path = Path(env) if env else REPO_ROOT / ".cache" / "gptoss-tokenizer" / "beam"
    return path if (path / "tokenizer.json").is_file() else None


@pytest.fixture(scope="session")
def realistic_tokenizer_dir() -> Path:
    path = realistic_dir()
    if path is None:
        pytest.skip("realistic tokenizer not built: run scripts/get_realistic_tokenizer.sh (or set BEAM_REALISTIC_TOKENIZER)")
    return path


@pytest.fixture(scope="session")
def realistic_tokenizer(realistic_tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(realistic_tokenizer_dir)


@pytest.fixture(scope="session")
def realistic_reference_tokenizer(realistic_tokenizer_dir, reference_template):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(realistic_tokenizer_dir)
    tok.chat_template = reference_template
    return tok


@pytest.fixture(scope="session")
def tokenizer_dir(fixture_dir) -> Path:
    """The fixture checkpoint's folder (its tokenizer is what `prepare` loads in these tests)."""
    return fixture_dir


@pytest.fixture(scope="session")
def reference_tokenizer_dir(tmp_path_factory, reference_tokenizer) -> Path:
    """The fixture tokenizer with the reference template, saved as a folder."""
    path = tmp_path_factory.mktemp("reference-tokenizer")
    reference_tokenizer.save_pretrained(path)
    return path


def write_jsonl(path: Path, rows) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def simple_row(i: int, *, reasoning: str = "Think.", answer: str | None = None) -> dict:
    return {"messages": [{"role": "user", "content": f"Question {i}?"},
                         {"role": "assistant", "reasoning_content": reasoning, "content": answer or f"Answer {i}."}]}
