"""Sources that are ``datasets`` datasets: a hub id, or a local dataset repository laid out as on the hub.

How a source string is read (``parse_data_arg``; the same rule for ``--data``, a recipe's
``sources[].path`` and ``beam-sft convert``):

1. A path that exists locally is local, always. A local folder whose ``README.md`` front matter
   (or ``.huggingface.yaml``) declares ``configs:`` (a dataset repository, as on the hub) is read as a
   dataset (one split, ``train`` unless named); any other file or folder through
   ``beam_sft.data.sources``, except that a folder with no such card whose files are named by split
   (``train.jsonl`` beside ``test.jsonl``, ``test/``, ``data/test-00000-of-00001.parquet``:
   ``refuse_split_named``) is refused unless a split is named: ``FOLDER@train`` reads what
   ``datasets.load_dataset(FOLDER, split="train")`` reads.
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
_SPLIT_KEYWORDS = {"train": ("train", "training"), "validation": ("validation", "valid", "dev", "val"),
                   "test": ("test", "testing", "eval", "evaluation")}
_KEYWORD_SPLIT = {word: split for split, words in _SPLIT_KEYWORDS.items() for word in words}
# datasets.data_files.SPLIT_PATTERN_SHARDED's file name, `{split}-00000-of-00003*.*` (greedy, as
# datasets' string_to_dict takes the split: `train-part-00000-of-00001.parquet` is split `train-part`).
_SHARD = re.compile(r"(?P<split>.+)-[0-9]{5}-of-[0-9]{5}.*\..*")
# datasets' split keywords and separators (datasets.data_files.SPLIT_KEYWORDS, NON_WORDS_CHARS): a
# cheap look at the names before asking datasets itself (importing it costs about a second).
_SPLIT_NAME_RE = re.compile(r"(?:^|[-._ 0-9/])(?:train|training|validation|valid|dev|val|test|testing|eval|"
                            r"evaluation)(?:[-._ 0-9/]|$)")


def refuse_split_named(root: Path) -> None:
    """Refuse, in one line, a folder given with no split and no ``configs:`` card whose files
    ``datasets`` reads as a repository's splits, one of them not ``train``: read whole, the test
    split's rows would be trained on, unsaid; read as ``datasets`` reads it, the files that name no
    split are dropped and a folder of only ``test.jsonl`` has no train split at all. Named by split
    means a file whose name before its first dot is a split word (``test.jsonl``, ``dev.json.gz``,
    ``test-00000-of-00002.jsonl``), a top-level or ``data/`` folder named by one (``test/``,
    ``data/validation/``), a hub shard ``data/SPLIT-00000-of-00001.parquet``, or a folder every data
    file of which ``datasets`` puts in one of two splits or more (``_named_splits``). A name that only
    holds the word (``test_case.json``, ``drone_training.jsonl`` beside ``chat.jsonl``) leaves the
    folder plain."""
    if not root.is_dir():
        return
    _check_shard_names(root)
    names = _data_names(root)
    found = _named_by_split(names)
    if set(found) <= {DEFAULT_SPLIT}:
        for split, patterns in _named_splits(root, names).items():
            example = next((p for pattern in patterns for p in _resolve(root, pattern)), None)
            if example is not None:
                found.setdefault(split, _relative(example, root))
    others = sorted(s for s in found if s != DEFAULT_SPLIT)
    if not others:
        return
    order = [DEFAULT_SPLIT] * (DEFAULT_SPLIT in found) + others
    splits = "; ".join(f"{s}: {found[s]}" for s in order)
    if DEFAULT_SPLIT in found:
        give = f"give {root}@train (in a recipe, split: train) to read its train split as datasets does"
    else:
        pick = next((s for s in others if s.startswith(DEFAULT_SPLIT)), others[0])  # train_sft, ...
        give = f"datasets finds no train split in it: give {root}@{pick} (in a recipe, split: {pick}) to read that split"
    raise BeamError(f"{root}: its files are named by split, as datasets reads a repository's splits ({splits}); "
                    f"read as a plain folder, the {' and '.join(others)} rows would be trained on, unsaid; {give}, "
                    "or name the files themselves to read them all")


def _data_names(root: Path) -> list[str]:
    """The data files a plain folder reads (``sources.expand_source``'s suffixes, hidden ones left
    out), as sorted paths relative to ``root``."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and p.name.lower().endswith(DATA_SUFFIXES) and not _is_hidden(p, root))


def _named_by_split(names: list[str]) -> dict[str, str]:
    """split -> the first of a plain folder's data files (``_data_names``) named by it
    (``refuse_split_named``)."""
    found: dict[str, str] = {}
    for name in names:
        split = _split_of(name.split("/"))
        if split is not None:
            found.setdefault(split, name)
    return found


def _split_of(parts: list[str]) -> str | None:
    name = parts[-1]
    shard = _SHARD.fullmatch(name)
    if shard and parts[:-1] == ["data"]:
        return shard["split"]  # a hub shard names its split, whatever the word
    word = shard["split"] if shard else name.split(".")[0]
    if word in _KEYWORD_SPLIT:
        return _KEYWORD_SPLIT[word]
    folders = parts[:-1]
    for folder in (folders[:1] + (folders[1:2] if folders[:1] == ["data"] else [])):
        if folder in _KEYWORD_SPLIT:
            return _KEYWORD_SPLIT[folder]
    return None


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


