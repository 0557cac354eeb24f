"""The pre-flight: the trainer's own first batches against our masks, corrupted masks, eos, tokenizer."""

from __future__ import annotations

import json
import re

import pytest
import torch

from beam_sft.errors import PreflightError, TokenizerError
from beam_sft.harmony import markers
from beam_sft.train import data as train_data
from beam_sft.train.preflight import (
    RowIndex,
    batch_sequences,
    check_batches,
    check_generation_eos,
    check_tokenizer,
    first_batches,
    run_data_checks,
    span_problems,
)
from beam_sft.train.recipe import recipe_from_dict
from beam_sft.train.trainer import build

from .conftest import recipe_dict, train_rows, write_prepared


def _run(fixture_dir, prepared, tmp_path, **sections):
    return build(recipe_from_dict(recipe_dict(fixture_dir, prepared, tmp_path / "out", **sections)))


@pytest.mark.parametrize("sft", [{}, {"max_length": 120}, {"packing": True, "max_length": 384}],
                         ids=["padded", "truncated", "packed"])
def test_good_dataset_passes_on_the_trainers_own_batches(fixture_dir, prepared_dir, tmp_path, sft):
    run = _run(fixture_dir, prepared_dir, tmp_path, sft=sft)
    report, batches = run_data_checks(run.trainer, run.dataset, run.tokenizer, run.recipe)
    assert report.batches == 2 and report.rows_checked >= 2
    assert report.sequences >= (4 if sft.get("packing") else 4)
    assert report.packed == bool(sft.get("packing"))
    if "max_length" in sft and not sft.get("packing"):  # truncation really happened, and was matched
        assert max(len(ids) for b in batches for ids, _ in batch_sequences(b, 0)) == 120


def test_labels_follow_the_masks_or_every_token(fixture_dir, prepared_dir, tmp_path):
    masked = _run(fixture_dir, prepared_dir, tmp_path / "a")
    batch = first_batches(masked.trainer, 1)[0]
    assert (batch["labels"] == -100).sum() > (batch["attention_mask"] == 0).sum()  # prompts are masked
    everything = _run(fixture_dir, prepared_dir, tmp_path / "b", sft={"assistant_only_loss": False})
    batch = first_batches(everything.trainer, 1)[0]
    real = batch["attention_mask"] == 1
    assert torch.equal(batch["labels"][real], batch["input_ids"][real])
    run_data_checks(everything.trainer, everything.dataset, everything.tokenizer, everything.recipe)


def test_batches_that_ignore_the_masks_are_refused(fixture_dir, prepared_dir, tmp_path, monkeypatch):
    # As if the trainer dropped our masks: it then trains on every token.
    monkeypatch.setattr(train_data, "trainer_dataset",
                        lambda dataset, assistant_only_loss: dataset.select_columns(["input_ids"]))
    run = _run(fixture_dir, prepared_dir, tmp_path)
    with pytest.raises(PreflightError, match="labels differ from the masks"):
        run_data_checks(run.trainer, run.dataset, run.tokenizer, run.recipe)


def test_batches_whose_tokens_changed_are_refused(fixture_dir, prepared_dir, tmp_path):
    run = _run(fixture_dir, prepared_dir, tmp_path)
    batch = dict(first_batches(run.trainer, 1)[0])
    batch["input_ids"] = batch["input_ids"].clone()
    batch["input_ids"][0, 3] += 1  # a token TRL would have re-rendered differently
    index = RowIndex(run.dataset, max_length=run.trainer.args.max_length)
    problems, _, _ = check_batches([batch], run.dataset, index, assistant_only_loss=True,
                                   pad_token_id=run.tokenizer.pad_token_id)
    assert any("match no row" in p for p in problems)


def _flip_first_user_token(record):
    mask = list(record["assistant_masks"])
    mask[mask.index(1) - 5] = 1  # a prompt token, now "trained"
    return {**record, "assistant_masks": mask}


def _drop_stop_token(record):
    mask = list(record["assistant_masks"])
    last = len(mask) - 1 - mask[::-1].index(1)
    mask[last] = 0  # <|return|> no longer trained: the model would never learn to stop
    return {**record, "assistant_masks": mask}


