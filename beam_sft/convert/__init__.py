"""Source formats -> canonical BeamRows (or Rejections with a reason code); see pipeline.py.

Public API::

    from beam_sft.convert import ConvertOptions, iter_source, convert_files, convert_row
    for result in iter_source("data/chat.jsonl", format="auto", options=ConvertOptions()):
        ...  # a BeamRow dict, or a Rejection (code, message, raw, source, row)
"""

from beam_sft.convert.options import FORMATS, ColumnMap, ConvertOptions, options_from_dict
from beam_sft.convert.pipeline import (
    CONVERTERS,
    FORMAT_CONVERTERS,
    ConvertReport,
    SourceConversion,
    check_record,
    convert_files,
    convert_row,
    iter_source,
    resolve_format,
)
from beam_sft.convert.rows import REASON_CODES, BeamRow, Rejection, has_reasoning, reasoning_of
from beam_sft.convert.validate import RESERVED_TEMPLATE_KWARGS, forbidden_tokens, validate

__all__ = [
    "CONVERTERS",
    "FORMATS",
    "FORMAT_CONVERTERS",
    "REASON_CODES",
    "RESERVED_TEMPLATE_KWARGS",
    "BeamRow",
    "ColumnMap",
    "ConvertOptions",
    "ConvertReport",
    "Rejection",
    "SourceConversion",
    "check_record",
    "convert_files",
    "convert_row",
    "forbidden_tokens",
    "has_reasoning",
    "iter_source",
    "options_from_dict",
    "reasoning_of",
    "resolve_format",
    "validate",
]