def _named_splits(root: Path, names: list[str]) -> dict[str, list[str]]:
    """The split patterns ``datasets`` infers for a folder with no ``configs:`` card, when its data
    files (``names``: ``_data_names``) are named for two splits or more and every one of them is in
    a split, else ``{}``."""
    if not any(_SPLIT_NAME_RE.search(n) for n in names):
        return {}
    patterns = _inferred_splits(root)
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
    unless named, a file of a type datasets reads none of left out), sorted."""
    from datasets.data_files import resolve_pattern

    from beam_sft.compat.datasets_files import allowed_extensions  # what load_dataset resolves data files by

    try:
        return sorted(Path(p) for p in resolve_pattern(pattern, str(root), allowed_extensions=allowed_extensions()))
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


def _split_plan(ref: DatasetRef) -> tuple[Path, dict[str, list[str]], bool, bool] | None:
    """Where a local repository's patterns resolve from, its split -> patterns, whether ``datasets``
    inferred them from file names (alternatives: one that matches nothing is no error), and whether
    the files may be read file by file; None for what only ``datasets`` knows (a loading script, a
    config name with no card)."""
    root = Path(ref.path)
    if ref.data_files is not None:  # given with the source: the card's configs do not apply
        splits = _split_files(ref.data_files, f"{ref.describe()}: data_files")
        return (root, splits, False, True) if splits is not None else None
    header, origin = _card_and_origin(root)
    configs = (header or {}).get("configs")
    if configs is None:  # the splits datasets infers from the names (a split named: any folder)
        named = _inferred_splits(root) if ref.name is None else {}
        return (root, named, True, True) if named else None
    config = _chosen_config(ref, configs, origin)
    own = not set(config) - _OWN_KEYS
    base = root / str(config["data_dir"]) if config.get("data_dir") else root  # data_files resolve from data_dir
    if config.get("data_files") is None:  # datasets infers the splits from the names under data_dir
        splits = _inferred_splits(base)
        return (base, splits, True, own) if splits else None
    splits = _split_files(config["data_files"], f"{ref.path}: {origin}, config {config['config_name']!r}")
    return (base, splits, False, own) if splits is not None else None


def _inferred_splits(base: Path) -> dict[str, list[str]]:
    """split -> patterns, as ``datasets`` infers them from the names under ``base``
    (``datasets.data_files.get_data_patterns``); ``{}`` when it finds no data file."""
    if not base.is_dir():
        return {}
    _check_shard_names(base)
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
    return _checked_types(ref, base, files, matched_by, inferred), own


# Files datasets resolves as data (harbor's task documents) that are a folder's notes beside rows of
# another type: dropped by datasets as by a plain folder, no rows lost.
_NOTES = (".md",)


def _checked_types(ref: DatasetRef, base: Path, files: list[Path], matched_by: dict[Path, str],
                   inferred: bool) -> list[Path]:
    """Refuse a split ``datasets`` would read part of, unsaid: it reads one type of file per split
    (``datasets.load.infer_module_for_data_files_list``: the most common). Split by file names, it
    drops the files of the other types (``train.csv`` beside ``train.jsonl``); listed by a card, it
    reads them all as that type and stops at the first one not of it (``notes.md`` that ``data/*``
    matches), naming no file. A card's split of JSON, JSON Lines and Parquet is read here file by file,
    each by its own reader. Returns the files read: split by file names, notes (``_NOTES``) left out."""
    from beam_sft.compat.datasets_files import split_module

    def module(group: list[Path]) -> str | None:
        return split_module([str(p) for p in group])

    ours = [p for p in files if p.name.lower().endswith(_OWN_READER)]
    if not inferred and ours:
        odd = [p for p in files if p not in ours]
    else:
        kept = module(files)
        dropped = [p for p in files if module([p]) != kept]
        if inferred:
            files = [p for p in files if p not in dropped or not p.name.lower().endswith(_NOTES)]
        odd = [p for p in dropped if p in files]
    if not odd:
        return files
    types = " and ".join(sorted({_type(p) for p in files}))
    named = _relative(odd[0], base) + (f" (and {len(odd) - 1} more)" if len(odd) > 1 else "")
    if inferred:
        raise BeamError(f"{ref.describe()}: the split holds {types} files and datasets reads one type per split: "
                        f"it reads the {' and '.join(sorted({_type(p) for p in files if p not in odd}))} files and "
                        f"drops {named}; move the other type's files out, or name the files themselves")
    given = "the card's" if ref.data_files is None else "the source's data_files"
    raise BeamError(f"{ref.describe()}: {named} is matched by {given} pattern {matched_by[odd[0]]!r} but is not "
                    f"a data file that pattern should match (a {_type(odd[0])} file in a split of {types} files; "
                    "datasets would read it as the others' type and stop at it): narrow the pattern to the data "
                    "files' type, or move the file out")


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
