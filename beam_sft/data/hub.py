"""Sources that are ``datasets`` datasets: a hub id, or a local dataset repository laid out as on the hub.

How a source string is read (``parse_data_arg``; the same rule for ``--data``, a recipe's
``sources[].path`` and ``beam-sft convert``):

1. A path that exists locally is local, always. A local folder whose ``README.md`` front matter
   (or ``.huggingface.yaml``) declares ``configs:`` (a dataset repository, as on the hub) is read as a
   dataset (one split, ``train`` unless named); any other file or folder through
   ``beam_sft.data.sources``, except that a folder with no such card whose files are named by split
   (``train.jsonl`` beside ``test.jsonl`` or ``extra.jsonl``, ``test/``,
   ``data/test-00000-of-00001.parquet``: ``refuse_split_named``) and which ``datasets`` does not read
   whole as its train split is refused unless a split is named: ``FOLDER@train`` reads the files
   ``datasets.load_dataset(FOLDER, split="train")`` reads, as ``datasets`` itself resolves them
   (``compat.datasets_files``), and a folder ``datasets`` refuses is refused.
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
from beam_sft.dataset_folder.layout import DATASET_INFO_FILE, STATE_FILE
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
    return _card_and_origin(path)[0]


def _card_and_origin(path: str | Path) -> tuple[dict | None, str]:
    """``_card``, and the file its ``configs`` come from (named in a message about them)."""
    root = Path(path)
    header = _front_matter(root / "README.md")
    origin = "README.md"
    standalone = root / _STANDALONE_YAML
    if standalone.is_file():
        extra = _yaml(standalone, standalone.read_text(encoding="utf-8-sig", errors="replace"))
        if isinstance(extra, dict):
            header = {**(header or {}), **extra}
            if "configs" in extra:
                origin = _STANDALONE_YAML
    return header, origin


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
    """A folder whose ``README.md`` front matter (or ``.huggingface.yaml``) declares ``configs``.
    A folder with none whose files are named by split is refused here (``refuse_split_named``): both
    ``parse_data_arg`` and ``dataset_source`` ask this of a folder given without a split."""
    header = _card(path)
    if header is not None and "configs" in header:
        return True
    refuse_split_named(Path(path))
    return False


# datasets.data_files.SPLIT_KEYWORDS: the words that name a split's files or folder.
_SPLIT_WORDS = {"train", "training", "validation", "valid", "dev", "val", "test", "testing", "eval", "evaluation"}
# datasets.data_files.SPLIT_PATTERN_SHARDED's file name, `{split}-00000-of-00003*.*` (greedy, as
# datasets' string_to_dict takes the split: `train-part-00000-of-00001.parquet` is split `train-part`).
_SHARD = re.compile(r"(?P<split>.+)-[0-9]{5}-of-[0-9]{5}.*\..*")
# A cheap look at the names before asking datasets itself (importing it costs about a second): a
# split word between datasets' separators (datasets.data_files.NON_WORDS_CHARS), or a hub shard in
# data/ (named for any split). A folder with neither is one datasets reads whole as train.
_SPLIT_NAME_RE = re.compile(r"(?:^|[-._ 0-9/])(?:train|training|validation|valid|dev|val|test|testing|eval|"
                            r"evaluation)(?:[-._ 0-9/]|$)|^data/[^/]+-[0-9]{5}-of-[0-9]{5}")


def refuse_split_named(root: Path) -> None:
    """Refuse, in one line, a folder given with no split and no ``configs:`` card whose files are
    named by split and which ``datasets`` does not read whole as its train split: read whole, its
    test rows would be trained on, or files ``datasets`` puts in no split read where it drops them
    (``train.jsonl`` beside ``extra.jsonl``), unsaid. The splits and the files each reads are asked of
    ``datasets`` (``_inferred_files``), never re-derived. Named by split means a file whose name
    before its first dot is a split word (``test.jsonl``, ``dev.json.gz``, ``test-00000-of-00002.jsonl``),
    a top-level or ``data/`` folder named by one (``test/``, ``data/validation/``), a hub shard
    ``data/SPLIT-00000-of-00001.parquet`` (``_names_a_split``), or a folder every data file of which
    ``datasets`` puts in one of two splits or more. A name that only holds the word
    (``test_case.json``, ``drone_training.jsonl`` beside ``chat.jsonl``) leaves the folder plain."""
    if not root.is_dir() or saved_dataset(root):
        return
    _check_shard_names(root)
    names = _data_names(root)
    if not any(_SPLIT_NAME_RE.search(n) for n in names):
        return
    raw = _inferred_files(root)
    if not raw:
        return
    refused = _mixed_splits(raw)
    read = raw if refused else _module_files(raw)
    plain = {(root / n).absolute() for n in names}
    if not refused and set(read) == {DEFAULT_SPLIT} and set(read[DEFAULT_SPLIT]) == plain:
        return  # datasets' train split is the whole folder: read whole, the same rows
    covered = {p for files in raw.values() for p in files}
    if not any(_names_a_split(n) for n in names) and not (len(raw) > 1 and plain <= covered):
        return  # names that only hold a split word: a plain folder, every file read
    order = [DEFAULT_SPLIT] * (DEFAULT_SPLIT in read) + sorted(s for s in read if s != DEFAULT_SPLIT)
    splits = "; ".join(f"{s}: {_relative(read[s][0], root)}" for s in order if read[s])
    head = f"{root}: its files are named by split, as datasets reads a repository's splits ({splits})"
    if refused:
        raise BeamError(f"{head}, and datasets refuses the folder: {refused}; move one type's files out, or name "
                        "the files themselves to read them all")
    others = [s for s in order if s != DEFAULT_SPLIT]
    left = sorted(plain - {p for files in read.values() for p in files})
    dropped = (f"datasets leaves out {_relative(left[0], root)}" + (f" (and {len(left) - 1} more)" if len(left) > 1
                                                                      else "") + " (in no split)") if left else ""
    if not others:
        extra = sorted({p for files in read.values() for p in files} - plain)
        differs = (f"its other files would be read where {dropped}" if dropped else
                   f"it would skip {_relative(extra[0], root)}, which datasets reads")
        raise BeamError(f"{head}; read as a plain folder, {differs}: give "
                        f"{root}@train (in a recipe, split: train) to read its train split as datasets does, "
                        "or name the files themselves to read them all")
    if DEFAULT_SPLIT in read:
        give = f"give {root}@train (in a recipe, split: train) to read its train split as datasets does"
    else:
        pick = next((s for s in others if s.startswith(DEFAULT_SPLIT)), others[0])  # train_sft, ...
        give = f"datasets finds no train split in it: give {root}@{pick} (in a recipe, split: {pick}) to read that split"
    raise BeamError(f"{head}; read as a plain folder, the {' and '.join(others)} rows would be trained on, unsaid"
                    f"{'; ' + dropped if dropped else ''}; {give}, or name the files themselves to read them all")


def _data_names(root: Path) -> list[str]:
    """The data files a plain folder reads (``sources.expand_source``'s suffixes, hidden ones and
    those of a ``save_to_disk`` folder in it left out), as sorted paths relative to ``root``."""
    found = list(root.rglob("*"))  # (walked once: a folder of many shards is listed a single time)
    saved = [p for p in found if p.is_dir() and saved_dataset(p)]
    return sorted(p.relative_to(root).as_posix() for p in found
                  if p.is_file() and p.name.lower().endswith(DATA_SUFFIXES) and not _is_hidden(p, root)
                  and not any(folder in p.parents for folder in saved))


def saved_dataset(folder: Path) -> bool:
    """Whether ``folder`` is a ``datasets.save_to_disk`` folder (a Dataset's or a DatasetDict's)."""
    return (folder / DATASET_INFO_FILE).is_file() or (folder / STATE_FILE).is_file() or \
        (folder / "dataset_dict.json").is_file()


def _names_a_split(name: str) -> bool:
    """Whether a plain folder's data file (``_data_names``) is named by split (``refuse_split_named``)."""
    parts = name.split("/")
    shard = _SHARD.fullmatch(parts[-1])
    if shard and parts[:-1] == ["data"]:
        return True  # a hub shard names its split, whatever the word
    folders = parts[:-1]
    tops = folders[:1] + (folders[1:2] if folders[:1] == ["data"] else [])
    word = shard["split"] if shard else parts[-1].split(".")[0]
    return word in _SPLIT_WORDS or any(f in _SPLIT_WORDS for f in tops)


