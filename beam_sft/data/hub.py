"""Sources that are ``datasets`` datasets: a hub id, or a local dataset repository laid out as on the hub.

How a source string is read (``parse_data_arg``; the same rule for ``--data``, a recipe's
``sources[].path`` and ``beam-sft convert``):

1. A path that exists locally is local, always. A local folder whose ``README.md`` front matter
   (or ``.huggingface.yaml``) declares ``configs:`` (a dataset repository, as on the hub), or with no
   card whose files are named for two splits or more as ``datasets`` infers splits, is read as a
   dataset (one split, ``train`` unless named); any other file or folder through
   ``beam_sft.data.sources``.
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
    """A folder's repository metadata as ``datasets`` reads it: the YAML front matter of its
    ``README.md``, with the top-level keys of ``.huggingface.yaml`` over it (a hub repository may keep
    its ``configs:`` there); None when there is neither. Front matter that is not YAML is refused, as
    ``datasets`` refuses it: read as a plain folder, every split's files would be trained on."""
    root = Path(path)
    header = _front_matter(root / "README.md")
    standalone = root / _STANDALONE_YAML
    if standalone.is_file():
        extra = _yaml(standalone, standalone.read_text(encoding="utf-8-sig", errors="replace"))
        if isinstance(extra, dict):
            header = {**(header or {}), **extra}
    return header


_STANDALONE_YAML = ".huggingface.yaml"  # datasets.config.REPOYAML_FILENAME


def _front_matter(card: Path) -> dict | None:
    from beam_sft.config_utils import MAX_CONFIG_BYTES

    if not card.is_file():
        return None
    with card.open(encoding="utf-8-sig", errors="replace") as fh:  # (a BOM before the front matter)
        text = fh.read(MAX_CONFIG_BYTES)  # the front matter is at the top; a card past this is not read whole
    if not text.startswith("---"):
        return None
    end = text.find("\n---", 3)
    if end < 0:
        return None
    header = _yaml(card, text[3:end])
    return header if isinstance(header, dict) else None


def _yaml(where: Path, text: str):
    from beam_sft.config_utils import parse_yaml

    try:  # bounded like a config: no alias bomb in a dataset's card (a folder's README is data)
        return parse_yaml(text, where, unique_keys=False)
    except ConfigError as exc:
        raise BeamError(f"{exc}; datasets cannot read the folder's metadata either: fix the YAML, or move "
                        f"{where.name} out of {where.parent} to read it as a plain folder") from None


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


# datasets.naming._split_re: the split names datasets accepts (a card naming another fails to load whole).
_SPLIT_NAME_OK = re.compile(r"\w+(\.\w+)*")
# The keys of a card config read here file by file; any other (features, field, sep, ...) is a builder
# option only datasets applies.
_OWN_KEYS = {"config_name", "data_files", "data_dir", "default"}


def _split_files(data_files: Any, where: str) -> dict[str, list[str]] | None:
    """``data_files`` as ``load_dataset`` takes it (a str, a list, a split mapping, or a card's list
    of ``{split, path}``) as split -> patterns, checked as ``datasets.data_files.sanitize_patterns``
    checks it (a list mixing patterns and splits, a split given twice: refused, naming ``where``);
    None for a shape not known here (then ``datasets`` reads it, and says what is wrong)."""
    def paths(value):
        value = [value] if isinstance(value, str) else value
        return value if isinstance(value, list) and value and all(isinstance(v, str) for v in value) else None

    if isinstance(data_files, dict):
        out = {str(split): paths(value) for split, value in data_files.items()}
        return None if any(v is None for v in out.values()) else out
    if isinstance(data_files, list) and any(isinstance(e, dict) for e in data_files):
        if not all(isinstance(e, dict) and set(e) == {"split", "path"} and paths(e["path"]) for e in data_files):
            raise BeamError(f"{where}: a data_files entry is not {{split: NAME, path: PATTERN or [PATTERNS]}} beside "
                            "entries that are (a pattern, another key, an empty path); datasets refuses it too")
        splits = [str(e["split"]) for e in data_files]
        twice = sorted({s for s in splits if splits.count(s) > 1})
        if twice:
            raise BeamError(f"{where}: data_files names split {', '.join(map(repr, twice))} in two entries; datasets "
                            "refuses it: give one entry per split, with a list of patterns as its path")
        return {str(e["split"]): paths(e["path"]) for e in data_files}
    listed = paths(data_files)
    return {DEFAULT_SPLIT: listed} if listed is not None else None


def _check_split_names(splits: dict[str, list[str]], where: str) -> None:
    bad = [s for s in splits if not _SPLIT_NAME_OK.fullmatch(s)]
    if bad:
        raise BeamError(f"{where}: split name {', '.join(map(repr, bad))} is not one datasets accepts (words of "
                        "letters, digits and _ joined by '.'; no '-'), so datasets cannot load it: rename the split")


