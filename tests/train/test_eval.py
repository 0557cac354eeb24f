"""The eval set in training: split disjoint by row fingerprint, eval_loss at the configured steps,
the pre-flight on eval batches, format health and TensorBoard on the fixture (one CPU process)."""

from __future__ import annotations

import json

import pytest

from beam_sft.data.split import row_fingerprint
from beam_sft.dataset_folder import write_report
from beam_sft.dataset_folder.report_json import content_digest
from beam_sft.errors import ConfigError, PreflightError
from beam_sft.train.recipe import recipe_from_dict
from beam_sft.train.run_log import read_metrics
from beam_sft.train.trainer import build, preflight, train
from tests.handmade_reports import passed_verification

from .conftest import recipe_dict, train_rows, write_prepared


def _recipe(fixture_dir, prepared, out, **sections):
    return recipe_from_dict(recipe_dict(fixture_dir, prepared, out, **sections))


def test_eval_fraction_split_is_disjoint_by_row_fingerprint(fixture_dir, tokenizer, tmp_path):
    rows = train_rows(40)
    rows += [json.loads(json.dumps(r)) for r in rows[:6]]  # duplicates, as a source weight of 2 makes them
    for i, row in enumerate(rows):
        row["meta"] = {"source": "dup" if i >= 40 else row["meta"]["source"], "row": i}
    prepared = write_prepared(tmp_path / "prep", rows, tokenizer)
    recipe = _recipe(fixture_dir, prepared, tmp_path / "out", data={"eval": {"eval_fraction": 0.25, "seed": 3}})
    run = build(recipe)
    train_fps = {row_fingerprint(r) for r in run.eval.train["row"]}
    eval_fps = {row_fingerprint(r) for r in run.eval.eval["row"]}
    assert train_fps and eval_fps and not train_fps & eval_fps
    assert len(run.eval.train) + len(run.eval.eval) == 46
    assert run.eval.summary["eval_rows"] == len(run.eval.eval) <= round(0.25 * 46)
    # The trainer got exactly these rows.
    assert len(run.trainer.train_dataset) == len(run.eval.train)
    assert len(run.trainer.eval_dataset) == len(run.eval.eval)
    other = build(_recipe(fixture_dir, prepared, tmp_path / "out2", data={"eval": {"eval_fraction": 0.25, "seed": 4}}))
    assert {row_fingerprint(r) for r in other.eval.eval["row"]} != eval_fps


def test_tiny_run_logs_eval_loss_at_the_configured_steps(fixture_dir, prepared_dir, tmp_path):
    out = train(_recipe(fixture_dir, prepared_dir, tmp_path / "out", data={"eval": {"eval_fraction": 0.2}},
                        sft={"max_steps": 6, "eval_steps": 3, "per_device_eval_batch_size": 4},
                        format_health={"steps": 3, "prompts": 2, "max_new_tokens": 24}))
    from beam_sft.train.callbacks import read_losses

    # Logging format health does not swallow the training loss of the same step.
    losses = read_losses(out)
    assert [r["step"] for r in losses] == [1, 2, 3, 4, 5, 6]
    assert all("mean_token_accuracy" in r for r in losses), losses  # TRL's metrics stay with their step
    metrics = read_metrics(out)
    evals = [r for r in metrics if "eval_loss" in r]
    assert [r["step"] for r in evals] == [3, 6]
    assert all(r["eval_loss"] > 0 for r in evals)
    health = [r for r in metrics if "format_health" in r]
    assert [r["step"] for r in health] == [3, 6]
    assert all(0.0 <= r["format_health"] <= 1.0 for r in health)
    # The task metrics of the same turns, through the real Trainer: every metric that counts all turns.
    assert all({"format_valid", "stop_accuracy", "distinct_ratio"} <= set(r) for r in health), health
    meta = json.loads((out / "beam_run.json").read_text())
    assert meta["preflight"]["eval"]["batches"] >= 1 and meta["preflight"]["eval"]["rows_checked"] > 0
    assert meta["preflight"]["eval"]["eval_rows"] + meta["preflight"]["eval"]["train_rows"] == 48
    lines = (out / "format_health.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["outputs"]


def test_eval_from_its_own_prepared_folder(fixture_dir, prepared_dir, tokenizer, tmp_path):
    eval_dir = write_prepared(tmp_path / "eval", train_rows(8, seed=7), tokenizer)
    run = build(_recipe(fixture_dir, prepared_dir, tmp_path / "out", data={"eval": {"prepared": str(eval_dir)}}))
    assert len(run.eval.train) == 48 and len(run.eval.eval) == 8
    report = preflight(run)
    assert report.eval["batches"] >= 1 and report.eval["mode"] == "prepared"


def test_eval_from_its_own_sources_is_prepared_and_verified(fixture_dir, prepared_dir, tmp_path):
    source = tmp_path / "eval.jsonl"
    source.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "meta"}) + "\n"
                              for r in train_rows(8, seed=7)), encoding="utf-8")
    out_eval = tmp_path / "eval_prepared"
    run = build(_recipe(fixture_dir, prepared_dir, tmp_path / "out", data={"eval": {"prepare": {
        "sources": [{"path": str(source), "format": "openai"}], "output": str(out_eval), "num_proc": 1}}}))
    report = json.loads((out_eval / "report.json").read_text())
    assert report["verify"]["ok"] is True  # prepared and verified like the training set
    assert len(run.eval.eval) == 8 and run.eval.summary["mode"] == "prepare"
    assert preflight(run).eval["rows_checked"] > 0


