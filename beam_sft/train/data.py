"""The prepared dataset as training reads it (see the prepared-dataset contract in DESIGN.md)."""

from __future__ import annotations

from pathlib import Path

from beam_sft.errors import ConfigError, PreflightError

REQUIRED_COLUMNS = ("input_ids", "assistant_masks")


def resolve_prepared(recipe, state=None) -> Path:
    """The prepared directory: ``data.prepared``, or ``data.prepare`` run on the main process first.

    The other processes wait, then call ``prepare`` with the same spec, which finds the cache the
    main process wrote (same fingerprint) instead of preparing again.
    """
    if recipe.data.prepared is not None:
        path = Path(recipe.data.prepared)
        if not path.is_dir():
            raise ConfigError("data.prepared", f"{path} is not a directory (run `beam-sft prepare` first)")
        return path
    from accelerate import PartialState

    from beam_sft.config_utils import from_dict
    from beam_sft.encode import prepare
    from beam_sft.encode.config import PrepareConfig

    spec = dict(recipe.data.prepare)
    if not spec.get("tokenizer"):  # the model's own tokenizer, as training will use it
        spec["tokenizer"] = recipe.model.path
    config = from_dict(PrepareConfig, spec, "data.prepare")
    state = state or PartialState()
    with state.main_process_first():
        return Path(prepare(config))


def dataset_view(prepared_dir: Path, run_dir: Path, state=None) -> Path:
    """A directory of links to the prepared dataset's files, inside the run's output directory.

    TRL's ``datasets.map`` calls (labels, truncation, packing) write their cache files beside the
    dataset's Arrow files. Loading through this view sends them to the run's directory, so the
    prepared directory stays exactly as ``prepare`` and ``verify`` left it (and may be read-only).
    Each machine's first process makes the view; making it again is harmless.
    """
    import json
    import os

    from accelerate import PartialState

    prepared_dir, view = Path(prepared_dir).resolve(), Path(run_dir) / "prepared_view"
    state = state or PartialState()
    with state.local_main_process_first():
        if state.is_local_main_process:
            files = ["state.json", "dataset_info.json"]
            files += [f["filename"] for f in json.loads((prepared_dir / "state.json").read_text())["_data_files"]]
            view.mkdir(parents=True, exist_ok=True)
            for name in files:
                link, temporary = view / name, view / f".{name}.{os.getpid()}"
                temporary.unlink(missing_ok=True)
                temporary.symlink_to(prepared_dir / name)
                os.replace(temporary, link)
    return view


def load_prepared(directory: Path):
    """``datasets.load_from_disk`` plus a check that the contract's columns are there."""
    from datasets import load_from_disk

    try:
        dataset = load_from_disk(str(directory))
    except FileNotFoundError as exc:
        raise ConfigError("data.prepared", f"{directory}: not a saved dataset ({exc})") from exc
    missing = [c for c in REQUIRED_COLUMNS if c not in dataset.column_names]
    if missing:
        raise PreflightError(f"{directory}: prepared dataset lacks column(s) {missing}")
    if len(dataset) == 0:
        raise PreflightError(f"{directory}: prepared dataset is empty")
    return dataset


def load_tokenizer(directory: Path):
    """The tokenizer the dataset was prepared with (DIR/tokenizer), so ids and template agree."""
    from transformers import AutoTokenizer

    path = Path(directory) / "tokenizer"
    if not path.is_dir():
        raise PreflightError(f"{directory}: no tokenizer/ beside the dataset; re-run `beam-sft prepare`")
    return AutoTokenizer.from_pretrained(str(path))


def trainer_dataset(dataset, *, assistant_only_loss: bool):
    """The columns TRL gets: ``input_ids`` (so it does not render) and, for assistant-only loss, the
    masks it turns into labels (-100 where the mask is 0). Without masks every token is trained."""
    columns = ["input_ids", "assistant_masks"] if assistant_only_loss else ["input_ids"]
    return dataset.select_columns(columns)