def _chosen_config(ref: DatasetRef, configs: Any) -> dict:
    """The card config ``load_dataset(path, name)`` reads, chosen and checked as ``datasets``
    (``MetadataConfigs``) does: every config named by a ``config_name``, no name twice; with no name
    given, the only config, else the one named ``default`` or marked ``default: true`` (two such, or
    none among several: refused, naming the configs, never the first one read in their place). Every
    config's ``data_files`` is checked, as ``datasets`` fails to load a card with one bad config."""
    where = f"{ref.path}: README.md"
    if not isinstance(configs, list) or not configs or not all(isinstance(c, dict) for c in configs):
        raise BeamError(f"{where}: configs is not a list of configs (each a mapping with config_name and "
                        "data_files); datasets cannot load it either")
    names = []
    for config in configs:
        name = config.get("config_name")
        if not isinstance(name, str):
            raise BeamError(f"{where}: a config has no config_name ({_shown(config)}); datasets refuses it: "
                            "name it (config_name: default for the one read when none is named)")
        if name in names:
            raise BeamError(f"{where}: two configs are named {name!r}; datasets would read the last one "
                            "unsaid: rename one")
        names.append(name)
        if config.get("data_files") is not None:
            splits = _split_files(config["data_files"], f"{where}, config {name!r}")
            if splits is not None:
                _check_split_names(splits, f"{where}, config {name!r}")
    if ref.name is not None:
        if ref.name not in names:
            raise BeamError(f"{ref.describe()}: README.md declares no config {ref.name!r} "
                            f"(configs: {', '.join(names)})")
        return configs[names.index(ref.name)]
    defaults = [n for n, c in zip(names, configs, strict=True) if len(configs) == 1 or n == "default" or c.get("default")]
    how = f"name one: {ref.path}:CONFIG on the command line, or name: CONFIG in a recipe's source"
    if len(defaults) > 1:
        raise BeamError(f"{ref.path}: README.md marks {len(defaults)} configs as the default "
                        f"({', '.join(defaults)}); datasets refuses it: {how}")
    if not defaults:
        raise BeamError(f"{ref.path}: README.md declares configs {', '.join(names)} and none is the default "
                        f"(config_name: default, or default: true); {how}")
    return configs[names.index(defaults[0])]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


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


def _split_plan(ref: DatasetRef) -> tuple[Path, dict[str, list[str]], bool, bool] | None:
    """Where a local repository's patterns resolve from, its split -> patterns, whether ``datasets``
    inferred them from file names (alternatives: one that matches nothing is no error), and whether
    the files may be read file by file; None for what only ``datasets`` knows (a loading script, a
    config name with no card)."""
    root = Path(ref.path)
    if ref.data_files is not None:  # given with the source: the card's configs do not apply
        splits = _split_files(ref.data_files, f"{ref.describe()}: data_files")
        return (root, splits, False, True) if splits is not None else None
    configs = (_card(root) or {}).get("configs")
    if configs is None:
        named = _named_splits(root) if ref.name is None else {}
        return (root, named, True, True) if named else None
    config = _chosen_config(ref, configs)
    own = not set(config) - _OWN_KEYS
    base = root / str(config["data_dir"]) if config.get("data_dir") else root  # data_files resolve from data_dir
    if config.get("data_files") is None:  # datasets infers the splits from the names under data_dir
        splits = _inferred_splits(base)
        return (base, splits, True, own) if splits else None
    splits = _split_files(config["data_files"], f"{ref.path}: README.md, config {config['config_name']!r}")
    return (base, splits, False, own) if splits is not None else None


def _inferred_splits(base: Path) -> dict[str, list[str]]:
    if not base.is_dir():
        return {}
    from datasets.data_files import get_data_patterns

    try:
        return {str(split): list(p) for split, p in get_data_patterns(str(base)).items()}
    except Exception:  # noqa: BLE001 (no data files datasets knows: datasets says so itself)
        return {}


def split_files(ref: DatasetRef) -> tuple[list[Path], bool] | None:
    """The files one split of a local repository reads, and whether the card leaves them to be read
    file by file (False: it holds features or a builder's options, ``datasets``' own reading); None
    when no pattern is known here (a loading script, no ``configs``) or ``ref`` is not local.

    Patterns are the card's (``data/train-*``, from its config's ``data_dir`` when it has one), or
    with no card those ``datasets`` infers from split-named files (``_named_splits``), resolved as
    ``datasets`` resolves them (``_resolve``), in sorted order; a split or config the repository does
    not have is a ``BeamError`` naming them, and so is a file two patterns of the split name (``datasets``
    would read its rows twice). ``local_data_files`` reads by this list, and prepare's check that no
    file is read twice asks it.
    """
    if not ref.is_local:
        return None
    plan = _split_plan(ref)
    if plan is None:
        return None
    base, splits, inferred, own = plan
    if ref.split not in splits:
        raise BeamError(f"{ref.describe()}: no split {ref.split!r} in the repository "
                        f"(splits: {', '.join(sorted(splits))})")
    _check_split_names({ref.split: []}, ref.describe())
    files: list[Path] = []
    matched_by: dict[Path, str] = {}
    for pattern in splits[ref.split]:
        found = _resolve(base, pattern)
        if not found and not inferred and not _is_glob(pattern):  # datasets skips a glob that matches nothing
            raise BeamError(f"{ref.describe()}: no file matches {pattern!r}")
        for path in found:
            if path in matched_by:
                raise BeamError(f"{ref.describe()}: {_relative(path, base)} is matched by both "
                                f"{matched_by[path]!r} and {pattern!r}, so datasets reads its rows twice; " + (
                                    "list the split's files in a README.md configs: card, or rename the folder"
                                    if inferred else "name each file in one pattern of the split"))
            matched_by[path] = pattern
            files.append(path)
    if not files:
        raise BeamError(f"{ref.describe()}: no file matches {' or '.join(map(repr, splits[ref.split]))}")
    if inferred:
        files.sort()
    return files, own


def _relative(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base.absolute()).as_posix()
    except ValueError:
        return str(path)


def _is_glob(pattern: str) -> bool:
    from datasets.data_files import has_magic

    return bool(has_magic(pattern))


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
