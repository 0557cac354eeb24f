"""Sources that are ``datasets`` datasets: a hub id, or a local dataset repository laid out as on the hub.

How a source string is read (``parse_data_arg``; the same rule for ``--data``, a recipe's
``sources[].path`` and ``beam-sft convert``):

1. A path that exists locally is local, always. A local folder whose ``README.md`` front matter
   declares ``configs:`` (a dataset repository, as on the hub), or with no card whose files are named
   for two splits or more as ``datasets`` infers splits, is read as a dataset (one split, ``train``
   unless named); any other file or folder through ``beam_sft.data.sources``.
2. Otherwise ``ORG/NAME[:CONFIG][@SPLIT]`` (exactly one ``/``, no data-file suffix such as
   ``.jsonl``) is a hub id; ``BASE:CONFIG@SPLIT`` where ``BASE`` is a local folder is that folder.
3. Anything else stays a local path (and fails as "no such file or directory").

A recipe may spell the same with keys, as ``datasets.load_dataset`` does:
``{path: ORG/NAME, name: CONFIG, split: train, revision: REV, data_files: ...}`` (for a dataset
source ``name`` is the dataset's config, as in ``load_dataset``; its label in the report is
``ORG/NAME[:CONFIG]@SPLIT``). The split defaults to ``train``.

Rows stream (``streaming=True``): memory stays flat whatever the dataset's size. A local
repository's files are read one by one by ``beam_sft.data.sources`` (``local_data_files``), not
through ``datasets``, whose streaming casts every file to the first one's columns. The fingerprint
(``source_digest``) holds the resolved revision: the hub's commit hash for a hub id, a digest of
every file for a local repository, so changed data is encoded again.

>>> parse_data_arg("HuggingFaceH4/ultrachat_200k:default@train_sft")
DatasetRef(path='HuggingFaceH4/ultrachat_200k', name='default', split='train_sft', revision=None, data_files=None)
>>> parse_data_arg("data/chat.jsonl")  # a file name, even when the file is missing
'data/chat.jsonl'
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beam_sft.data.file_kinds import DATA_SUFFIXES
from beam_sft.errors import BeamError, ConfigError

DEFAULT_SPLIT = "train"
# Suffixes that make `dir/name.jsonl` a local file name rather than a hub id.
_FILE_SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet", ".csv", ".txt", ".arrow", ".gz", ".zst")
_HUB_ID = r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*"
_COMMIT = re.compile(r"[0-9a-f]{40}")
_SUFFIX_RE = re.compile(r"^(?P<base>.+?)(?::(?P<name>[\w.-]+))?(?:@(?P<split>[\w.-]+))?$")


@dataclass(frozen=True)
class DatasetRef:
    """One split of a ``datasets`` dataset: the arguments of ``datasets.load_dataset``."""

    path: str  # hub id or local dataset repository folder
    name: str | None = None  # the dataset config
    split: str = DEFAULT_SPLIT
    revision: str | None = None  # branch, tag or commit (hub ids only)
    data_files: Any = None  # str | list[str] | dict[str, str | list[str]], as load_dataset takes

    @property
    def is_local(self) -> bool:
        return Path(self.path).is_dir()

    @property
    def label(self) -> str:
        """``path[:name]@split``: the source's name in the report and the ``source`` column."""
        return f"{self.path}{':' + self.name if self.name else ''}@{self.split}"

    def describe(self) -> str:
        config = f", config {self.name}" if self.name else ""
        revision = f", revision {self.revision}" if self.revision else ""
        kind = "local dataset repository" if self.is_local else "dataset"
        return f"{kind} {self.path} (split {self.split}{config}{revision})"


def _card(path: str | Path) -> dict | None:
    """The YAML front matter of a folder's ``README.md``, or None."""
    from beam_sft.config_utils import MAX_CONFIG_BYTES, parse_yaml

    card = Path(path) / "README.md"
    if not card.is_file():
        return None
    with card.open(encoding="utf-8-sig", errors="replace") as fh:  # (a BOM before the front matter)
        text = fh.read(MAX_CONFIG_BYTES)  # the front matter is at the top; a card past this is not read whole
    if not text.startswith("---"):
        return None
    end = text.find("\n---", 3)
    if end < 0:
        return None
    try:  # bounded like a config: no alias bomb in a dataset's card (a folder's README is data)
        header = parse_yaml(text[3:end], card, unique_keys=False)
    except ConfigError:
        return None
    return header if isinstance(header, dict) else None


