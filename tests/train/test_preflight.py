"""The pre-flight: the trainer's own first batches against our masks, corrupted masks, eos, tokenizer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from beam_sft.errors import ConfigError, PreflightError, TokenizerError
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
    if sft.get("packing"):  # 2 batches of 2 packed rows, each row holding several whole sequences
        assert report.sequences > 4
    else:  # 2 batches x per_device_train_batch_size 2, one sequence a row
        assert report.sequences == 4
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


# --- the prepared tokenizer against the model's own, before the weights load ---------------------


def _model_with_tokenizer(tmp_path, fixture_dir, tokenizer):
    """A copy of the fixture model whose own tokenizer is ``tokenizer``."""
    import shutil

    model_dir = tmp_path / "model"
    shutil.copytree(fixture_dir, model_dir)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        (model_dir / name).unlink(missing_ok=True)
    tokenizer.save_pretrained(model_dir)
    return model_dir


def _swapped(tokenizer):
    """Same size, same added tokens, two ordinary tokens' ids swapped."""
    import json as _json

    from transformers import PreTrainedTokenizerFast

    data = _json.loads(tokenizer.backend_tokenizer.to_str())
    vocab = data["model"]["vocab"]
    a, b = "Paris", "London"
    if a not in vocab or b not in vocab:
        a, b = sorted(vocab, key=vocab.get)[300], sorted(vocab, key=vocab.get)[301]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    from tokenizers import Tokenizer

    swapped = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(_json.dumps(data)))
    swapped.chat_template = tokenizer.chat_template
    return swapped


def test_the_prepared_tokenizer_must_be_the_models_own(fixture_dir, tokenizer, tmp_path):
    from beam_sft.train.preflight import check_model_tokenizer, tokenizer_differences

    check_model_tokenizer(str(fixture_dir), tokenizer)  # the same tokenizer: fine
    assert tokenizer_differences(tokenizer, tokenizer) == []
    swapped = _swapped(tokenizer)
    assert len(swapped) == len(tokenizer)
    problems = tokenizer_differences(swapped, tokenizer)
    assert any("other ids" in p for p in problems)
    with pytest.raises(PreflightError, match="not the model's own"):
        check_model_tokenizer(str(fixture_dir), swapped)


def test_larger_or_smaller_tokenizers_are_refused(fixture_dir, tokenizer, tmp_path):
    import copy

    from beam_sft.harmony.fixture import FixtureOptions, build_tokenizer
    from beam_sft.train.preflight import check_model_tokenizer

    larger = copy.deepcopy(tokenizer)
    larger.add_tokens(["<extra_a>", "<extra_b>"])
    with pytest.raises(PreflightError, match="1033 tokens in the prepared tokenizer, 1031"):
        check_model_tokenizer(str(fixture_dir), larger)
    smaller = build_tokenizer(FixtureOptions(vocab_size=700))  # the hostile trial's 707-token tokenizer
    assert len(smaller) == 707
    with pytest.raises(PreflightError, match="707 tokens"):
        check_model_tokenizer(str(fixture_dir), smaller)
    # A model without a tokenizer beside it: the size against the embedding rows still decides.
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        (bare / name).write_bytes((fixture_dir / name).read_bytes())
    check_model_tokenizer(str(bare), tokenizer)
    for wrong in (smaller, larger):
        with pytest.raises(PreflightError, match="embedding rows"):
            check_model_tokenizer(str(bare), wrong)


def test_train_refuses_a_foreign_tokenizer_before_loading_weights(fixture_dir, tokenizer, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM

    from beam_sft.harmony.fixture import FixtureOptions, build_tokenizer

    prepared = write_prepared(tmp_path / "small", train_rows(8), build_tokenizer(FixtureOptions(vocab_size=700)))

    def never(*args, **kwargs):
        raise AssertionError("weights were loaded before the tokenizer check")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", never)
    with pytest.raises(PreflightError, match="707 tokens"):
        _run(fixture_dir, prepared, tmp_path)


# --- resume_from_checkpoint, checked before the pre-flight and the weights ------------------------


def _checkpoint(tmp_path, fixture_dir):
    import shutil

    folder = tmp_path / "out" / "checkpoint-2"
    folder.mkdir(parents=True)
    shutil.copy(fixture_dir / "model.safetensors", folder / "model.safetensors")
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 2}))
    return folder