def _check_shard_names(base: Path) -> None:
    """datasets fails to infer any split of a folder whose ``data/`` holds a shard named for a split
    it does not accept (``data/train-part-00000-of-00001.parquet``: split ``train-part``, a ``-`` in
    it); refused here as it is there, in one line, never read as a plain folder instead."""
    folder = base / "data"
    if not folder.is_dir():
        return
    for path in sorted(folder.iterdir()):
        shard = _SHARD.fullmatch(path.name)
        if shard and path.is_file() and not path.name.startswith(".") and not _SPLIT_NAME_OK.fullmatch(shard["split"]):
            fixed = re.sub(r"\W", "_", shard["split"])
            raise BeamError(f"{base}: data/{path.name} is named as a shard of split {shard['split']!r}, a split name "
                            "datasets refuses (letters, digits and _ only), so datasets cannot load the folder: "
                            f"rename it data/{fixed}-{path.name[len(shard['split']) + 1:]} (or move it out of data/), "
                            "or name the files themselves")


def _inferred_files(base: Path) -> dict[str, list[Path]]:
    """split -> the files ``datasets`` puts in it when no card lists them (every type it resolves,
    before it keeps one: ``compat.datasets_files.inferred_split_files``); ``{}`` when it finds no
    data file under ``base``."""
    if not base.is_dir():
        return {}
    _check_shard_names(base)
    found = _files().inferred_split_files(str(base.absolute()))
    return {split: [Path(f) for f in files] for split, files in found.items()}


