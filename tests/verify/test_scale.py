"""Many varied rows: no false positives on clean data, and a corruption anywhere is still caught."""

from __future__ import annotations

import os
import random

import pytest

from beam_sft.verify.api import check_records
from beam_sft.verify.context import CheckEnv
from tests.verify.conftest import records_for


def synthetic_records(tokenizer, n: int, scale: float) -> list[dict]:
    from beam_sft.data.synthetic import synthetic_rows

    return records_for(list(synthetic_rows(n, seed=3, scale=scale)), tokenizer)


@pytest.fixture(scope="module")
def synthetic(tokenizer) -> list[dict]:
    return synthetic_records(tokenizer, 24, 0.2)


def test_synthetic_rows_are_clean(synthetic, tokenizer):
    env = CheckEnv.create(tokenizer)
    env.sampled = frozenset(range(len(synthetic)))
    violations, stats = check_records(enumerate(synthetic), env)
    assert violations == []
    assert stats.channels["tool_call"] > 0  # the sample has tool calls


def test_random_mask_corruptions_are_caught(synthetic, tokenizer):
    env = CheckEnv.create(tokenizer)
    rng = random.Random(0)
    for trial in range(30):
        record = dict(synthetic[rng.randrange(len(synthetic))])
        mask = list(record["assistant_masks"])
        start = rng.randrange(len(mask))
        width = rng.randint(1, 6)
        value = rng.randint(0, 1)
        before = mask[start:start + width]
        mask[start:start + width] = [value] * len(before)
        if mask == record["assistant_masks"]:
            continue
        record["assistant_masks"] = mask
        record["num_trained"] = sum(mask)
        violations, _ = check_records([(0, record)], env)
        assert violations, f"trial {trial}: setting {width} tokens at {start} to {value} went unnoticed"


@pytest.mark.realistic
def test_realistic_tokenizer_synthetic_rows_are_clean():
    from pathlib import Path

    from transformers import AutoTokenizer

    from beam_sft.harmony.gptoss_tokenizer import DEFAULT_DIR

    path = Path(os.environ.get("BEAM_REALISTIC_TOKENIZER") or Path(__file__).resolve().parents[2] / DEFAULT_DIR)
    if not path.is_dir():
        pytest.skip(f"realistic tokenizer not built at {path} (scripts/get_realistic_tokenizer.sh)")
    tokenizer = AutoTokenizer.from_pretrained(path)
    env = CheckEnv.create(tokenizer)
    assert env.decoder.name == "byte_table", env.decoder_note  # proven against gpt-oss's own decoder
    records = synthetic_records(tokenizer, 50, 1.0)
    env.sampled = frozenset(range(0, 50, 5))
    violations, _ = check_records(enumerate(records), env)
    assert violations == []
