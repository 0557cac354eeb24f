"""The prepared dataset as training reads it: only through ``beam_sft.dataset_folder`` (the contract)."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

from beam_sft.errors import ConfigError, OutputRefused, PreflightError, PreparedError

logger = logging.getLogger("beam_sft.train")


def run_inputs(recipe) -> dict[str, object]:
    """Every local path the run reads, by its key path: the model, the tokenizer, the prepared folders
    (train and eval, given or to be prepared) and their sources."""
    inputs: dict[str, object] = {"model.path": recipe.model.path or None,
                                 "data.prepared": recipe.data.prepared}
    specs = {"data.prepare": recipe.data.prepare}
    if recipe.data.eval is not None:
        inputs["data.eval.prepared"] = recipe.data.eval.prepared
        specs["data.eval.prepare"] = recipe.data.eval.prepare
    for key, spec in specs.items():
        if not isinstance(spec, dict):
            continue
        for name in ("tokenizer", "output"):
            if isinstance(spec.get(name), str):
                inputs[f"{key}.{name}"] = spec[name]
        sources = spec.get("sources") if isinstance(spec.get("sources"), list) else []
        inputs[f"{key}.sources"] = [s["path"] for s in sources if isinstance(s, dict) and isinstance(s.get("path"), str)]
    return inputs


def check_run_paths(recipe) -> None:
    """The paths of a run, before anything heavy: the model (and a prepare's tokenizer) is a local path
    or a hub id, and ``sft.output_dir`` is apart from every input (``check_output_dir``)."""
    from beam_sft.paths import check_local_or_hub_id

    if recipe.model.path:
        check_local_or_hub_id(recipe.model.path, "model.path")
    spec = recipe.data.prepare
    if isinstance(spec, dict) and isinstance(spec.get("tokenizer"), str) and spec["tokenizer"]:
        check_local_or_hub_id(spec["tokenizer"], "data.prepare.tokenizer")
    check_output_dir(recipe)


def check_output_dir(recipe) -> None:
    """Refuse an ``sft.output_dir`` that is, contains or lies inside anything the run reads (the model,
    its tokenizer, a prepared folder, a source), or that is or lies inside the checkpoint it resumes
    from (a checkpoint-N inside output_dir is the normal case): training there would overwrite the base
    weights or the data. Compared on disk: links, ``..`` and hard links included."""
    from beam_sft.paths import check_paths, check_writable_target, relation

    out = recipe.sft.get("output_dir")
    if not out:
        return
    check_paths(run_inputs(recipe), {"sft.output_dir": out})
    resume = recipe.sft.get("resume_from_checkpoint")
    if isinstance(resume, str) and Path(resume).exists() and relation(out, resume) in ("is", "lies inside"):

        raise OutputRefused(out, f"sft.output_dir {relation(out, resume)} the checkpoint it resumes from "
                                 f"({resume}, sft.resume_from_checkpoint)", hint=False)
    check_writable_target(out, kind="folder", label="sft.output_dir")
    check_run_folder(Path(out), resuming=bool(resume))


# What a run writes into its output_dir before anything a user could keep there (a resumed or repeated run
# finds them): the run record (run_log.run_record), the data views (dataset_view), the step logs.
RUN_MARKS = ("beam_run.json", "prepared_view", "eval", "losses.jsonl", "metrics.jsonl", "format_health.jsonl",
             "runs")  # runs: the trainer's TensorBoard folder, made by rank 0 while a slower rank checks
_CHECKPOINT = re.compile(r"checkpoint-\d+")


def check_run_folder(out: Path, *, resuming: bool = False) -> None:
    """A non-empty ``sft.output_dir`` must be a training run's own: it holds ``beam_run.json`` (the run
    record, written first), or nothing but ``RUN_MARKS`` and ``checkpoint-N`` (a run that stopped before
    its record, or another rank of this one). A name alone is not enough where anything else is there:
    the final save writes README.md (the model card), config.json, the tokenizer and the weights over
    whatever a user keeps in that folder. An earlier run's ``checkpoint-N`` folders are refused unless
    this run resumes: a new run would rotate them away (``save_total_limit``) or save its own among
    them, and a later ``resume_from_checkpoint: true`` would pick whichever is last."""
    if not out.is_dir():
        return
    names = sorted(p.name for p in out.iterdir())
    if not names:
        return
    if "beam_run.json" not in names and not all(n in RUN_MARKS or _CHECKPOINT.fullmatch(n) for n in names):
        others = [n for n in names if n not in RUN_MARKS and not _CHECKPOINT.fullmatch(n)]
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise OutputRefused(out, f"sft.output_dir holds files no training run wrote ({shown}); the run writes "
                                 "README.md, config.json, the tokenizer and the weights there. Give a new or empty "
                                 "folder, or the folder of an earlier run to resume", hint=False)
    checkpoints = [n for n in names if _CHECKPOINT.fullmatch(n)]
    if checkpoints and not resuming:
        checkpoints.sort(key=lambda n: int(n.split("-")[1]))
        shown = ", ".join(checkpoints[-3:])
        raise OutputRefused(out, f"sft.output_dir holds an earlier run's checkpoints ({shown}): a new run would "
                                 "rotate them away or save its own among them. Resume it (sft.resume_from_checkpoint: "
                                 "true), or give a new output_dir", hint=False)


def resolve_prepared(recipe, state=None) -> Path:
    """The prepared directory, checked fit to train on (``check_trainable``): ``data.prepared``, or
    ``data.prepare`` run on the main process first.

    The other processes wait, then call ``prepare`` with the same spec, which finds the cache the
    main process wrote (same fingerprint) instead of preparing again.
    """
    check_run_paths(recipe)  # before anything is prepared or written
    allow = getattr(recipe.data, "allow_unverified", False)
    if recipe.data.prepared is not None:
        path = Path(recipe.data.prepared)
        if not path.is_dir():
            raise ConfigError("data.prepared", f"{path} is not a directory (run `beam-sft prepare` first)")
        check_trainable(path, allow_unverified=allow)
        return path
    from accelerate import PartialState

    from beam_sft.config_utils import from_dict
    from beam_sft.prepare import PrepareConfig, prepare

    spec = dict(recipe.data.prepare)
    if not spec.get("tokenizer"):  # the model's own tokenizer, as training will use it
        spec["tokenizer"] = recipe.model.path
    config = from_dict(PrepareConfig, spec, "data.prepare")
    if not config.sources:  # (prepare says "sources": here the key is the recipe's)
        raise ConfigError("data.prepare.sources", "no data sources given")
    state = state or PartialState()
    with state.main_process_first():
        path = Path(prepare(config))
    check_trainable(path, allow_unverified=allow)
    return path


def check_trainable(directory: Path, *, allow_unverified: bool = False) -> None:
    """Refuse a folder whose report.json is missing or edited (its seal), whose files are no longer
    what it recorded, whose counts disagree, or that has no passing *full* verification of exactly
    these files (a sample's result never counts; a folder prepare kept aside after a failed one never
    trains); ``data.allow_unverified: true`` trains on it anyway, with a warning that says why."""
    from beam_sft.dataset_folder import check_counts, check_integrity, check_verified, require_report

    try:
        report = require_report(directory)
        check_integrity(directory, report)
        check_counts(directory, report)
        check_verified(directory, report)
    except PreparedError as exc:
        if not allow_unverified:
            raise PreflightError(f"refusing to train: {exc} (data.allow_unverified: true trains on it anyway)") from exc
        logger.warning("TRAINING ON DATA THAT IS NOT PROVEN (data.allow_unverified is set): %s", exc)


def dataset_view(prepared_dir: Path, run_dir: Path, state=None) -> Path:
    """A directory of links to the prepared dataset's files, inside the run's output directory.

    TRL's ``datasets.map`` calls (labels, truncation, packing) write their cache files beside the
    dataset's Arrow files. Loading through this view sends them to the run's directory, so the
    prepared directory stays exactly as ``prepare`` and ``verify`` left it (and may be read-only).
    Each machine's first process makes the view; making it again is harmless.
    """
    import os

    from accelerate import PartialState

    from beam_sft.dataset_folder.arrow_dataset import dataset_file_names

    prepared_dir, view = Path(prepared_dir).resolve(), Path(run_dir) / "prepared_view"
    state = state or PartialState()
    with state.local_main_process_first():
        if state.is_local_main_process:
            view.mkdir(parents=True, exist_ok=True)
            for name in dataset_file_names(prepared_dir):
                link, temporary = view / name, view / f".{name}.{os.getpid()}"
                temporary.unlink(missing_ok=True)
                temporary.symlink_to(prepared_dir / name)
                os.replace(temporary, link)
    return view


def load_prepared(directory: Path):
    """The dataset's rows, with the contract's columns and types checked (``beam_sft.dataset_folder``).

    Called on the prepared folder and on its view (which holds the dataset files alone); whether the
    folder may be trained on at all is ``check_trainable``'s call, made in ``resolve_prepared``.
    """
    from beam_sft.dataset_folder import load_prepared as load

    try:
        return load(directory, integrity=False, require_report=False)
    except PreparedError as exc:
        raise PreflightError(str(exc)) from exc


def load_tokenizer(directory: Path):
    """The tokenizer the dataset was prepared with (DIR/tokenizer), so ids and template agree."""
    from beam_sft.dataset_folder import prepared_tokenizer

    try:
        return prepared_tokenizer(directory)
    except PreparedError as exc:
        raise PreflightError(str(exc)) from exc


def trainer_dataset(dataset, *, assistant_only_loss: bool):
    """The columns TRL gets: ``input_ids`` (so it does not render) and, for assistant-only loss, the
    masks it turns into labels (-100 where the mask is 0). Without masks every token is trained."""
    columns = ["input_ids", "assistant_masks"] if assistant_only_loss else ["input_ids"]
    return dataset.select_columns(columns)


def truncation_counts(dataset, max_length: int | None, truncation_mode: str = "keep_start") -> dict | None:
    """How ``sft.max_length`` cuts the prepared rows, or None when it cuts none: TRL truncates each longer
    row, then drops the rows left without a trained token ("Dropping fully masked examples"). Counted
    before step 1 so that no row is lost unsaid; ``beam_run.json`` records it."""
    import numpy as np

    from beam_sft.arrow_arrays import numbers

    if max_length is None or len(dataset) == 0:
        return None
    table = dataset.data if hasattr(dataset, "data") else None
    if table is None or "num_tokens" not in table.column_names:
        return None
    lengths = np.asarray(numbers(table.column("num_tokens")), dtype=np.int64)
    over = np.flatnonzero(lengths > max_length)
    if not len(over):
        return None
    dropped = cut = 0
    for row in dataset.select(over.tolist()).select_columns(["assistant_masks"]):
        mask = np.asarray(row["assistant_masks"], dtype=np.int64)
        kept = int(mask[-max_length:].sum() if truncation_mode == "keep_end" else mask[:max_length].sum())
        cut += int(mask.sum()) - kept
        dropped += kept == 0
    return {"max_length": int(max_length), "rows": len(lengths), "truncated": len(over), "dropped": int(dropped),
            "trained_tokens_cut": int(cut), "truncation_mode": truncation_mode}


def say_truncation(counts: dict | None, split: str = "train") -> None:
    if counts:
        print(f"beam-sft train: sft.max_length {counts['max_length']} cuts {counts['truncated']} of the "
              f"{counts['rows']} {split} rows ({counts['trained_tokens_cut']} trained tokens); "
              f"{counts['dropped']} of them keep no trained token and are dropped (prepare with --max-length "
              f"{counts['max_length']} to drop or trim them by turns, counted in the report)", file=sys.stderr)