def _mixed_splits(files: dict[str, list[Path]]) -> str | None:
    """Why ``datasets`` refuses a repository whose splits are read by different modules (``train.jsonl``
    beside ``test.parquet``: it infers one module for all, ``infer_module_for_data_files``), or None."""
    try:
        _files().common_module({split: [str(p) for p in group] for split, group in files.items()})
        return None
    except ValueError:
        modules = {split: _files().split_module([str(p) for p in group]) for split, group in files.items()}
    said = ", ".join(f"{s}: {_type_names(files[s])} ({m or 'no data file'})" for s, m in sorted(modules.items()))
    return f"it reads every split with one module and its splits differ ({said})"


def _files():
    """``compat.datasets_files``: datasets' own data-file resolution, loaded only when a local
    repository is read (it imports ``datasets``, about a second)."""
    from beam_sft.compat import datasets_files

    return datasets_files


def _type_names(files: list[Path]) -> str:
    return "/".join(sorted({_type(p) for p in files})) or "none"


def _module_files(files: dict[str, list[Path]]) -> dict[str, list[Path]]:
    """Each split's files ``datasets`` keeps once it has picked the one module (the others dropped)."""
    module = _files().common_module({split: [str(p) for p in group] for split, group in files.items()})
    return {split: [Path(f) for f in _files().module_files([str(p) for p in group], module)]
            for split, group in files.items()}


def _is_hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _resolve(root: Path, pattern: str) -> list[Path]:
    """The files a ``data_files`` pattern names in a local repository, as ``datasets`` resolves them
    (``datasets.data_files.resolve_pattern``: ``**`` at any depth, hidden files and folders left out
    unless named, a file of a type datasets reads none of left out), sorted."""
    from datasets.data_files import resolve_pattern

    try:  # every extension load_dataset resolves data files by
        found = resolve_pattern(pattern, str(root), allowed_extensions=_files().allowed_extensions())
        return sorted(Path(p) for p in found)
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