def is_dataset_repo(path: str | Path) -> bool:
    """A folder whose ``README.md`` opens with YAML front matter that declares ``configs``, or whose
    files are named for two splits or more as the hub names them (``data/train-*.parquet`` beside
    ``data/test-*.parquet``: ``_named_splits``), which ``datasets`` reads as a repository's splits.
    Read as a plain folder, the test split would be trained on."""
    header = _card(path)
    if header is not None and "configs" in header:
        return True
    return len(_named_splits(Path(path))) > 1


# datasets' split keywords and separators (datasets.data_files.SPLIT_KEYWORDS, NON_WORDS_CHARS): a
# cheap look at the names before asking datasets itself (importing it costs about a second).
_SPLIT_NAME_RE = re.compile(r"(?:^|[-._ 0-9/])(?:train|training|validation|valid|dev|val|test|testing|eval|"
                            r"evaluation)(?:[-._ 0-9/]|$)")


def _named_splits(root: Path) -> dict[str, list[str]]:
    """The split patterns ``datasets`` infers for a folder with no ``configs:`` card, when its data
    files are named for splits (``datasets.data_files.get_data_patterns``), else ``{}``."""
    if not root.is_dir():
        return {}
    names = [p.relative_to(root).as_posix() for p in root.rglob("*")
             if p.is_file() and p.name.lower().endswith(DATA_SUFFIXES) and not _is_hidden(p, root)]
    if not any(_SPLIT_NAME_RE.search(n) for n in names):
        return {}
    from datasets.data_files import get_data_patterns

    try:
        patterns = {str(split): list(p) for split, p in get_data_patterns(str(root)).items()}
    except Exception:  # noqa: BLE001 (datasets finds no data files it knows: not a repository to it)
        return {}
    if len(patterns) < 2:
        return {}
    # Only a folder every data file of which is in a split: `drone_training.jsonl` beside `test_case.json`
    # and `chat.jsonl` is a plain folder whose names happen to hold split words, and read by split it
    # would lose `chat.jsonl` unsaid.
    covered = {p.resolve() for pats in patterns.values() for pattern in pats for p in _resolve(root, pattern)}
    every = {(root / n).resolve() for n in names}
    return patterns if every <= covered else {}


def _is_hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _resolve(root: Path, pattern: str) -> list[Path]:
    """The files a ``data_files`` pattern names in a local repository, as ``datasets`` resolves them
    (``datasets.data_files.resolve_pattern``: ``**`` at any depth, hidden files and folders left out
    unless named), sorted."""
    from datasets.data_files import resolve_pattern

    try:
        return sorted(Path(p) for p in resolve_pattern(pattern, str(root)))
    except FileNotFoundError:
        return []


# The file types a local repository's files are read as by beam_sft.data.sources, file by file.
_OWN_READER = DATA_SUFFIXES


def _split_files(data_files: Any) -> dict[str, list[str]] | None:
    """``data_files`` as ``load_dataset`` takes it (a str, a list, a split mapping, or a card's list
    of ``{split, path}``) as split -> patterns; None for a shape not known here."""
    if isinstance(data_files, str):
        return {DEFAULT_SPLIT: [data_files]}
    if isinstance(data_files, dict):
        out = {}
        for split, paths in data_files.items():
            paths = [paths] if isinstance(paths, str) else paths
            if not (isinstance(paths, list) and all(isinstance(p, str) for p in paths)):
                return None
            out[str(split)] = paths
        return out
    if isinstance(data_files, list) and all(isinstance(p, str) for p in data_files):
        return {DEFAULT_SPLIT: list(data_files)}
    if isinstance(data_files, list) and all(isinstance(e, dict) and "split" in e and "path" in e for e in data_files):
        out = {}
        for entry in data_files:
            paths = [entry["path"]] if isinstance(entry["path"], str) else entry["path"]
            if not (isinstance(paths, list) and all(isinstance(p, str) for p in paths)):
                return None
            out.setdefault(str(entry["split"]), []).extend(paths)
        return out
    return None


def local_data_files(ref: DatasetRef) -> list[Path] | None:
    """The files of one split of a local dataset repository, each read by ``beam_sft.data.sources``
    on its own (so files of several types, or with columns that differ, read as they are, where
    ``datasets`` streaming casts every file to the first one's columns and fails on a mix of
    Parquet and JSON Lines). None when the card says something only ``datasets`` reads (another
    file type, a loading script, no ``configs``, features or a builder's options): then ``datasets``
    reads it.
    """
    listed = split_files(ref)
    if listed is None:
        return None
    files, own = listed
    return files if own and all(p.name.lower().endswith(_OWN_READER) for p in files) else None


