"""Single-process training on the fixture: save and reload, resume, gradient accumulation, LoRA merge."""

from __future__ import annotations

import argparse
import json

import pytest
import torch

from beam_sft.harmony import markers
from beam_sft.train.callbacks import read_losses
from beam_sft.train.recipe import recipe_from_dict
from beam_sft.train.trainer import train

from .conftest import recipe_dict


def _train(fixture_dir, prepared_dir, out, **sections):
    return train(recipe_from_dict(recipe_dict(fixture_dir, prepared_dir, out, **sections)))


def _losses(out):
    return {r["step"]: r["loss"] for r in read_losses(out)}


def test_full_fine_tune_saves_a_loadable_model_with_templates(fixture_dir, prepared_dir, tokenizer, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    listing = sorted(p.name for p in prepared_dir.rglob("*"))
    out = _train(fixture_dir, prepared_dir, tmp_path / "out", sft={"max_steps": 6})
    # TRL's map caches went to the run's directory; the prepared directory is as prepare left it.
    assert sorted(p.name for p in prepared_dir.rglob("*")) == listing
    assert any((out / "prepared_view").glob("cache-*.arrow"))
    losses = _losses(out)
    assert list(losses) == [1, 2, 3, 4, 5, 6]
    assert losses[6] < losses[1]

    model = AutoModelForCausalLM.from_pretrained(out)
    before = AutoModelForCausalLM.from_pretrained(fixture_dir)
    assert not torch.equal(model.model.embed_tokens.weight, before.model.embed_tokens.weight)
    assert model.config.use_cache is True  # turned off for training only
    eos = GenerationConfig.from_pretrained(out).eos_token_id
    assert tokenizer.convert_tokens_to_ids(markers.RETURN) in eos

    saved = AutoTokenizer.from_pretrained(out)
    assert saved.chat_template == tokenizer.chat_template
    assert saved.response_template == tokenizer.response_template
    assert "response_template" in json.loads((out / "tokenizer_config.json").read_text())

    meta = json.loads((out / "beam_run.json").read_text())
    assert meta["preflight"]["batches"] == 2 and meta["preflight"]["rows_checked"] > 0
    assert meta["distributed"] == {"type": "NO", "num_processes": 1}
    assert meta["recipe"]["sft"]["max_steps"] == 6


def test_resume_gives_the_losses_of_the_uninterrupted_run(fixture_dir, prepared_dir, tmp_path):
    schedule = {"max_steps": 6, "lr_scheduler_type": "cosine", "warmup_steps": 2,
                "save_strategy": "steps", "save_steps": 3}
    whole = _train(fixture_dir, prepared_dir, tmp_path / "whole", sft=schedule)
    checkpoint = whole / "checkpoint-3"
    assert (checkpoint / "tokenizer_config.json").is_file()
    resumed = _train(fixture_dir, prepared_dir, tmp_path / "resumed",
                     sft={**schedule, "resume_from_checkpoint": str(checkpoint)})
    expected, got = _losses(whole), _losses(resumed)
    assert sorted(got) == [4, 5, 6]
    for step in (4, 5, 6):
        assert got[step] == pytest.approx(expected[step], rel=1e-5, abs=1e-6)
    # Not a tautology: the losses move from step to step.
    assert len({round(expected[s], 4) for s in (4, 5, 6)}) == 3
    # Resuming into the same directory logs each step once.
    _train(fixture_dir, prepared_dir, whole, sft={**schedule, "resume_from_checkpoint": str(checkpoint)})
    again = read_losses(whole)
    assert [r["step"] for r in again] == [1, 2, 3, 4, 5, 6]
    assert again[4]["loss"] == pytest.approx(expected[5], rel=1e-5)


@pytest.mark.parametrize("lora", [{"r": 4, "alpha": 8, "dropout": 0.0}, None], ids=["lora", "full"])
def test_a_resume_at_max_steps_trains_nothing_and_says_so(fixture_dir, prepared_dir, tmp_path, capfd, lora):
    """transformers resumed a checkpoint at max_steps (not at an epoch's end: 24 steps an epoch here)
    by skipping its 2 batches and training step 3 before it asked whether the run was over."""
    from safetensors.torch import load_file

    schedule = {"max_steps": 2, "save_strategy": "steps", "save_steps": 2}
    out = _train(fixture_dir, prepared_dir, tmp_path / "o", sft=schedule, lora=lora)
    capfd.readouterr()
    again = _train(fixture_dir, prepared_dir, out, sft={**schedule, "resume_from_checkpoint": True}, lora=lora)
    assert "nothing to train: the checkpoint resumed is at step 2" in capfd.readouterr().err
    assert [r["step"] for r in read_losses(out)] == [1, 2]
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2"]
    assert json.loads((out / "beam_run.json").read_text())["global_step"] == 2
    name = "adapter_model.safetensors" if lora else "model.safetensors"
    saved, checkpoint = load_file(again / name), load_file(out / "checkpoint-2" / name)
    assert saved.keys() == checkpoint.keys() and all(torch.equal(saved[k], checkpoint[k]) for k in saved)


def test_gradient_accumulation_matches_one_big_batch(fixture_dir, prepared_dir, tmp_path):
    accumulated = _train(fixture_dir, prepared_dir, tmp_path / "acc",
                         sft={"max_steps": 2, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 4})
    single = _train(fixture_dir, prepared_dir, tmp_path / "one",
                    sft={"max_steps": 2, "per_device_train_batch_size": 8, "gradient_accumulation_steps": 1})
    a, b = _losses(accumulated), _losses(single)
    assert sorted(a) == sorted(b) == [1, 2]
    for step in (1, 2):  # step 2 also shows the updates agreed
        assert a[step] == pytest.approx(b[step], rel=1e-4)
    assert a[2] != pytest.approx(a[1], rel=1e-4)


def test_lora_adapter_saves_and_merges(fixture_dir, prepared_dir, tmp_path):
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = _train(fixture_dir, prepared_dir, tmp_path / "lora", lora={"r": 4, "alpha": 8, "dropout": 0.0},
                 sft={"learning_rate": 1e-2})
    assert (out / "adapter_config.json").is_file() and not (out / "model.safetensors").exists()
    weights = load_file(out / "adapter_model.safetensors")
    lora_b = [v for k, v in weights.items() if "lora_B" in k]
    assert lora_b and all(float(v.abs().max()) > 0 for v in lora_b)  # trained away from its zero init
    assert AutoTokenizer.from_pretrained(out).response_template is not None

    from beam_sft.train import cli

    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["merge", str(out), "-o", str(tmp_path / "merged")])
    assert args.func(args) == 0
    merged_dir = tmp_path / "merged"
    merged = AutoModelForCausalLM.from_pretrained(merged_dir).eval()
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(fixture_dir), str(out)).eval()
    base = AutoModelForCausalLM.from_pretrained(fixture_dir).eval()
    ids = torch.tensor([[5, 17, 300, 42, 9, 100]])
    with torch.no_grad():
        want, got, plain = adapted(ids).logits, merged(ids).logits, base(ids).logits
    assert torch.allclose(got, want, atol=1e-4)
    assert not torch.allclose(got, plain, atol=1e-4)
    assert AutoTokenizer.from_pretrained(merged_dir).chat_template is not None


