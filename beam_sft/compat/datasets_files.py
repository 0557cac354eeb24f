"""datasets' internals: how ``load_dataset`` lists and types a local repository's data files.

``data/hub.py`` reads a local repository's split as ``datasets.load_dataset(FOLDER, split=...)`` would:
the file extensions ``load_dataset`` resolves a pattern with (``datasets.packaged_modules.
_ALL_ALLOWED_EXTENSIONS``, private), the one module it picks for a split's files
(``datasets.load.infer_module_for_data_files_list``, not exported), the one module all splits must
agree on (``infer_module_for_data_files``) and, for a folder whose splits are inferred from its file
names, the files of each split as ``datasets.load.LocalDatasetModuleFactory.get_module`` resolves
them (``inferred_split_files``): asked of datasets, never re-derived. ``problems()`` names what a new
datasets changed.
"""

from __future__ import annotations


def allowed_extensions() -> list[str]:
    """The extensions ``load_dataset`` resolves a repository's data-file patterns with."""
    from datasets.packaged_modules import _ALL_ALLOWED_EXTENSIONS

    return list(_ALL_ALLOWED_EXTENSIONS)


def split_module(files: list[str]) -> str | None:
    """The packaged module (``json``, ``parquet``, ``csv`` ...) ``load_dataset`` reads these files with."""
    from datasets.load import infer_module_for_data_files_list

    return infer_module_for_data_files_list(files)[0]


def common_module(files: dict[str, list[str]]) -> str:
    """The module every split of a repository is read with, as ``load_dataset`` infers it from the
    first config's files (``datasets.load.infer_module_for_data_files``); ``ValueError`` naming each
    split's module when they differ, or when one split has no data file datasets reads: datasets
    refuses the whole folder then, whichever split was asked for."""
    from datasets.load import infer_module_for_data_files

    return infer_module_for_data_files(files)[0]


def inferred_split_files(base: str) -> dict[str, list[str]]:
    """split -> the files under ``base`` that ``load_dataset(base)`` puts in it when no card lists
    them (``datasets.data_files.get_data_patterns`` resolved as ``get_module`` resolves them, every
    extension datasets allows, sorted), before the filter to one module's extensions; ``{}`` when
    datasets finds no data file there."""
    from datasets.data_files import DataFilesDict, EmptyDatasetError, get_data_patterns

    try:
        patterns = get_data_patterns(base)
        resolved = DataFilesDict.from_patterns(patterns, base_path=base, allowed_extensions=allowed_extensions())
    except (EmptyDatasetError, FileNotFoundError):
        return {}
    return {str(split): sorted(files) for split, files in resolved.items()}


def module_files(files: list[str], module: str) -> list[str]:
    """The files of a split ``load_dataset`` keeps once it has picked the module: those of the
    module's extensions (``DataFilesList.filter``); the others are dropped, unsaid."""
    from datasets.data_files import DataFilesList
    from datasets.packaged_modules import (
        _MODULE_TO_EXTENSIONS,
        _MODULE_TO_METADATA_EXTENSIONS,
        _MODULE_TO_METADATA_FILE_NAMES,
    )

    kept = DataFilesList(list(files), [None] * len(files)).filter(
        extensions=_MODULE_TO_EXTENSIONS[module] + _MODULE_TO_METADATA_EXTENSIONS[module],
        file_names=_MODULE_TO_METADATA_FILE_NAMES[module])
    return list(kept)


def repository_refusal(path: str, data_files=None) -> tuple[str, bool] | None:
    """Why ``load_dataset(path)`` refuses a local repository before it reads a row (its card, its
    files, one module for every split: ``datasets.load.LocalDatasetModuleFactory.get_module``), in one
    line, and whether the reason is only that its splits' files differ in type (the module datasets
    picks for each, ``infer_module_for_data_files``); None when it does not refuse it."""
    from datasets.load import LocalDatasetModuleFactory

    try:
        LocalDatasetModuleFactory(path, data_files=data_files).get_module()
    except Exception as exc:  # noqa: BLE001 (whatever datasets raises is its refusal, said as it says it)
        said = " ".join(str(exc).split())
        return f"{type(exc).__name__}: {said}", isinstance(exc, ValueError) and said.startswith(_MODULES_DIFFER)
    return None


# The start of infer_module_for_data_files' refusal (problems() checks it still says so).
_MODULES_DIFFER = "Couldn't infer the same data file format for all splits"


def problems() -> list[str]:
    try:
        extensions = allowed_extensions()
        picked = split_module(["a.jsonl", "b.jsonl", "c.csv"])
    except (ImportError, AttributeError, TypeError, IndexError) as exc:
        return [f"datasets' data-file listing: {type(exc).__name__}: {exc}"]
    found = []
    if ".jsonl" not in extensions or ".parquet" not in extensions:
        found.append("datasets.packaged_modules._ALL_ALLOWED_EXTENSIONS: no longer lists .jsonl and .parquet")
    if picked != "json":
        found.append(f"datasets.load.infer_module_for_data_files_list: picked {picked!r} for two .jsonl and a .csv")
    try:
        kept = module_files(["a.jsonl", "c.csv"], "json")
        refused = _refuses({"train": ["a.jsonl"], "test": ["b.parquet"]})
    except (ImportError, AttributeError, TypeError, IndexError, KeyError) as exc:
        return [*found, f"datasets' split resolution: {type(exc).__name__}: {exc}"]
    if kept != ["a.jsonl"]:
        found.append(f"datasets.data_files.DataFilesList.filter: kept {kept} of a.jsonl, c.csv for json")
    if not refused:
        found.append("datasets.load.infer_module_for_data_files: no longer refuses a json split beside a parquet one "
                     f"with {_MODULES_DIFFER!r}")
    return found

def _refuses(files: dict[str, list[str]]) -> bool:
    try:
        common_module(files)
    except ValueError as exc:
        return str(exc).startswith(_MODULES_DIFFER)
    return False