def _chosen_config(ref: DatasetRef, configs: Any, origin: str = "README.md") -> dict:
    """The card config ``load_dataset(path, name)`` reads, chosen and checked as ``datasets``
    (``MetadataConfigs``) does: every config named by a ``config_name``, no name twice; with no name
    given, the only config, else the one named ``default`` or marked ``default: true`` (two such, or
    none among several: refused, naming the configs, never the first one read in their place). Every
    config's ``data_files`` is checked, as ``datasets`` fails to load a card with one bad config.
    ``origin``: the file the configs come from (README.md or .huggingface.yaml), named in each refusal."""
    where = f"{ref.path}: {origin}"
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
            raise BeamError(f"{ref.describe()}: {origin} declares no config {ref.name!r} "
                            f"(configs: {', '.join(names)})")
        return configs[names.index(ref.name)]
    defaults = [n for n, c in zip(names, configs, strict=True) if len(configs) == 1 or n == "default" or c.get("default")]
    how = f"name one: {ref.path}:CONFIG on the command line, or name: CONFIG in a recipe's source"
    if len(defaults) > 1:
        raise BeamError(f"{where} marks {len(defaults)} configs as the default "
                        f"({', '.join(defaults)}); datasets refuses it: {how}")
    if not defaults:
        raise BeamError(f"{where} declares configs {', '.join(names)} and none is the default "
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


# How a plan's splits were inferred from file names: with no card (datasets keeps one module's files of
# each split), or for a card config that lists none (datasets reads every file the names put in a split).
_BY_NAMES, _CARD_NAMES = "names", "card names"


def _split_plan(ref: DatasetRef) -> tuple[Path, dict[str, list], str, bool] | None:
    """Where a local repository's patterns resolve from, its split -> patterns (or, when ``datasets``
    infers the splits from file names, split -> the files it resolves: ``_inferred_files``), how they
    were inferred (``_BY_NAMES``, ``_CARD_NAMES``, "" for patterns), and whether the files may be read
    file by file; None for what only ``datasets`` knows (a loading script, a config name with no card)."""
    root = Path(ref.path)
    if ref.data_files is not None:  # given with the source: the card's configs do not apply
        splits = _split_files(ref.data_files, f"{ref.describe()}: data_files")
        return (root, splits, "", True) if splits is not None else None
    header, origin = _card_and_origin(root)
    configs = (header or {}).get("configs")
    if configs is None:  # the splits datasets infers from the names (a split named: any folder)
        if ref.name is not None:
            return None
        named = _inferred_files(root)
        if not named:
            raise BeamError(f"{ref.describe()}: datasets finds no data file in the folder (hidden files and "
                            "folders are not data), so it has no split to read")
        return root, named, _BY_NAMES, True
    config = _chosen_config(ref, configs, origin)
    own = not set(config) - _OWN_KEYS
    base = root / str(config["data_dir"]) if config.get("data_dir") else root  # data_files resolve from data_dir
    if config.get("data_files") is None:  # datasets infers the splits from the names under data_dir
        splits = _inferred_files(base)
        if not splits:
            raise BeamError(f"{ref.describe()}: datasets finds no data file under {_relative(base, root)}/, the "
                            f"config {config['config_name']!r}'s data_dir, so it has no split to read")
        return base, splits, _CARD_NAMES, own
    splits = _split_files(config["data_files"], f"{ref.path}: {origin}, config {config['config_name']!r}")
    return (base, splits, "", own) if splits is not None else None


def split_files(ref: DatasetRef) -> tuple[list[Path], bool] | None:
    """The files one split of a local repository reads, and whether the card leaves them to be read
    file by file (False: it holds features or a builder's options, ``datasets``' own reading); None
    when no pattern is known here (a loading script, no ``configs``) or ``ref`` is not local.

    Patterns are the card's (``data/train-*``, from its config's ``data_dir`` when it has one),
    resolved as ``datasets`` resolves them (``_resolve``); with no card, or a config with no
    ``data_files``, the files are those ``datasets`` itself puts in the split (``_inferred_files``),
    of the one type it keeps. A split or config the repository does not have is a ``BeamError``
    naming them, and so is a file two patterns of the split name (``datasets`` would read its rows
    twice) and a repository ``datasets`` refuses whichever split is asked (its splits of different
    types, one with no file: ``_mixed_splits``). ``local_data_files`` reads by this list, and
    prepare's check that no file is read twice asks it.
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
    if inferred:
        resolved, matched_by = splits, {p: None for group in splits.values() for p in group}
        twice = next((p for i, p in enumerate(splits[ref.split]) if p in splits[ref.split][:i]), None)
        if twice is not None:
            raise BeamError(f"{ref.describe()}: {_relative(twice, base)} is matched by two of the patterns datasets "
                            "infers for the split, so datasets reads its rows twice; list the split's files in a "
                            "README.md configs: card, or rename the folder")
    else:
        resolved, matched_by = {}, {}
        for split, patterns in splits.items():  # every split: datasets resolves them all, whichever is read
            resolved[split] = _card_split(ref, base, split, patterns, matched_by)
    _refuse_as_datasets(ref, base, resolved, inferred == _BY_NAMES)
    files = resolved[ref.split]
    return _checked_types(ref, base, files, matched_by, inferred == _BY_NAMES, resolved), own


def _refuse_as_datasets(ref: DatasetRef, base: Path, resolved: dict[str, list[Path]], by_names: bool) -> None:
    """Refuse a repository ``datasets`` refuses before it reads a row, whichever split is asked: it
    infers one module for every split (``infer_module_for_data_files``), so ``train.jsonl`` beside
    ``test.parquet`` fails to load. ``by_names``: a folder with no card, its splits inferred from its
    file names (``_mixed_splits`` says which types differ). With a card (or the source's ``data_files``)
    ``datasets`` itself is asked (``compat.datasets_files.repository_refusal``: it infers the module
    from the first config's files, or the names at the top of the folder when that config lists
    none), except that a split of JSON, JSON Lines and Parquet is read here file by file, each by its
    own reader, so the one module ``datasets`` needs for every split is not ours to refuse over."""
    if by_names:
        refused = _mixed_splits(resolved)
        if refused:
            raise BeamError(f"{ref.describe()}: datasets refuses the repository: {refused}; move one type's files "
                            "out, or name the files themselves")
        return
    refusal = _files().repository_refusal(ref.path, ref.data_files)
    if refusal is None:
        return
    said, types_differ = refusal
    if types_differ and all(p.name.lower().endswith(_OWN_READER) for p in resolved[ref.split]):
        return
    raise BeamError(f"{ref.describe()}: datasets refuses the repository ({said}); " + (
        "give each split files of one type, or name the split's files in the source's data_files" if types_differ
        else "fix what it names, or name the files themselves"))


def _card_split(ref: DatasetRef, base: Path, split: str, patterns: list[str],
                matched_by: dict[Path, str | None]) -> list[Path]:
    """The files a split's patterns (a card's, or the source's ``data_files``) name, resolved as
    ``datasets`` resolves them (``_resolve``); a pattern with no magic that matches nothing, a split
    that names no file, or a file two of its patterns match (read twice) is refused, naming the split."""
    files: list[Path] = []
    where = ref.describe() if split == ref.split else f"{ref.describe()}: its split {split}"
    seen: dict[Path, str] = {}
    for pattern in patterns:
        found = _resolve(base, pattern)
        if not found and not _is_glob(pattern):  # datasets skips a glob that matches nothing
            raise BeamError(f"{where}: no file matches {pattern!r}")
        for path in found:
            if path in seen:
                raise BeamError(f"{where}: {_relative(path, base)} is matched by both {seen[path]!r} and "
                                f"{pattern!r}, so datasets reads its rows twice; name each file in one pattern of "
                                "the split")
            seen[path] = pattern
            files.append(path)
    if not files:
        raise BeamError(f"{where}: no file matches {' or '.join(map(repr, patterns))}")
    matched_by.update(seen)
    return files


# Files datasets resolves as data (harbor's task documents) that are a folder's notes beside rows of
# another type: dropped by datasets as by a plain folder, no rows lost.
_NOTES = (".md",)


def _checked_types(ref: DatasetRef, base: Path, files: list[Path], matched_by: dict[Path, str | None],
                   inferred: bool, resolved: dict[str, list[Path]]) -> list[Path]:
    """Refuse a split ``datasets`` would read part of, unsaid: it reads one type of file per split
    (``datasets.load.infer_module_for_data_files_list``: the most common). Split by file names, it
    drops the files of the other types (``train.csv`` beside ``train.jsonl``); listed by a card, it
    reads them all as that type and stops at the first one not of it (``notes.md`` that ``data/*``
    matches), naming no file. A card's split of JSON, JSON Lines and Parquet is read here file by file,
    each by its own reader. Returns the files read: split by file names, notes (``_NOTES``) left out."""
    def module(group: list[Path]) -> str | None:
        return _files().split_module([str(p) for p in group])

    ours = [p for p in files if p.name.lower().endswith(_OWN_READER)]
    if inferred:  # the files datasets keeps once it has picked the repository's one module
        kept = set(_module_files(resolved)[ref.split])
        files = [p for p in files if p in kept or not p.name.lower().endswith(_NOTES)]
        odd = [p for p in files if p not in kept]
    elif ours:
        odd = [p for p in files if p not in ours]
    else:
        kept_module = module(files)
        odd = [p for p in files if module([p]) != kept_module]
    if not odd:
        return files
    types = " and ".join(sorted({_type(p) for p in files}))
    named = _relative(odd[0], base) + (f" (and {len(odd) - 1} more)" if len(odd) > 1 else "")
    if inferred:
        raise BeamError(f"{ref.describe()}: the split holds {types} files and datasets reads one type per split: "
                        f"it reads the {' and '.join(sorted({_type(p) for p in files if p not in odd}))} files and "
                        f"drops {named}; move the other type's files out, or name the files themselves")
    given = "the card's" if ref.data_files is None else "the source's data_files"
    by = (f"is matched by {given} pattern {matched_by[odd[0]]!r}" if matched_by[odd[0]] is not None else
          "is in the split datasets infers from the names under the card config's data_dir")
    raise BeamError(f"{ref.describe()}: {named} {by} but is not a data file that pattern should match "
                    f"(a {_type(odd[0])} file in a split of {types} files; datasets would read it as the others' "
                    "type and stop at it): narrow the pattern to the data files' type, or move the file out")


def _type(path: Path) -> str:
    """A file's type as a message names it: ``.jsonl`` for ``a.jsonl.gz`` too."""
    name = path.name.lower().removesuffix(".gz")
    return Path(name).suffix or name


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
