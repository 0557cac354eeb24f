"""OpenAI Batch API files joined by ``custom_id``: each request with its answer, one record.

The input file holds ``{"custom_id", "method", "url", "body": {"messages", ...}}`` lines; the output
file ``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}`` lines, in
any order. ``iter_batch_located`` yields ``(file, row, record)`` as ``sources.iter_located`` does:
a joined pair is ``{"custom_id", "request": body, "response": response body}`` (the ``chat_log``
reader's shape), named by the output file and its line; anything that cannot be joined is a
``BadRecord`` with its own reason code, never a silent drop:

- ``batch_missing_request``: an output line whose ``custom_id`` no input line holds;
- ``batch_missing_response``: an input line no output line answers (named by the input file);
- ``batch_error``: an output line with an ``error`` object; ``batch_http_error``: a response whose
  ``status_code`` is not 200;
- ``batch_duplicate_id``: a ``custom_id`` on two lines of one file: every line holding it, on
  either side, is rejected (which answer is whose cannot be told);
- lines that are not JSON keep their reading code; a line that is not an object with a string
  ``custom_id`` (and, in the input, a ``body`` object) is ``malformed_row``.

So every line ends somewhere: a joined pair is one record, every other line one record of its own.
The input is held in memory (one dict of request bodies); the output is read twice (its ids first,
for duplicates), streaming.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beam_sft.data.sources import BadRecord, RawRecord, iter_located
from beam_sft.visible import quoted


@dataclass(frozen=True)
class BatchPair:
    """A Batch API input file and its output file: one source."""

    input: str
    output: str

    @property
    def label(self) -> str:
        return f"{self.output} (batch of {self.input})"

    @property
    def files(self) -> list[Path]:
        return [Path(self.input), Path(self.output)]


def _text(record: Any) -> str:
    return json.dumps(record, ensure_ascii=False)


def _custom_id(record: Any) -> str | None:
    value = record.get("custom_id") if isinstance(record, dict) else None
    return value if isinstance(value, str) else None


def iter_batch_located(pair: BatchPair) -> Iterator[tuple[str, int, Any]]:
    """``(file, row in that file, record or BadRecord)`` for every line of both files (module docstring)."""
    requests: dict[str, tuple[int, dict]] = {}
    input_ids: Counter[str] = Counter()
    for file, row, record in iter_located(pair.input):
        if isinstance(record, BadRecord):
            yield file, row, record
            continue
        cid = _custom_id(record)
        if cid is None or not isinstance(record.get("body"), dict):
            yield file, row, BadRecord(_text(record), f"batch input row {row} has no string custom_id and body "
                                       "object", code="malformed_row")
            continue
        input_ids[cid] += 1
        if input_ids[cid] == 1:
            requests[cid] = (row, record["body"])
        else:
            yield file, row, BadRecord(_text(record), f"custom_id {quoted(cid)} is on {input_ids[cid]} lines of the batch "
                                       f"input (row {requests[cid][0]} first)", code="batch_duplicate_id")
    output_ids = Counter(_custom_id(r) for _, _, r in iter_located(pair.output) if not isinstance(r, BadRecord))
    answered: set[str] = set()
    for file, row, record in iter_located(pair.output):
        if isinstance(record, BadRecord):
            yield file, row, record
            continue
        cid = _custom_id(record)
        if cid is None:
            yield file, row, BadRecord(_text(record), f"batch output row {row} has no string custom_id",
                                       code="malformed_row")
            continue
        if input_ids[cid] <= 1 and output_ids[cid] <= 1:  # one record for the pair (a duplicate pairs with none)
            answered.add(cid)
        yield file, row, _joined(record, cid, requests, input_ids, output_ids)
    for cid, (row, body) in requests.items():
        if cid in answered:
            continue
        line = _text({"custom_id": cid, "body": body})
        if input_ids[cid] > 1 or output_ids[cid] > 1:
            where, n = ("input", input_ids[cid]) if input_ids[cid] > 1 else ("output", output_ids[cid])
            yield pair.input, row, BadRecord(line, f"custom_id {quoted(cid)} is on {n} lines of the batch {where}",
                                             code="batch_duplicate_id")
        else:
            yield pair.input, row, BadRecord(line, f"request {quoted(cid)} (batch input row {row}) has no line in the "
                                             f"batch output {pair.output}", code="batch_missing_response")


def _joined(record: dict, cid: str, requests: dict, input_ids: Counter, output_ids: Counter) -> Any:
    text = _text(record)
    if input_ids[cid] > 1 or output_ids[cid] > 1:
        where = "input" if input_ids[cid] > 1 else "output"
        n = input_ids[cid] if where == "input" else output_ids[cid]
        return BadRecord(text, f"custom_id {quoted(cid)} is on {n} lines of the batch {where}", code="batch_duplicate_id")
    if cid not in requests:
        return BadRecord(text, f"custom_id {quoted(cid)}: no line of the batch input holds this request",
                         code="batch_missing_request")
    error = record.get("error")
    if error is not None:
        what = error.get("message", error) if isinstance(error, dict) else error
        return BadRecord(text, f"custom_id {quoted(cid)}: the request failed: {what}", code="batch_error")
    response = record.get("response")
    if not isinstance(response, dict):
        return BadRecord(text, f"custom_id {quoted(cid)} has neither a response nor an error", code="malformed_row")
    status = response.get("status_code")
    if status != 200:
        return BadRecord(text, f"custom_id {quoted(cid)}: status code {status}, not 200", code="batch_http_error")
    return {"custom_id": cid, "request": requests[cid][1], "response": response.get("body")}


def iter_batch_raw(pair: BatchPair) -> Iterator[RawRecord]:
    """The joined records as ``prepare`` stores them (``sources.iter_raw_located``'s shape)."""
    for file, row, record in iter_batch_located(pair):
        if isinstance(record, BadRecord):
            text = record.text.encode("utf-8", "backslashreplace").decode("utf-8")
            yield RawRecord(file, row, text, record.byte, record)
            continue
        text = json.dumps(record, ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: kept escaped, rejected as invalid_text when decoded
            text = json.dumps(record, ensure_ascii=True)
        yield RawRecord(file, row, text)
