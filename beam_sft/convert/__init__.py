"""Source formats -> canonical BeamRows (or Rejections with a reason code); see pipeline.py.

Public API::

    from beam_sft.convert import ConvertOptions, iter_source, convert_files, convert_row
    for result in iter_source("data/chat.jsonl", format="auto", options=ConvertOptions()):
        ...  # a BeamRow dict, or a Rejection (code, message, raw, source, row)
"""

from beam_sft.convert.options import FORMATS, ColumnMap, ConvertOptions
from beam_sft.convert.pipeline import (
    CONVERTERS,
    FORMAT_CONVERTERS,
    ConvertReport,
    SourceConversion,
    convert_files,
    convert_row,
    iter_source,
)
from beam_sft.convert.rows import REASON_CODES, BeamRow, Rejection
from beam_sft.convert.validate import validate

__all__ = [
    "CONVERTERS",
    "FORMATS",
    "FORMAT_CONVERTERS",
    "REASON_CODES",
    "BeamRow",
    "ColumnMap",
    "ConvertOptions",
    "ConvertReport",
    "Rejection",
    "SourceConversion",
    "convert_files",
    "convert_row",
    "iter_source",
    "validate",
]