@pytest.mark.parametrize("damage", ["none-there", "no-state", "bad-state", "truncated", "garbage", "no-weights", "file"])
def test_a_bad_checkpoint_is_refused_naming_the_folder(damage, fixture_dir, prepared_dir, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM

    from beam_sft.errors import ConfigError

    value = True
    if damage != "none-there":
        folder = _checkpoint(tmp_path, fixture_dir)
        value = str(folder)
        weights = folder / "model.safetensors"
        if damage == "no-state":
            (folder / "trainer_state.json").unlink()
        elif damage == "bad-state":
            (folder / "trainer_state.json").write_text("{not json")
        elif damage == "truncated":
            weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
        elif damage == "garbage":
            weights.write_bytes(b"\x00" * 64)
        elif damage == "no-weights":
            weights.unlink()
        elif damage == "file":
            value = str(weights)

    def never(*args, **kwargs):
        raise AssertionError("weights were loaded before the checkpoint check")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", never)
    recipe = recipe_from_dict(recipe_dict(fixture_dir, prepared_dir, tmp_path / "out",
                                          sft={"resume_from_checkpoint": value}))
    with pytest.raises(ConfigError) as info:
        build(recipe)
    assert info.value.path == "sft.resume_from_checkpoint"
    named = str(tmp_path / "out") if damage == "none-there" else str(Path(value).parent if damage == "file" else value)
    assert named in str(info.value)


def test_a_good_checkpoint_resolves(fixture_dir, tmp_path):
    from beam_sft.train.resume import resolve_checkpoint

    folder = _checkpoint(tmp_path, fixture_dir)
    assert resolve_checkpoint(True, tmp_path / "out") == str(folder)
    assert resolve_checkpoint(str(folder), "elsewhere") == str(folder)
    assert resolve_checkpoint(None, "x") is None and resolve_checkpoint(False, "x") is None


def test_a_checkpoint_past_max_steps_is_refused_before_the_weights_load(fixture_dir, prepared_dir, tmp_path,
                                                                         monkeypatch):
    """Resumed, it trained one step more (transformers asks whether the run is over only after a step),
    then saved step 3's weights as a run of 1 step; one at max_steps trains nothing (test_train.py)."""
    from transformers import AutoModelForCausalLM

    from beam_sft.train.resume import resolve_checkpoint

    folder = _checkpoint(tmp_path, fixture_dir)  # at step 2
    assert resolve_checkpoint(True, tmp_path / "out", max_steps=2) == str(folder)
    assert resolve_checkpoint(True, tmp_path / "out", max_steps=-1) == str(folder)  # epochs decide

    def never(*args, **kwargs):
        raise AssertionError("weights were loaded before the checkpoint check")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", never)
    recipe = recipe_from_dict(recipe_dict(fixture_dir, prepared_dir, tmp_path / "out",
                                          sft={"resume_from_checkpoint": True, "max_steps": 1}))
    with pytest.raises(ConfigError) as info:
        build(recipe)
    assert info.value.path == "sft.resume_from_checkpoint"
    assert f"{folder} is at step 2, past sft.max_steps 1" in str(info.value)


def test_a_checkpoint_of_the_other_kind_is_refused_before_the_weights_load(fixture_dir, tmp_path):
    """A full fine-tune resumed from an adapter's checkpoint (or the reverse) failed only after the model
    loaded: the Trainer's "can't find a checkpoint index", or an optimizer state of another size."""
    from beam_sft.train.resume import resolve_checkpoint

    full = _checkpoint(tmp_path, fixture_dir)
    assert resolve_checkpoint(str(full), "x", adapter=False) == str(full)
    with pytest.raises(ConfigError, match="full fine-tune's checkpoint .* LoRA adapter"):
        resolve_checkpoint(str(full), "x", adapter=True)
    lora = tmp_path / "lora" / "checkpoint-2"
    lora.mkdir(parents=True)
    (lora / "trainer_state.json").write_text('{"global_step": 2}')
    (lora / "adapter_model.bin").write_bytes(b"x")
    assert resolve_checkpoint(str(lora), "x", adapter=True) == str(lora)
    with pytest.raises(ConfigError, match="LoRA adapter's checkpoint.* full fine-tune"):
        resolve_checkpoint(str(lora), "x", adapter=False)


def test_rows_sft_max_length_cuts_are_counted_said_and_recorded(fixture_dir, prepared_dir, tmp_path, capsys):
    """TRL truncates rows past sft.max_length and drops those left with no trained token, unsaid."""
    import numpy as np

    from beam_sft.train.data import truncation_counts
    from beam_sft.train.trainer import train

    run = _run(fixture_dir, prepared_dir, tmp_path / "a", sft={"max_length": 120})
    lengths = np.asarray(run.dataset["num_tokens"])
    counts = truncation_counts(run.dataset, 120)
    assert counts["truncated"] == int((lengths > 120).sum()) > 0 and counts["rows"] == len(lengths)
    masks = [np.asarray(m) for m, n in zip(run.dataset["assistant_masks"], lengths, strict=True) if n > 120]
    assert counts["dropped"] == sum(int(m[:120].sum() == 0) for m in masks)
    assert counts["trained_tokens_cut"] == sum(int(m[120:].sum()) for m in masks)
    assert truncation_counts(run.dataset, int(lengths.max())) is None
    capsys.readouterr()
    out = train(recipe_from_dict(recipe_dict(fixture_dir, prepared_dir, tmp_path / "b", sft={"max_length": 120,
                                                                                           "max_steps": 1})))
    assert f"sft.max_length 120 cuts {counts['truncated']} of the {counts['rows']} train rows" in capsys.readouterr().err
    assert json.loads((out / "beam_run.json").read_text())["truncation"] == counts
