"""Batch files joined by ``custom_id``: each request with its answer, one record. Two providers
write them, each told by the keys of its lines (never guessed: a line of neither shape, or of both,
is ``malformed_row``):

- OpenAI's Batch API: the input file holds ``{"custom_id", "method", "url", "body": {"messages", ...}}``
  lines, the output file ``{"id", "custom_id", "response": {"status_code", "request_id", "body"},
  "error"}`` lines;
- Anthropic's Message Batches: the requests file ``{"custom_id", "params": {"model", "max_tokens",
  "system"?, "messages", "tools"?, ...}}`` lines (the ``requests`` of ``messages.batches.create``, one a
  line), the results file ``{"custom_id", "result": {"type": "succeeded", "message": {...}}}`` lines
  (``type`` also ``errored`` with an ``error``, ``canceled``, ``expired``).

Lines come in any order. ``iter_batch_located`` yields ``(file, row, record)`` as
``sources.iter_located`` does: a joined pair is ``{"custom_id", "request": body or params, "response":
response body or result message}`` (the ``chat_log`` reader's shape: an Anthropic message is a logged
Messages call there, read by anthropic.py), named by the output file and its line; anything that cannot
be joined is a ``BadRecord`` with its own reason code, never a silent drop:

- ``batch_missing_request``: an output line whose ``custom_id`` no input line holds;
- ``batch_missing_response``: an input line no output line answers (named by the input file);
- ``batch_error``: an output line with an ``error`` object, or an Anthropic result ``errored``,
  ``canceled`` or ``expired`` (the request was not answered); ``batch_http_error``: a response whose
  ``status_code`` is not 200;
- ``batch_duplicate_id``: a ``custom_id`` on two lines of one file: every line holding it, on
  either side, is rejected (which answer is whose cannot be told);
- lines that are not JSON keep their reading code; a line that is not an object with a string
  ``custom_id`` (and, in the input, a ``body`` or ``params`` object) is ``malformed_row``, and so is an
  answer whose provider is not its request's (an OpenAI request's id on an Anthropic result).

So every line ends somewhere: a joined pair is one record, every other line one record of its own.
The input is held in memory (one dict of requests); the output is read twice (its ids first, for
duplicates), streaming.
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


OPENAI, ANTHROPIC = "OpenAI", "Anthropic"


@dataclass(frozen=True)
class Provider:
    """Whose batch an input line is from, told by the key holding its request, and that request."""

    name: str
    request_key: str
    request: dict


def _request_provider(record: Any) -> Provider | None:
    """OpenAI's ``body`` or Anthropic's ``params`` (an object); neither, or both, is no request."""
    if not isinstance(record, dict):
        return None
    found = [Provider(name, key, record[key]) for name, key in ((OPENAI, "body"), (ANTHROPIC, "params"))
             if isinstance(record.get(key), dict)]
    return found[0] if len(found) == 1 else None


def _answer_provider(record: dict) -> str | None:
    """OpenAI's ``response``/``error`` or Anthropic's ``result`` (an object); neither, or both, is none."""
    openai = record.get("response") is not None or record.get("error") is not None
    anthropic = isinstance(record.get("result"), dict)
    return None if openai == anthropic else ANTHROPIC if anthropic else OPENAI


def _custom_id(record: Any) -> str | None:
    value = record.get("custom_id") if isinstance(record, dict) else None
    return value if isinstance(value, str) else None


def iter_batch_located(pair: BatchPair) -> Iterator[tuple[str, int, Any]]:
    """``(file, row in that file, record or BadRecord)`` for every line of both files (module docstring)."""
    requests: dict[str, tuple[int, Provider]] = {}  # custom_id -> (its input row, whose shape it has)
    input_ids: Counter[str] = Counter()
    for file, row, record in iter_located(pair.input):
        if isinstance(record, BadRecord):
            yield file, row, record
            continue
        cid = _custom_id(record)
        provider = _request_provider(record)
        if cid is None or provider is None:
            yield file, row, BadRecord(_text(record), f"batch input row {row} of {file} has no string custom_id "
                                       "with one request object (OpenAI's body or Anthropic's params)",
                                       code="malformed_row")
            continue
        input_ids[cid] += 1
        if input_ids[cid] == 1:
            requests[cid] = (row, provider)
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
        yield file, row, _joined(record, cid, pair, requests, input_ids, output_ids)
    for cid, (row, provider) in requests.items():
        if cid in answered:
            continue
        line = _text({"custom_id": cid, provider.request_key: provider.request})
        if input_ids[cid] > 1 or output_ids[cid] > 1:
            where, n = ("input", input_ids[cid]) if input_ids[cid] > 1 else ("output", output_ids[cid])
            yield pair.input, row, BadRecord(line, f"custom_id {quoted(cid)} is on {n} lines of the batch {where}",
                                             code="batch_duplicate_id")
        else:
            yield pair.input, row, BadRecord(line, f"request {quoted(cid)} (batch input row {row}) has no line in the "
                                             f"batch output {pair.output}", code="batch_missing_response")


def _joined(record: dict, cid: str, pair: BatchPair, requests: dict, input_ids: Counter, output_ids: Counter) -> Any:
    text = _text(record)
    if input_ids[cid] > 1 or output_ids[cid] > 1:
        where = "input" if input_ids[cid] > 1 else "output"
        n = input_ids[cid] if where == "input" else output_ids[cid]
        return BadRecord(text, f"custom_id {quoted(cid)} is on {n} lines of the batch {where}", code="batch_duplicate_id")
    if cid not in requests:
        return BadRecord(text, f"custom_id {quoted(cid)}: no line of the batch input {pair.input} holds this request",
                         code="batch_missing_request")
    row, provider = requests[cid]
    answer = _answer_provider(record)
    if answer is None:
        return BadRecord(text, f"custom_id {quoted(cid)}: the output line has no answer (OpenAI's response or error, "
                         "or Anthropic's result)", code="malformed_row")
    if answer != provider.name:
        return BadRecord(text, f"custom_id {quoted(cid)}: an {answer} answer to an {provider.name} request (batch "
                         f"input row {row} of {pair.input}): not one batch", code="malformed_row")
    if answer == ANTHROPIC:
        return _anthropic_joined(record, cid, text, provider.request)
    error = record.get("error")
    if error is not None:
        return BadRecord(text, f"custom_id {quoted(cid)}: the request failed: {_error_text(error)}", code="batch_error")
    response = record.get("response")
    if not isinstance(response, dict):
        return BadRecord(text, f"custom_id {quoted(cid)} has neither a response nor an error", code="malformed_row")
    status = response.get("status_code")
    if status != 200:
        return BadRecord(text, f"custom_id {quoted(cid)}: status code {quoted(status)}, not 200", code="batch_http_error")
    return {"custom_id": cid, "request": provider.request, "response": response.get("body")}


def _anthropic_joined(record: dict, cid: str, text: str, params: dict) -> Any:
    """A Message Batches result: ``succeeded`` joined (its ``message`` is the logged call's response);
    ``errored`` failed, ``canceled`` and ``expired`` never ran: no answer, ``batch_error`` as OpenAI's."""
    result = record["result"]
    kind = result.get("type")
    if kind == "succeeded":
        message = result.get("message")
        if not isinstance(message, dict):
            return BadRecord(text, f"custom_id {quoted(cid)}: a succeeded result without a message object",
                             code="malformed_row")
        return {"custom_id": cid, "request": params, "response": message}
    if kind == "errored":
        return BadRecord(text, f"custom_id {quoted(cid)}: the request failed: {_error_text(result.get('error'))}",
                         code="batch_error")
    if kind in ("canceled", "expired"):
        return BadRecord(text, f"custom_id {quoted(cid)}: the request was {kind} before it was answered",
                         code="batch_error")
    return BadRecord(text, f"custom_id {quoted(cid)}: result type {quoted(kind)} (known: succeeded, errored, "
                     "canceled, expired)", code="malformed_row")


def _error_text(error: Any) -> str:
    """An error object's type and message, one line (Anthropic nests ``{"type": "error", "error": {...}}``).

    >>> _error_text({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})
    "invalid_request_error: 'bad'"
    """
    while isinstance(error, dict) and isinstance(error.get("error"), dict):
        error = error["error"]
    if not isinstance(error, dict) or "message" not in error:
        return quoted(error)
    kind = error.get("type", error.get("code"))
    return f"{kind}: {quoted(error['message'])}" if isinstance(kind, str) else quoted(error["message"])


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
