"""The files and columns of a prepared folder: the names every reader and writer uses.

A prepared folder is a ``datasets.save_to_disk`` directory plus what ``prepare`` writes beside it::

    DIR/dataset_info.json, state.json, data-*.arrow   the dataset (COLUMNS below)
    DIR/tokenizer/                                    the tokenizer it was encoded with
    DIR/rejects.jsonl                                 every row left out, with its reason code
    DIR/report.json                                   counts, statistics, timings, digests, verify
    DIR/verify_violations.jsonl, report_lengths.png   written by verify
    DIR/report.html                                   the report page (beam_sft.verify.report_html)
"""

from __future__ import annotations

import json
from collections.abc import Mapping

REPORT_FILE = "report.json"
REJECTS_FILE = "rejects.jsonl"
TOKENIZER_DIR = "tokenizer"
VIOLATIONS_FILE = "verify_violations.jsonl"
HISTOGRAM_FILE = "report_lengths.png"
REPORT_PAGE = "report.html"
DATASET_INFO_FILE = "dataset_info.json"
STATE_FILE = "state.json"  # datasets' list of the data files (dataset_folder.arrow_dataset writes it)

# column -> datasets feature (as ``datasets.Value`` dtype; ``list:`` a list of that dtype)
COLUMNS = {
    "input_ids": "list:int32",
    "assistant_masks": "list:int8",  # weight-0 turns already zeroed
    "row": "string",  # the canonical BeamRow as JSON (nested free-form values survive exactly)
    "source": "string",
    "row_index": "int64",  # within its source file
    "num_tokens": "int32",
    "num_trained": "int32",
}
REQUIRED_COLUMNS = tuple(COLUMNS)

# What a prepared folder of ours may hold; anything else in a target means the folder is the user's.
OWN_ENTRIES = (TOKENIZER_DIR, REPORT_FILE, REJECTS_FILE, VIOLATIONS_FILE, HISTOGRAM_FILE, REPORT_PAGE,
               DATASET_INFO_FILE, STATE_FILE)
OWN_PATTERNS = ("data-*.arrow", "cache-*.arrow")
# Written after the digests are taken (verify's outputs, the report itself and its page): not digested.
UNDIGESTED = (REPORT_FILE, VIOLATIONS_FILE, HISTOGRAM_FILE, REPORT_PAGE)


def features():
    """The ``datasets.Features`` of the prepared columns (for code that works with ``datasets``
    itself; prepare writes and verify reads without importing it: ``arrow_schema``).

    >>> features()["input_ids"].feature.dtype, features()["row_index"].dtype
    ('int32', 'int64')
    """
    from datasets import Features, List, Value

    out = {}
    for name, kind in COLUMNS.items():
        out[name] = List(Value(kind[5:])) if kind.startswith("list:") else Value(kind)
    return Features(out)


def features_dict(columns: Mapping[str, str] = COLUMNS) -> dict:
    """``datasets.Features(...).to_dict()`` of ``columns`` (COLUMNS' notation), built without
    importing ``datasets`` (about half a second of every CLI start); a test compares the two.

    >>> features_dict({"n": "int64", "ids": "list:int32"})
    {'n': {'dtype': 'int64', '_type': 'Value'}, 'ids': {'feature': {'dtype': 'int32', '_type': 'Value'}, '_type': 'List'}}
    """
    out = {}
    for name, kind in columns.items():
        value = {"dtype": kind[5:] if kind.startswith("list:") else kind, "_type": "Value"}
        out[name] = {"feature": value, "_type": "List"} if kind.startswith("list:") else value
    return out


def arrow_schema(columns: Mapping[str, str] = COLUMNS):
    """The Arrow schema ``datasets`` gives ``columns`` (``Features.arrow_schema``), its ``huggingface``
    metadata included, so that ``load_from_disk`` reads the files back with these features."""
    import pyarrow as pa

    fields = []
    for name, kind in columns.items():
        kind_type = pa.type_for_alias(kind[5:] if kind.startswith("list:") else kind)
        fields.append(pa.field(name, pa.list_(kind_type) if kind.startswith("list:") else kind_type))
    metadata = {"huggingface": json.dumps({"info": {"features": features_dict(columns)}})}
    return pa.schema(fields, metadata=metadata)
