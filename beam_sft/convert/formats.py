"""The source formats: ONE table, the single place a new format is added.

Each entry names the format (its ``--format`` value and report name), its reader (``convert_<name>``,
``raw, *, options -> BeamRow | Rejection``) and, for a format told by keys of its own, its detector
(``is_<name>``). Everything else reads this table: ``--format`` choices (options.FORMAT_CHOICES), the
converters ``convert_row`` calls (pipeline.CONVERTERS / FORMAT_CONVERTERS), the own-key detectors
``--format auto`` asks and in which order (detect.classify), and the tie order of a file's main
format (detect.detect_format).

Readers and detectors are named as ``"module:function"`` and imported when first asked for: the
readers import ``options`` (ColumnMap, ConvertOptions), and ``options`` takes its format names from
here, so this module imports no reader (a leaf: no cycle).

Formats whose detector is None are told by detect.classify's shared shape checks (a ``messages`` or
``conversations`` list of messages, Hermes tags in it, flat prompt/answer columns, a Harmony or Hermes transcript),
which run after the own-key detectors.

>>> [f.name for f in FORMAT_TABLE][:3]
['openai', 'sharegpt', 'hermes']
>>> reader("openai").__name__
'convert_openai'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Format:
    """One source format. ``detect_rank``: the order own-key detectors are asked (lower first)."""

    name: str
    reader: str  # "module:function" of the converter
    detector: str | None = None  # "module:function" of is_<name>(raw[, columns]), or None: shape checks
    detector_takes_columns: bool = False  # the detector reads mapped column names (ColumnMap)
    detect_rank: int | None = None


_C = "beam_sft.convert."

# The order here is the user's order: --format choices and --help, and a tied vote's winner.
FORMAT_TABLE: tuple[Format, ...] = (
    Format("openai", _C + "openai:convert_openai"),
    Format("sharegpt", _C + "sharegpt:convert_sharegpt"),
    Format("hermes", _C + "hermes:convert_hermes"),
    Format("harmony", _C + "harmony_text:convert_harmony"),
    Format("alpaca", _C + "flat:convert_alpaca"),
    Format("glaive", _C + "glaive:convert_glaive", _C + "glaive:is_glaive", detect_rank=2),
    Format("gemini", _C + "gemini:convert_gemini", _C + "gemini:is_gemini", detect_rank=1),
    Format("bedrock", _C + "bedrock:convert_bedrock", _C + "bedrock:is_bedrock", detector_takes_columns=True,
           detect_rank=3),
    # detect_rank keeps the order classify has always asked them: chat_log, gemini, glaive, bedrock.
    Format("chat_log", _C + "chat_log:convert_chat_log", _C + "chat_log:is_chat_log", detect_rank=0),
    Format("responses", _C + "responses:convert_responses", _C + "responses:is_responses", detect_rank=4),
    # after bedrock: Converse blocks have no "type", so neither detector claims the other's rows
    Format("anthropic", _C + "anthropic:convert_anthropic", _C + "anthropic:is_anthropic", detector_takes_columns=True,
           detect_rank=5),
    # last: a pair list sits under `conversation(s)`, which only ShareGPT's shape checks (after these) read
    Format("pairs", _C + "pairs:convert_pairs", _C + "pairs:is_pairs", detector_takes_columns=True, detect_rank=6),
    Format("xlam", _C + "xlam:convert_xlam", _C + "xlam:is_xlam", detect_rank=7),
    # first: its items (type+data, lc+kwargs) are no other format's, while a LangChain row beside Anthropic
    # tools (input_schema) or Converse system blocks would be claimed by those detectors and refused there
    Format("langchain", _C + "langchain:convert_langchain", _C + "langchain:is_langchain",
           detector_takes_columns=True, detect_rank=-1),
)

FORMAT_NAMES: tuple[str, ...] = tuple(f.name for f in FORMAT_TABLE)


def resolve(ref: str) -> Callable[..., Any]:
    """The function a ``"module:function"`` reference names."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def reader(name: str) -> Callable[..., Any]:
    """The converter of format ``name``."""
    return resolve(_by_name(name).reader)


def reader_name(name: str) -> str:
    """The converter's function name (``convert_openai``), the key of pipeline.CONVERTERS."""
    return _by_name(name).reader.partition(":")[2]


def detectors() -> list[tuple[str, Callable[..., Any], bool]]:
    """``(format, detector, takes_columns)`` of the own-key detectors, in the order they are asked."""
    ranked = sorted((f for f in FORMAT_TABLE if f.detector), key=lambda f: f.detect_rank)
    return [(f.name, resolve(f.detector), f.detector_takes_columns) for f in ranked]


def _by_name(name: str) -> Format:
    for f in FORMAT_TABLE:
        if f.name == name:
            return f
    raise KeyError(name)