def split_files(ref: DatasetRef) -> tuple[list[Path], bool] | None:
    """The files one split of a local repository reads, and whether the card leaves them to be read
    file by file (False: it holds features or a builder's options, ``datasets``' own reading); None
    when no pattern is known here (a loading script, no ``configs``) or ``ref`` is not local.

    Patterns are the card's (``data/train-*``), or with no card those ``datasets`` infers from
    split-named files (``_named_splits``), resolved as ``datasets`` resolves them (``_resolve``), in
    sorted order; a split or config the repository does not have is a ``BeamError`` naming them.
    ``local_data_files`` reads by this list, and prepare's check that no file is read twice asks it.
    """
    if not ref.is_local:
        return None
    root = Path(ref.path)
    data_files = ref.data_files
    inferred = False
    own = True
    if data_files is None:
        configs = (_card(root) or {}).get("configs")
        named = _named_splits(root) if configs is None and ref.name is None else {}
        if named:  # no card: the splits datasets infers from the files' names
            data_files, inferred = named, True
        else:
            if not isinstance(configs, list) or not all(isinstance(c, dict) for c in configs) or not configs:
                return None
            names = [str(c.get("config_name", "default")) for c in configs]
            if ref.name is not None:
                if ref.name not in names:
                    raise BeamError(f"{ref.describe()}: README.md declares no config {ref.name!r} "
                                    f"(configs: {', '.join(names)})")
                config = configs[names.index(ref.name)]
            else:
                config = next((c for c in configs if c.get("default") is True), None) or \
                    (configs[names.index("default")] if "default" in names else configs[0])
            data_files = config.get("data_files")
            if data_files is None:
                return None
            own = not set(config) - {"config_name", "data_files", "default"}
    splits = _split_files(data_files)
    if splits is None:
        return None
    if ref.split not in splits:
        raise BeamError(f"{ref.describe()}: no split {ref.split!r} in the repository "
                        f"(splits: {', '.join(sorted(splits))})")
    files: list[Path] = []
    for pattern in splits[ref.split]:
        found = _resolve(root, pattern)
        if not found and not inferred:  # (datasets' inferred patterns are alternatives)
            raise BeamError(f"{ref.describe()}: no file matches {pattern!r}")
        files.extend(p for p in found if p not in files)
    if inferred:
        files.sort()
    return files, own


def looks_like_hub_id(text: str) -> bool:
    """``org/name``: exactly one slash, no leading ``.``/``/``/``~``, no data-file suffix.

    >>> looks_like_hub_id("HuggingFaceH4/ultrachat_200k"), looks_like_hub_id("data/chat.jsonl")
    (True, False)
    >>> looks_like_hub_id("./org/name"), looks_like_hub_id("a/b/c")
    (False, False)
    """
    return re.fullmatch(_HUB_ID, text) is not None and not text.lower().endswith(_FILE_SUFFIXES)


def parse_data_arg(text: str | Path) -> str | DatasetRef:
    """A source string as given: a local path (returned as it is) or a ``DatasetRef`` (module doc)."""
    if isinstance(text, Path):
        text = str(text)
    if os.path.exists(text):
        return DatasetRef(text) if os.path.isdir(text) and is_dataset_repo(text) else text
    m = _SUFFIX_RE.match(text)
    if m is None:
        return text
    base, name, split = m["base"], m["name"], m["split"] or DEFAULT_SPLIT
    if os.path.isdir(base) or looks_like_hub_id(base):
        return DatasetRef(base, name=name, split=split)
    return text


