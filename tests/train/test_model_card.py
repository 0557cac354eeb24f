"""The model card: every figure it states is the run record's or the prepared report's.

The run folder here is written by hand in the shapes ``train`` and ``prepare`` write (beam_run.json,
metrics.jsonl, format_health.jsonl, losses.jsonl, report.json); the slow demo test checks the card
of a real run the same way.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
import yaml

from beam_sft.train.model_card import card_facts, launcher_of, recipe_digest, render_card, write_model_card

REPORT = {
    "fingerprint": "f" * 64,
    "config": {"sources": [{"path": "HuggingFaceH4/ultrachat_200k", "split": "train_sft", "name": None},
                           {"path": "local/rows.jsonl", "name": "rows"}]},
    "sources": {
        "HuggingFaceH4/ultrachat_200k@train_sft": {"format": "openai", "read": 120, "kept": 110,
                                                   "rejected": {"missing_reasoning": 7, "harmony_marker_in_text": 3},
                                                   "rows_out": 110},
        "rows": {"format": "sharegpt", "read": 40, "kept": 40, "rejected": {}, "rows_out": 40}},
    "rejects": {"total": 10, "by_code": {"missing_reasoning": 7, "harmony_marker_in_text": 3}},
    "tokens": {"rows": 150, "total": 45000, "trained": 15000, "trained_fraction": 0.3333},
    "verify": {"ok": True, "trained_by_channel": {"tool_call": {"tokens": 900, "fraction_of_trained": 0.06}}},
}


def _run(tmp_path: Path, *, lora: bool = False, base: str | None = None) -> Path:
    if base is None:
        base = str(tmp_path / "fixture")  # a local checkpoint
        Path(base).mkdir()
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    (prepared / "report.json").write_text(json.dumps(REPORT), encoding="utf-8")
    run = tmp_path / "run"
    run.mkdir()
    recipe = {"model": {"path": base}, "sft": {"output_dir": str(run), "max_steps": 30, "learning_rate": 0.003,
                                               "per_device_train_batch_size": 8},
              "lora": {"r": 8, "alpha": 16, "target_modules": "all-linear"} if lora else None}
    record = {"recipe": recipe, "prepared": str(prepared), "lora": lora, "checkpoint_format": "from_pretrained",
              "distributed": {"type": "DEEPSPEED", "num_processes": 4, "zero_stage": 3},
              "preflight": {"eval": {"mode": "eval_fraction", "train_rows": 135, "eval_rows": 15}},
              "global_step": 30, "log_history": []}
    (run / "beam_run.json").write_text(json.dumps(record), encoding="utf-8")
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"step": 10, "format_health": 0.25}, {"step": 10, "eval_loss": 2.5},
        {"step": 20, "format_health": 0.5}, {"step": 20, "eval_loss": 1.25},
        {"step": 30, "format_health": 0.875}, {"step": 30, "eval_loss": 0.8125}]), encoding="utf-8")
    (run / "format_health.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"step": s, "format_health": v, "outputs": [{}] * 8} for s, v in ((10, 0.25), (20, 0.5), (30, 0.875))]),
        encoding="utf-8")
    (run / "losses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"step": 10, "loss": 3.0, "num_tokens": 1000.0}, {"step": 30, "loss": 0.75, "num_tokens": 3000.0}]),
        encoding="utf-8")
    (run / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}),
                                     encoding="utf-8")
    return run


def _front_matter(card: str) -> dict:
    match = re.match(r"---\n(.*?)\n---\n", card, re.S)
    assert match, card[:200]
    return yaml.safe_load(match.group(1))


def test_the_cards_figures_are_the_run_records_and_the_reports(tmp_path):
    run = _run(tmp_path)
    path = write_model_card(run, launcher="accelerate launch")
    card = path.read_text(encoding="utf-8")
    record = json.loads((run / "beam_run.json").read_text(encoding="utf-8"))
    report_bytes = (tmp_path / "prepared" / "report.json").read_bytes()
    facts = card_facts(run)

    assert record["launcher"] == facts["launcher"] == "accelerate launch"  # kept in the run record
    assert record.pop("base_model_on_hub") is False
    assert facts["recipe_digest"] == hashlib.sha256(
        json.dumps(record["recipe"], sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert facts["report_sha256"] == hashlib.sha256(report_bytes).hexdigest()
    assert facts["world_size"] == 4 and facts["zero_stage"] == 3 and facts["global_step"] == 30
    assert facts["rejected_by_code"] == REPORT["rejects"]["by_code"]
    assert (facts["rows"], facts["tokens"], facts["trained_tokens"]) == (150, 45000, 15000)
    assert (facts["train_rows"], facts["eval_rows"]) == (135, 15)
    assert facts["eval_loss"][-1] == (30, 0.8125) and facts["format_health"][-1] == (30, 0.875, 8)
    assert facts["tokens_seen"] == 3000

    for line in (f"| recipe digest | `sha256:{facts['recipe_digest']}`",
                 f"SHA-256 `{facts['report_sha256']}`",
                 "| launcher | accelerate launch |",
                 "| world size | 4 (DEEPSPEED, ZeRO-3) |",
                 "| steps | 30 of 30 |",
                 "| `HuggingFaceH4/ultrachat_200k@train_sft` | openai | 120 | 110 | `harmony_marker_in_text` 3, "
                 "`missing_reasoning` 7 | 110 |",
                 "| rows rejected | 10 |", "| tokens | 45,000 |", "| trained tokens (assistant mask) | 15,000 |",
                 "| training rows / eval rows | 135 / 15 (`eval_fraction`) |",
                 "| train loss (step 30) | 0.7500 |",
                 "| eval loss (step 30) | 0.8125 |",
                 "| format health (step 30) | 0.875 of 8 greedy turns",
                 "Eval loss by step: 10: 2.500, 20: 1.250, 30: 0.812."):
        assert line in card, line
    assert "None" not in card.split("## Quick start")[0]  # nothing unknown printed as if it were a value

    meta = _front_matter(card)
    assert meta["library_name"] == "transformers"
    assert "base_model" not in meta  # a local checkpoint is not a hub model
    assert meta["datasets"] == ["HuggingFaceH4/ultrachat_200k"]  # the hub source only, not the local file
    assert {"beam-sft", "beam-harmony", "tool-calling"} <= set(meta["tags"]) and "lora" not in meta["tags"]


def test_a_hub_base_and_a_lora_adapter_are_named_in_the_front_matter(tmp_path):
    run = _run(tmp_path, lora=True, base="openai/gpt-oss-20b")
    card = write_model_card(run).read_text(encoding="utf-8")
    meta = _front_matter(card)
    assert meta["base_model"] == "openai/gpt-oss-20b" and meta["library_name"] == "peft" and "lora" in meta["tags"]
    assert "| LoRA | r 8, alpha 16, targets `all-linear` |" in card
    assert "| launcher | not recorded |" in card


def test_merged_and_exported_cards_say_how_the_folder_was_made(tmp_path):
    run = _run(tmp_path, lora=True)
    merged = tmp_path / "merged"
    merged.mkdir()
    card = write_model_card(merged, run_folder=run, derived="merged").read_text(encoding="utf-8")
    assert "merged into its base (`beam-sft merge`)" in card and _front_matter(card)["library_name"] == "transformers"
    assert f'path = "{merged}"' in card
    # An exported checkpoint-N is the run at step N: no figure from after it.
    checkpoint = run / "checkpoint-20"
    checkpoint.mkdir()
    exported = tmp_path / "exported"
    exported.mkdir()
    card = write_model_card(exported, run_folder=checkpoint, derived="exported").read_text(encoding="utf-8")
    assert "sharded checkpoint at step 20" in card
    assert "| eval loss (step 20) | 1.2500 |" in card and "0.8125" not in card


def test_no_run_record_no_card(tmp_path):
    from beam_sft.errors import BeamError

    with pytest.raises(BeamError, match="beam_run.json"):
        write_model_card(tmp_path)


def test_recipe_digest_and_launcher():
    assert recipe_digest({"a": 1}) != recipe_digest({"a": 2})
    assert launcher_of({"ACCELERATE_MIXED_PRECISION": "no"}) == "accelerate launch"


def test_card_text_from_data_cannot_break_a_table_row(tmp_path):
    run = _run(tmp_path)
    facts = card_facts(run)
    facts["sources"][0]["name"] = "a|b\nc"
    card = render_card(facts)
    assert "`a\\|b c`" in card


def test_export_writes_the_runs_card_into_its_output(fixture_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    from beam_sft.train.export import export_checkpoint
    from tests.train.test_export import write_dcp

    run = _run(tmp_path)
    write_dcp(AutoModelForCausalLM.from_pretrained(fixture_dir), run)  # the run folder holds the sharded weights
    out = export_checkpoint(run, tmp_path / "exported", dtype="float32")
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "`beam-sft export`" in card and "| eval loss (step 30) | 0.8125 |" in card
    assert f"{card_facts(out, run_folder=run, derived='exported')['parameters']:,} parameters" in card


def test_merge_writes_the_runs_card_into_its_output(fixture_dir, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from beam_sft.train.merge import merge_adapter

    run = _run(tmp_path, lora=True)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(fixture_dir),
                           LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"], task_type="CAUSAL_LM"))
    model.save_pretrained(str(run))
    AutoTokenizer.from_pretrained(fixture_dir).save_pretrained(str(run))
    assert "library_name: peft" in write_model_card(run).read_text(encoding="utf-8")  # the adapter's own card
    out = merge_adapter(run, tmp_path / "merged", base=str(fixture_dir))
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "merged into its base (`beam-sft merge`)" in card and "library_name: transformers" in card


def test_doctests():
    import doctest

    import beam_sft.train.model_card as module

    assert doctest.testmod(module).failed == 0


def test_the_parameter_count_is_the_models_not_its_buffers(tmp_path):
    """Beam's checkpoint stores the routers' correction biases (buffers) beside the parameters."""
    from transformers import AutoModelForCausalLM

    from beam_sft.harmony.fixture import build_fixture
    from beam_sft.train.model_card import parameter_count

    folder = build_fixture(tmp_path / "beam", arch="beam")
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert any(name.endswith("e_score_correction_bias") for name, _ in model.named_buffers())
    assert parameter_count(folder) == sum(p.numel() for p in model.parameters())
