"""``PrepareConfig``: everything ``beam-sft prepare`` needs, as one typed, frozen dataclass.

It is a recipe's ``data.prepare`` section, or a YAML file of its own, or built from command-line
flags. Unknown keys fail with their full path:

>>> from beam_sft.config_utils import from_dict
>>> cfg = from_dict(PrepareConfig, {"sources": [{"path": "a.jsonl", "weight": 2}], "max_length": 4096})
>>> cfg.sources[0].weight, cfg.length_policy
(2.0, 'drop')
>>> from_dict(PrepareConfig, {"sources": [{"path": "a.jsonl", "wieght": 2}]}, "data.prepare")
Traceback (most recent call last):
...
beam_sft.errors.ConfigError: data.prepare.sources[0].wieght: unknown key (known: batch_input, column_map, columns, convert, data_files, format, name, path, revision, split, weight)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from beam_sft.config_utils import from_dict, load_yaml, require_path, shown
from beam_sft.convert.options import (
    COLUMN_MAP_DEPRECATED,
    FORMAT_CHOICES,
    ColumnMap,
    MissingReasoning,
    options_from_dict,
)
from beam_sft.data.hub import DatasetRef, dataset_source, source_label
from beam_sft.data.sources import files_read, read_twice
from beam_sft.errors import BeamError, ConfigError
from beam_sft.reason.config import TeacherConfig

LengthPolicy = Literal["drop", "trim_turns"]
EncoderChoice = Literal["auto", "fast", "template"]
# A mix weight is copies of each row: past this, a typo (1e300) would only ever fill the memory.
MAX_WEIGHT = 1000.0


@dataclass(frozen=True)
class SourceSpec:
    """One input: a file or folder (JSONL/JSON/Parquet), or a ``datasets`` dataset, and how to read and weigh it.

    ``weight`` repeats the source's rows: 1 keeps each once, 0.5 a seeded half, 2.5 each twice plus
    a seeded half. ``columns`` renames columns (the converter's ``columns`` option, the one name in
    recipes, convert YAML and ``--columns``, e.g. ``{"messages": "dialog"}``; ``column_map`` is its
    deprecated name, still read with a message); ``convert`` holds any other converter option for
    this source (``ConvertOptions``; ``convert.columns`` is the same mapping).
    """

    path: str
    format: str = "auto"
    weight: float = 1.0
    columns: dict[str, str] = field(default_factory=dict)
    column_map: dict[str, str] = field(default_factory=dict)  # deprecated name of `columns`
    convert: dict[str, Any] = field(default_factory=dict)
    name: str | None = None  # the source's label in the report and the `source` column (default: path)
    # A `datasets` dataset (a hub id or a dataset repository folder, see beam_sft.data.hub): there
    # `name` is the dataset config, as in load_dataset, and the label is `path[:name]@split`.
    split: str | None = None  # default: train
    revision: str | None = None  # hub branch, tag or commit; the fingerprint holds the resolved commit
    data_files: str | list[str] | dict[str, Any] | None = None
    # A batch pair (OpenAI Batch API or Anthropic Message Batches): `path` is the batch output file, this its input file (joined by
    # custom_id, beam_sft/data/batch_api.py; read as chat_log rows).
    batch_input: str | None = None

    def __post_init__(self) -> None:
        if self.format not in FORMAT_CHOICES:
            raise ConfigError("format", f"{shown(self.format)} is not one of {', '.join(FORMAT_CHOICES)}")
        self._check_convert()
        require_path(self.batch_input, "batch_input")
        if self.batch_input is not None:
            for key, value in (("path", self.path), ("batch_input", self.batch_input)):
                if not os.path.isfile(value):
                    raise ConfigError(key, f"{value} is not a file (a Batch API pair: path is the batch output file, "
                                      "batch_input its input file)")

    def _check_convert(self) -> None:
        """The converter options are checked when the recipe loads, under their own key path, not
        first when the run converts the source. A column named in two places (``columns``,
        ``column_map``, ``convert.columns``, ``convert.column_map``) with two values is refused: one
        side would win unsaid."""
        if not isinstance(self.convert, dict):
            raise ConfigError("convert", f"expected a mapping of converter options, got {shown(self.convert)}")
        named: dict[str, tuple[str, Any]] = {}
        merged: dict[str, Any] = {}
        for where, mapping in (("columns", self.columns), ("column_map", self.column_map),
                               ("convert.columns", self.convert.get("columns")),
                               ("convert.column_map", self.convert.get(COLUMN_MAP_DEPRECATED))):
            if mapping is None:
                continue
            if not isinstance(mapping, dict):
                raise ConfigError(where, f"expected a mapping of key: column, got {shown(mapping)}")
            from_dict(ColumnMap, mapping, where)  # a key checked where it was written
            for key, column in mapping.items():
                if key in named and named[key][1] != column:
                    raise ConfigError(f"{where}.{key}", f"{shown(column)} here, but {named[key][0]}.{key} names "
                                      f"{shown(named[key][1])}: give the column once")
                named[key] = (where, column)
                merged[key] = column
        options = {k: v for k, v in self.convert.items() if k not in ("columns", COLUMN_MAP_DEPRECATED)}
        if merged:
            options["columns"] = merged
        options_from_dict(options, "convert")

    @property
    def label(self) -> str:
        return source_label(self)


@dataclass(frozen=True)
class PrepareConfig:
    """What ``prepare`` reads, how it encodes, and where it writes."""

    sources: list[SourceSpec] = field(default_factory=list)
    tokenizer: str | None = None  # a local dir or hub id; the CLI falls back to $BEAM_MODEL_ID
    output: str | None = None  # default: out/prepared/<fingerprint>
    max_length: int | None = None
    length_policy: LengthPolicy = "drop"
    missing_reasoning: MissingReasoning = "drop"
    num_proc: int | None = None  # default: every core this process may use
    batch_size: int = 128  # records per encode task (a record batch of the records file)
    seed: int = 0
    num_shards: int = 1
    shard_index: int = 0
    verify: bool = True
    cache: bool = True
    encoder: EncoderChoice = "auto"  # auto: the fast encoder when its start-up probe passes
    # A teacher writes the reasoning trained turns lack, before encoding (beam_sft/prepare/teacher.py;
    # the same step as `beam-sft reason`): base_url, model, concurrency, max_requests, ...
    reasoning: TeacherConfig | None = None

    def __post_init__(self) -> None:
        # A ConfigError's path is relative to this config; from_dict prefixes where it sits (data.prepare).
        for key in ("output", "tokenizer"):  # an empty path is not "not given": say so, never a default instead
            require_path(getattr(self, key), key)
        if self.max_length is not None and self.max_length < 1:
            raise ConfigError("max_length", f"must be at least 1, got {self.max_length}")
        if self.num_shards < 1:
            raise ConfigError("num_shards", f"must be at least 1, got {self.num_shards}")
        if not 0 <= self.shard_index < self.num_shards:
            raise ConfigError("shard_index", f"must be in [0, {self.num_shards}), got {self.shard_index}")
        if self.num_proc is not None and self.num_proc < 1:
            raise ConfigError("num_proc", f"must be at least 1, got {self.num_proc}")
        if self.batch_size < 1:
            raise ConfigError("batch_size", f"must be at least 1, got {self.batch_size}")
        for i, source in enumerate(self.sources):
            if not 0 <= source.weight <= MAX_WEIGHT:
                raise ConfigError(f"sources[{i}].weight", f"must be from 0 to {MAX_WEIGHT:g} (copies of each row), "
                                  f"got {source.weight:g}")
            require_path(source.path, f"sources[{i}].path")
        labels: dict[str, int] = {}
        for i, source in enumerate(self.sources):
            if source.label in labels:
                raise ConfigError("sources", f"sources[{labels[source.label]}] and sources[{i}] share the label "
                                  f"{shown(source.label)}; give them distinct `name`s")
            labels[source.label] = i
        if len(self.sources) > 1:
            _refuse_reading_twice(self.sources)

    def resolved_num_proc(self) -> int:
        if self.num_proc is not None:
            return self.num_proc
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not Linux
            return max(1, os.cpu_count() or 1)


def _refuse_reading_twice(sources: list[SourceSpec]) -> None:
    """One file reached by two sources (``a.jsonl`` and ``./a.jsonl``, a symlink, a folder and a file
    in it, a dataset repository and one of its files) with nothing said: its rows would be read twice.
    What a source reads is asked of the readers' own listing (``sources.files_read``), never restated
    here, so this check and the run cannot disagree on a hidden file, a suffix or a hub layout."""
    twice = read_twice([_paths_read(source) for source in sources])
    if twice is not None:
        j, i, path = twice
        raise ConfigError("sources", f"sources[{j}] ({shown(sources[j].path)}) and sources[{i}] "
                          f"({shown(sources[i].path)}) both read {shown(path)}: its rows would be read "
                          f"twice; {_how_to_mean_it(sources, j, i)}")


def _paths_read(source: SourceSpec) -> list[str]:
    """What ``source`` reads; nothing when it may read a file again: a plain file or folder with a
    ``name`` (its own label says the second reading is meant), or a source the run will refuse anyway
    (missing, empty: the run names it in its own words)."""
    location = dataset_source(source)
    if source.name is not None and not isinstance(location, DatasetRef):  # (a dataset's `name` is its config)
        return []
    if source.batch_input is not None:
        return [source.path, source.batch_input]
    try:
        return [str(p) for p in files_read(location)]
    except BeamError:
        return []


def _how_to_mean_it(sources: list[SourceSpec], j: int, i: int) -> str:
    plain = [k for k in (j, i) if not isinstance(dataset_source(sources[k]), DatasetRef)]
    if plain:
        return f"give sources[{plain[-1]}] a `name` to mean it"
    return "to repeat its rows, give one source a higher `weight`"


def prepare_section(data: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The PrepareConfig mapping inside a loaded YAML file, and its key path.

    A recipe keeps it under ``data.prepare``; a file of its own may hold it at the top level.

    >>> prepare_section({"data": {"prepare": {"max_length": 8}}, "sft": {}})
    ({'max_length': 8}, 'data.prepare')
    >>> prepare_section({"sources": []})
    ({'sources': []}, '')
    """
    section = data.get("data")
    if isinstance(section, dict):
        if isinstance(section.get("prepare"), dict):
            return section["prepare"], "data.prepare"
        if section.get("prepare") is not None:
            raise ConfigError("data.prepare", f"expected a mapping of prepare keys, got {shown(section['prepare'])}")
        if section.get("prepared") is not None:
            raise ConfigError("data", "this recipe names an already prepared directory (data.prepared): nothing to prepare")
        return section, "data"
    return data, ""


def load_prepare_config(path: str | Path, overrides: dict[str, Any] | None = None) -> PrepareConfig:
    """Read a PrepareConfig from a recipe or a standalone YAML, with ``overrides`` on top."""
    try:
        raw, key_path = prepare_section(load_yaml(path))
        return from_dict(PrepareConfig, {**raw, **(overrides or {})}, key_path)
    except ConfigError as exc:  # which file, then which key
        raise exc.in_file(path) from None