def dataset_source(spec) -> str | DatasetRef:
    """What a ``SourceSpec`` (``path``, ``name``, ``split``, ``revision``, ``data_files``) reads.

    ``split``, ``revision`` or ``data_files`` make a folder a dataset source even without a
    ``configs:`` card; on a local file they are an error (they mean nothing there).
    """
    split = getattr(spec, "split", None)
    revision = getattr(spec, "revision", None)
    data_files = getattr(spec, "data_files", None)
    dataset_keys = split is not None or revision is not None or data_files is not None
    path = spec.path
    if os.path.isfile(path):
        if dataset_keys:
            raise ConfigError("split/revision/data_files", f"{path} is a file; these keys apply to a dataset "
                              "source (a hub id or a dataset repository folder)")
        return path
    if os.path.isdir(path) and not (dataset_keys or is_dataset_repo(path)):
        return path
    parsed = DatasetRef(path) if os.path.isdir(path) else parse_data_arg(path)
    if not isinstance(parsed, DatasetRef):
        if dataset_keys:
            raise ConfigError("path", f"{path}: no such local folder, and not a hub id (ORG/NAME)")
        return path
    for key, given, inline in (("name", spec.name, parsed.name),
                               ("split", split, parsed.split if parsed.split != DEFAULT_SPLIT else None)):
        if given is not None and inline is not None and given != inline:
            raise ConfigError(key, f"{path} says {inline!r} but the source's {key} says {given!r}")
    ref = DatasetRef(parsed.path, name=spec.name or parsed.name, split=split or parsed.split,
                     revision=revision, data_files=data_files)
    if ref.is_local and revision is not None:
        raise ConfigError("revision", f"{path} is a local folder: it is pinned by its files, not a revision")
    return ref


def source_label(spec) -> str:
    """The report label of a ``SourceSpec``: its ``name`` or path, or ``path[:config]@split``."""
    source = dataset_source(spec)
    if isinstance(source, DatasetRef):
        return source.label
    return spec.name or spec.path


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``HF_DATASETS_OFFLINE``) as the user set it now (read at call time)."""
    values = [os.environ.get(k, "") for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")]
    if any(v.strip().upper() in ("1", "ON", "YES", "TRUE") for v in values):
        return True
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except ImportError:
        return False


def _refuse_offline(ref: DatasetRef) -> None:
    if not ref.is_local and hub_offline():
        raise BeamError(f"{ref.describe()}: not a local path, and the hub cannot be reached (HF_HUB_OFFLINE is "
                        "set); unset it, or give a local file or dataset repository folder")


def resolve_revision(ref: DatasetRef) -> str:
    """The revision the rows come from: the hub's commit hash, or ``files:<digest>`` of a local repository."""
    from beam_sft.data import fingerprint as fp

    if ref.is_local:
        return "files:" + fp.data_digest(ref.path)
    if ref.revision and _COMMIT.fullmatch(ref.revision):
        return ref.revision  # pinned to a commit: nothing to ask the hub (a cached prepare works offline)
    _refuse_offline(ref)
    from huggingface_hub import HfApi

    try:
        info = HfApi().dataset_info(ref.path, revision=ref.revision)
    except Exception as exc:  # not found, gated, no network: all mean "cannot read it"
        raise BeamError(f"{ref.describe()}: no local path of that name, and the hub cannot resolve it: "
                        f"{type(exc).__name__}: {exc}") from exc
    if not info.sha:
        raise BeamError(f"{ref.describe()}: the hub gave no commit hash for it")
    return info.sha


def source_digest(spec) -> str:
    """The fingerprint part of one source's data: file bytes, or the dataset and its resolved revision."""
    from beam_sft.data import fingerprint as fp

    source = dataset_source(spec)
    if not isinstance(source, DatasetRef):
        return fp.data_digest(source)
    return fp.digest_json({"dataset": source.path, "name": source.name, "split": source.split,
                           "data_files": source.data_files, "revision": resolve_revision(source)})


def iter_dataset(ref: DatasetRef) -> Iterator[tuple[int, Any]]:
    """``(row index, record)`` of one split, streamed. Records are as ``datasets`` gives them (Arrow
    fills missing struct keys with None; ``beam_sft.data.sources`` drops those, as for Parquet)."""
    import datasets

    _refuse_offline(ref)
    revision = None if ref.is_local else resolve_revision(ref)  # read the commit the fingerprint names
    try:
        dataset = datasets.load_dataset(ref.path, ref.name, split=ref.split, revision=revision,
                                        data_files=ref.data_files, streaming=True)
    except Exception as exc:  # missing config or split, unreadable files, unreachable hub
        raise BeamError(f"{ref.describe()}: cannot load it: {type(exc).__name__}: {exc}") from exc
    rows = iter(dataset)
    index = 0
    while True:
        try:
            record = next(rows)
        except StopIteration:
            return
        except Exception as exc:  # e.g. a later file whose columns differ from the first one's
            raise BeamError(f"{ref.describe()}: reading stopped at row {index}: {type(exc).__name__}: {exc}") from exc
        yield index, record
        index += 1
