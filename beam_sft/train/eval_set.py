"""The eval set of a run (``data.eval``): where its rows come from, and the pre-flight of its batches.

Three ways, one result (``EvalData``: the training rows, the eval rows, and a summary for the run
record):

- ``eval_fraction``: the training rows are split by row fingerprint (``beam_sft.data.split``), after
  conversion and encoding, so no conversation is in both sets; every process computes the same split.
- ``prepare``: its own sources, prepared (cached, verified) on the main process first, like training's.
- ``prepared``: a prepared directory.

A separately prepared eval set must come from the same tokenizer and chat template as the training
set (compared by the fingerprint parts of both ``report.json``), or its loss would mean nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from beam_sft.config_utils import from_dict
from beam_sft.data.split import row_fingerprint, split_by_fingerprint
from beam_sft.dataset_folder.report_json import read_report
from beam_sft.errors import ConfigError
from beam_sft.prepare import prepare
from beam_sft.prepare.config import PrepareConfig
from beam_sft.train import data
from beam_sft.train.preflight import RowIndex, agree, check_batches, check_rows, raise_if


@dataclass
class EvalData:
    train: Any  # the training rows (all columns): the whole prepared dataset, or its train side
    eval: Any  # the eval rows (all columns)
    index_dataset: Any  # where the pre-flight finds an eval batch's rows
    summary: dict[str, Any] = field(default_factory=dict)


def row_fingerprints(dataset) -> list[str]:
    """The fingerprint of every row's canonical BeamRow, read from the ``row`` column in batches."""
    if "row" not in dataset.column_names:
        raise ConfigError("data.eval.eval_fraction", "the prepared dataset has no `row` column to split by")
    out: list[str] = []
    rows = dataset.select_columns(["row"])
    for start in range(0, len(rows), 4096):
        out.extend(row_fingerprint(text) for text in rows[start:start + 4096]["row"])
    return out


def split_dataset(dataset, fraction: float, seed: int) -> EvalData:
    fingerprints = row_fingerprints(dataset)
    split = split_by_fingerprint(fingerprints, fraction, seed)
    if not split.eval:
        raise ConfigError("data.eval.eval_fraction", f"holds out no rows of {len(dataset)} "
                          "(too few rows, or one conversation repeated throughout)")
    summary = {"mode": "eval_fraction", "fraction": fraction, "seed": seed, "train_rows": len(split.train),
               "eval_rows": len(split.eval), "split_by": "row fingerprint (canonical BeamRow without meta)",
               "distinct_rows": {"train": len({fingerprints[i] for i in split.train}),
                                 "eval": len({fingerprints[i] for i in split.eval})}}
    return EvalData(train=dataset.select(split.train), eval=dataset.select(split.eval), index_dataset=dataset,
                    summary=summary)


def _prepare_eval(recipe, state) -> Path:
    from accelerate import PartialState


    spec = dict(recipe.data.eval.prepare)
    if not spec.get("tokenizer"):
        spec["tokenizer"] = (recipe.data.prepare or {}).get("tokenizer") or recipe.model.path
    config = from_dict(PrepareConfig, spec, "data.eval.prepare")
    state = state or PartialState()
    with state.main_process_first():
        return Path(prepare(config))


def _same_encoding(train_dir: Path, eval_dir: Path) -> None:
    def parts(directory: Path) -> dict:
        return (read_report(directory) or {}).get("fingerprint_parts") or {}

    train, ev = parts(train_dir), parts(eval_dir)
    for key in ("tokenizer", "template"):
        if key in train and key in ev and train[key] != ev[key]:
            raise ConfigError("data.eval", f"{eval_dir} was prepared with another {key} than the training set "
                              f"{train_dir}: re-prepare it with the training tokenizer")


def resolve_eval(recipe, dataset, prepared_dir: Path, run_dir: Path, state=None) -> EvalData | None:
    """The run's eval set per ``recipe.data.eval`` (None without one)."""
    ev = recipe.data.eval
    if ev is None:
        return None
    if ev.eval_fraction is not None:
        return split_dataset(dataset, ev.eval_fraction, ev.seed)
    if ev.prepared is not None:
        eval_dir = Path(ev.prepared)
        if not eval_dir.is_dir():
            raise ConfigError("data.eval.prepared", f"{eval_dir} is not a directory (run `beam-sft prepare` first)")
    else:
        eval_dir = _prepare_eval(recipe, state)
    # the eval folder is held to the training folder's rules: sealed, unchanged, fully verified
    data.check_trainable(eval_dir, allow_unverified=getattr(recipe.data, "allow_unverified", False))
    data.load_prepared(eval_dir)
    _same_encoding(prepared_dir, eval_dir)
    # Its own view, so TRL's cache files land in the run's directory, not beside the eval data.
    eval_rows = data.load_prepared(data.dataset_view(eval_dir, Path(run_dir) / "eval", state))
    from beam_sft.train.provenance import folder_provenance

    summary = {"mode": "prepare" if ev.prepare is not None else "prepared", "eval_dir": str(eval_dir),
               "eval_data": folder_provenance(eval_dir), "train_rows": len(dataset), "eval_rows": len(eval_rows)}
    return EvalData(train=dataset, eval=eval_rows, index_dataset=eval_rows, summary=summary)


def check_eval_batches(trainer, eval_data: EvalData, tokenizer, recipe) -> dict[str, int]:
    """The pre-flight's batch and row checks on the trainer's own first eval batches (every process;
    all stop together if any finds a problem). Returns the counts for the run record."""
    args = trainer.args
    batches = []
    for batch in trainer.get_eval_dataloader():
        batches.append(batch)
        if len(batches) >= recipe.preflight.batches:
            break
    index = RowIndex(eval_data.index_dataset, max_length=args.max_length, truncation_mode=args.truncation_mode)
    problems, matched, count = check_batches(batches, eval_data.index_dataset, index,
                                             assistant_only_loss=recipe.assistant_only_loss,
                                             pad_token_id=tokenizer.pad_token_id)
    row_problems, rows_checked = check_rows(eval_data.index_dataset, matched, tokenizer,
                                            max_rows=recipe.preflight.max_rows)
    raise_if(agree(problems + row_problems, trainer.accelerator),
             "the trainer's first eval batches do not match the prepared masks")
    return {"batches": len(batches), "sequences": count, "rows_checked": rows_checked}


def eval_rows_json(eval_data: EvalData, limit: int = 512) -> list[dict]:
    """The first ``limit`` eval rows as canonical BeamRows (format health takes its prompts from them)."""
    rows = eval_data.eval
    if "row" not in rows.column_names:
        return []
    texts = rows.select(range(min(limit, len(rows)))).select_columns(["row"])["row"]
    return [json.loads(t) for t in texts if t]