def test_eval_prepared_with_another_tokenizer_is_refused(fixture_dir, prepared_dir, tokenizer, tmp_path):
    import shutil

    train_dir = tmp_path / "train"
    shutil.copytree(prepared_dir, train_dir)
    eval_dir = write_prepared(tmp_path / "eval", train_rows(8, seed=7), tokenizer)
    for directory, digest in ((train_dir, "aaa"), (eval_dir, "bbb")):
        report = json.loads((directory / "report.json").read_text())
        report["fingerprint_parts"] = {**report.get("fingerprint_parts", {}), "tokenizer": digest, "template": "t"}
        report["verify"] = passed_verification(report, "re-verified: only the tokenizer differs")
        write_report(directory, report)  # sealed and verified: only the tokenizer differs
    with pytest.raises(ConfigError, match="another tokenizer"):
        build(_recipe(fixture_dir, train_dir, tmp_path / "out", data={"eval": {"prepared": str(eval_dir)}}))


def test_preflight_refuses_a_corrupted_eval_mask(fixture_dir, prepared_dir, tokenizer, tmp_path):
    def corrupt(record):
        mask = list(record["assistant_masks"])
        first = mask.index(1)
        mask[first - 1] = 1  # the token before <|channel|> trained
        record["assistant_masks"] = mask

    eval_dir = write_prepared(tmp_path / "eval", train_rows(8, seed=7), tokenizer, mutate=corrupt)
    run = build(_recipe(fixture_dir, prepared_dir, tmp_path / "out", data={"eval": {"prepared": str(eval_dir)}}))
    with pytest.raises(PreflightError, match="eval batches"):
        preflight(run)


def test_tensorboard_gets_the_run_record_and_the_figures(fixture_dir, prepared_dir, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    report = json.loads((prepared_dir / "report.json").read_text())
    report.update({"tokens": {"rows": 48, "total": 7000, "trained": 2000, "trained_fraction": 0.28},
                   "verify": {**report["verify"],
                              "trained_by_channel": {"analysis": {"fraction_of_trained": 0.4},
                                                     "final": {"fraction_of_trained": 0.6}}}})
    import shutil

    prepared = tmp_path / "prep"
    shutil.copytree(prepared_dir, prepared)
    report["verify"]["verified_report"] = content_digest(report)  # as if verified with these figures
    write_report(prepared, report)
    logs = tmp_path / "out" / "runs"  # transformers' default: output_dir/runs/<date>_<host>
    train(_recipe(fixture_dir, prepared, tmp_path / "out", data={"eval": {"eval_fraction": 0.2}},
                  sft={"max_steps": 2, "eval_steps": 2, "report_to": "tensorboard"},
                  format_health={"steps": 2, "prompts": 1, "max_new_tokens": 8}))
    events = EventAccumulator(str(next(p.parent for p in logs.rglob("events.out.tfevents.*"))),
                              size_guidance={"tensors": 0, "scalars": 0})
    events.Reload()
    scalars = set(events.Tags()["scalars"])
    assert {"prepare/rows", "prepare/trained_by_channel/final", "split/eval_rows", "eval/loss",
            "train/format_health", "train/format_valid", "train/stop_accuracy", "train/distinct_ratio"} <= scalars, scalars
    texts = events.Tags()["tensors"]
    assert any("beam_run" in tag for tag in texts) and any("format_health_sample" in tag for tag in texts), texts


@pytest.mark.parametrize(("sections", "key"), [
    ({"sft": {"eval_strategy": "steps"}}, "sft.eval_strategy"),
    ({"format_health": {"steps": 5}}, "format_health.steps"),
    ({"data": {"eval": {"eval_fraction": 0.1, "prepared": "x"}}}, "data.eval"),
    ({"data": {"eval": {"eval_fraction": 0.0}}}, "data.eval.eval_fraction"),
    ({"data": {"eval": {"eval_fraction": 0.1}}, "format_health": {"prompts": 0}}, "format_health.prompts"),
])
def test_recipe_eval_keys_are_checked(fixture_dir, prepared_dir, tmp_path, sections, key):
    with pytest.raises(ConfigError) as info:
        _recipe(fixture_dir, prepared_dir, tmp_path / "out", **sections)
    assert info.value.path == key


def test_eval_strategy_defaults_to_steps_with_an_eval_set(fixture_dir, prepared_dir, tmp_path):
    recipe = _recipe(fixture_dir, prepared_dir, tmp_path / "out", data={"eval": {"eval_fraction": 0.1}})
    assert recipe.sft["eval_strategy"] == "steps"
    assert "eval_strategy" not in _recipe(fixture_dir, prepared_dir, tmp_path / "out").sft


@pytest.mark.parametrize("name", ["tiny-cpu", "tiny-cpu-lora", "tiny-cpu-beam", "tiny-cpu-beam-lora",
                                  "beam-full-zero3", "beam-lora"])
def test_shipped_recipes_format_health_on_when_tiny_off_when_big(name):
    from pathlib import Path

    from beam_sft.train.recipe import load_recipe

    recipe = load_recipe(Path(__file__).resolve().parents[2] / "recipes" / f"{name}.yaml")
    if name.startswith("tiny"):
        assert recipe.format_health.steps > 0 and recipe.data.eval.eval_fraction
        assert recipe.sft["eval_strategy"] == "steps" and recipe.sft["eval_steps"] > 0
    else:
        assert recipe.format_health.steps == 0