@pytest.mark.parametrize("corrupt", [_flip_first_user_token, _drop_stop_token])
def test_corrupted_mask_is_refused(fixture_dir, tokenizer, tmp_path, corrupt):
    prepared = write_prepared(tmp_path / "prepared", train_rows(16), tokenizer, mutate=corrupt)
    run = _run(fixture_dir, prepared, tmp_path)
    with pytest.raises(PreflightError, match="assistant_masks differ from the template"):
        run_data_checks(run.trainer, run.dataset, run.tokenizer, run.recipe)


def test_corrupted_mask_stops_training_before_step_one(fixture_dir, tokenizer, tmp_path):
    from beam_sft.train.callbacks import read_losses
    from beam_sft.train.trainer import train

    prepared = write_prepared(tmp_path / "prepared", train_rows(16), tokenizer, mutate=_flip_first_user_token)
    recipe = recipe_from_dict(recipe_dict(fixture_dir, prepared, tmp_path / "out"))
    with pytest.raises(PreflightError, match="pre-flight failed"):
        train(recipe)
    assert read_losses(tmp_path / "out") == []


def test_span_rule_names_the_offending_token(tokenizer):
    row = train_rows(1)[0]
    out = tokenizer.apply_chat_template(row["messages"], return_dict=True, return_assistant_tokens_mask=True)
    ids, mask = list(out["input_ids"]), list(out["assistant_masks"])
    assert span_problems(ids, mask, tokenizer) == []
    shifted = [0] + mask[:-1]
    assert any("starts at" in p for p in span_problems(ids, shifted, tokenizer))
    assert span_problems(ids, mask[:-1], tokenizer) == [f"{len(ids)} input_ids but {len(ids) - 1} mask values"]


def test_return_must_be_a_generation_eos(fixture_dir, tokenizer):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(fixture_dir)
    check_generation_eos(model, tokenizer)
    model.generation_config.eos_token_id = [tokenizer.convert_tokens_to_ids(markers.CALL)]
    with pytest.raises(PreflightError, match=r"<\|return\|>.*not an eos token"):
        check_generation_eos(model, tokenizer)


def test_unfit_tokenizer_is_refused(tokenizer):
    import copy

    check_tokenizer(tokenizer)
    broken = copy.deepcopy(tokenizer)
    broken.chat_template = re.sub(r"\{%-?\s*(end)?generation\s*-?%\}", "", broken.chat_template)
    assert broken.chat_template != tokenizer.chat_template
    with pytest.raises(TokenizerError):
        check_tokenizer(broken)


def test_train_refuses_a_model_without_return_eos(fixture_dir, prepared_dir, tmp_path):
    import shutil

    model_dir = tmp_path / "model"
    shutil.copytree(fixture_dir, model_dir)
    config = json.loads((model_dir / "generation_config.json").read_text())
    config["eos_token_id"] = [config["eos_token_id"][-1]]  # keep <|call|>, drop <|return|>
    (model_dir / "generation_config.json").write_text(json.dumps(config))
    with pytest.raises(PreflightError, match="not an eos token"):
        _run(model_dir, prepared_dir, tmp_path)


def test_row_index_finds_rows_among_many_of_the_same_length():
    from datasets import Dataset

    # 40 rows of 12 tokens sharing a long prefix (like a common system prompt), plus longer rows.
    rows = [[1] * 8 + [i // 10, i % 10, 7, i] for i in range(40)] + [[1] * 8 + [5, 5, 7, 100 + i, 0, 0] for i in range(20)]
    dataset = Dataset.from_dict({"input_ids": rows, "assistant_masks": [[0] * len(r) for r in rows]})
    index = RowIndex(dataset, max_length=12)
    assert index.candidates(rows[23]) == [23]
    assert index.candidates(rows[45][:12]) == [45]  # truncated to max_length: matched on its prefix
    assert index.candidates([9] * 12) == []
    # Candidates are a pre-filter (a few positions); the batch check compares every token after it.
    unbounded = RowIndex(dataset, max_length=None)
    assert 45 in unbounded.candidates(rows[45]) and all(len(rows[i]) == 14 for i in unbounded.candidates(rows[45]))
