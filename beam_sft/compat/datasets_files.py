"""datasets' internals: how ``load_dataset`` lists and types a local repository's data files.

``data/hub.py`` reads a local repository's split as ``datasets.load_dataset(FOLDER, split=...)`` would:
the file extensions ``load_dataset`` resolves a pattern with (``datasets.packaged_modules.
_ALL_ALLOWED_EXTENSIONS``, private) and the one module it picks for a split's files
(``datasets.load.infer_module_for_data_files_list``, not exported). ``problems()`` names what a new
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
    return found