def test_a_data_spec_is_prepared_first_then_trained(fixture_dir, tmp_path):
    from .conftest import train_rows

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in train_rows(16)), encoding="utf-8")
    spec = {"sources": [{"path": str(rows), "format": "openai"}], "output": str(tmp_path / "prepared"),
            "max_length": 512, "num_proc": 1}  # no tokenizer: the model's own
    data = recipe_dict(fixture_dir, tmp_path / "unused", tmp_path / "out", sft={"max_steps": 2})
    data["data"] = {"prepare": spec}
    out = train(recipe_from_dict(data))
    meta = json.loads((out / "beam_run.json").read_text())
    assert meta["prepared"] == str(tmp_path / "prepared")
    assert (tmp_path / "prepared" / "report.json").is_file()
    assert meta["preflight"]["rows_checked"] > 0


def test_trl_gets_tokens_and_never_renders(fixture_dir, prepared_dir, tmp_path, monkeypatch):
    from datasets import load_from_disk
    from transformers import PreTrainedTokenizerBase

    from beam_sft.train.trainer import build

    def refuse(*args, **kwargs):
        raise AssertionError("the trainer rendered a row through the chat template")

    monkeypatch.setattr(PreTrainedTokenizerBase, "apply_chat_template", refuse)
    data = recipe_dict(fixture_dir, prepared_dir, tmp_path / "out", preflight={"enabled": False},
                       sft={"max_length": 4096})
    run = build(recipe_from_dict(data))
    prepared = load_from_disk(str(prepared_dir))
    assert list(run.trainer.train_dataset["input_ids"]) == list(prepared["input_ids"])
    masks = prepared["assistant_masks"]
    for ids, labels, mask in zip(prepared["input_ids"], run.trainer.train_dataset["labels"], masks, strict=True):
        assert labels == [t if m else -100 for t, m in zip(ids, mask, strict=True)]
