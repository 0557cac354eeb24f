"""Sources -> converted rows: format detection, conversion, the reasoning policy, validation, accounting.

Public streaming API (used by ``beam-sft convert`` and by the prepare stage):

- ``convert_row(raw, *, format, options, source, row) -> BeamRow | Rejection``; ``format`` may be
  ``"auto"``: the row is read by the format its own shape shows (``resolve_format``).
- ``SourceConversion(path, *, format="auto", options)``: iterate it for ``BeamRow | Rejection``;
  ``.format``/``.detection`` name the file's main format (from its first rows), each row is read
  by its own (``.summary.formats`` counts them); for a directory, each row's ``meta`` names its
  own file and its row number there. ``.summary`` counts as rows go by.
- ``iter_source(path, *, format="auto", options)``: the same iterator, without the object.
- ``convert_files(paths, *, format, options, output, rejects) -> ConvertReport``: writes
  ``rows.jsonl`` and ``rejects.jsonl``, one line per row, memory flat in the number of rows.
- ``fill`` (every entry point): a step between conversion and the missing-reasoning policy that may
  write reasoning into turns without it (``beam_sft.reason``: a teacher model). It records each
  trained turn's provenance in ``meta.reasoning``; a turn it was asked to fill and could not
  carries ``{"source": "none", "rejected": CODE}`` there, and when the policy then rejects the row,
  the rejection bears that code (the cause), not ``missing_reasoning``. ``workers`` > 1 converts
  that many rows at once in threads (the fill waits on a network), results still in input order.

Every record read ends as one kept row or one rejection: ``summary.read == kept + rejected``.

>>> result = convert_row({"messages": [{"role": "user", "content": "Hi"},
...     {"role": "assistant", "reasoning_content": "Greet.", "content": "Hello"}]},
...     format="openai", options=ConvertOptions(), source="chat.jsonl", row=4)
>>> result["meta"]
{'source': 'chat.jsonl', 'row': 4}
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from beam_sft.convert.detect import classify, detect_format
from beam_sft.convert.formats import FORMAT_TABLE, reader, reader_name
from beam_sft.convert.infer_tools import ToolUsage, declare_inferred
from beam_sft.convert.options import FORMATS, ConvertOptions
from beam_sft.convert.pairs import pair_lists
from beam_sft.convert.policy import apply_missing_reasoning
from beam_sft.convert.rows import BeamRow, Rejection, has_reasoning
from beam_sft.convert.validate import Places, row_notes, validate
from beam_sft.convert.xlam import XLAM_CONVERSATION
from beam_sft.data import hub
from beam_sft.data.batch_api import BatchPair, iter_batch_located
from beam_sft.data.rejects import RejectsWriter, SourceSummary, format_summary_table
from beam_sft.data.sources import (
    BadRecord,
    SkippedFile,
    check_readable,
    compressed,
    expand_source,
    files_read,
    iter_located,
    read_twice,
)
from beam_sft.errors import BeamError, OutputUnwritable, RunStopped
from beam_sft.harmony.spans import is_trained
from beam_sft.visible import KEY_CHARS, cut, visible

Converter = Callable[..., "BeamRow | Rejection"]
# A step between conversion and the missing-reasoning policy (see the module docstring).
Fill = Callable[[BeamRow], BeamRow]
# The rejections the policy gives a row whose turns lack reasoning (their cause may be a fill's code).
_POLICY_CODES = frozenset({"missing_reasoning", "no_trained_turn"})

# Built from convert/formats.py's table (add a format there): converters keyed by the function's
# name, and --format -> that name.
CONVERTERS: dict[str, Converter] = {reader_name(f.name): reader(f.name) for f in FORMAT_TABLE}
FORMAT_CONVERTERS: dict[str, str] = {f.name: reader_name(f.name) for f in FORMAT_TABLE}


def resolve_format(raw: Any, options: ConvertOptions, default: str = "openai") -> str:
    """The format one row's shape shows (detect.classify), else ``default`` (the file's main one).

    Never raises: a row whose shape cannot even be looked at is read by ``default``, which rejects it.
    """
    try:
        return classify(raw, options.columns) or default
    except Exception:  # classify is a heuristic over arbitrary JSON; the converter has the last word
        return default


# A surrogate escape (``\\ud800`` to ``\\udfff``) in JSON text: the only way a lone surrogate gets into
# a string that ``jsontext.loads`` decodes from text that is itself valid Unicode.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# ``json.dumps`` of what ``jsontext.loads(text)`` decodes is at most this many times ``len(text)``:
# strings and keys come out no longer than they were written (JSON must already escape what dumps
# escapes), whitespace goes, a separator grows from 1 to 2 characters, and a number's repr is at
# most 4.5 times its text ("9e15" -> "9000000000000000.0"); tests/convert/test_check_record.py.
DUMPS_GROWTH = 8


def text_passes(text: str, max_chars: int | None) -> bool:
    """Whether ``check_record`` finds nothing in ``jsontext.loads(text)``, told from the text alone:
    the strict decoder refuses NaN and Infinity, a text with no raw surrogate and no surrogate escape
    decodes to strings without one, and with ``max_chars`` a text this short cannot serialize past
    it. False means only "not sure": ``check_record`` then serializes the value as before.

    >>> text_passes('{"a": "é", "b": [1.5]}', None), text_passes('{"a": "\\ud800"}', None)
    (True, False)
    >>> text_passes('[1e9]', 8 * 5), text_passes('[1e9]', 8 * 5 - 1)
    (True, False)
    """
    if max_chars is not None and len(text) * DUMPS_GROWTH > max_chars:
        return False
    if _SURROGATE_ESCAPE.search(text):
        return False
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


def check_record(raw: Any, max_chars: int | None = None, *, text: str | None = None) -> tuple[str, str] | None:
    """``(code, message)`` for a record no text field can hold: text that is not valid Unicode
    (lone surrogates: a ``"\\ud800"`` escape, or bytes that were not UTF-8) or a NaN/Infinity
    (not JSON: the row column would stop being standard JSON), or, with ``max_chars``, a record
    longer than that as compact JSON (``row_too_large``: one measure for convert and prepare,
    whatever the source's own spacing). Every key and value is looked at: first in one C-speed
    pass (strict JSON, then UTF-8), then, only when that fails, by a walk that names the place.

    ``text``: the JSON text ``raw`` was decoded from by ``jsontext.loads``; when ``text_passes``
    tells from it that nothing can be found, the record is not serialized again (prepare decodes
    every record from text: that serialization was a tenth of its encode workers' time)."""
    if text is not None and text_passes(text, max_chars):
        return None
    try:
        text = json.dumps(raw, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
        if max_chars is not None and len(text) > max_chars:
            return "row_too_large", (f"the record is {len(text)} characters as JSON, over max_row_chars "
                                     f"{max_chars}: not converted")
        return None
    except (ValueError, UnicodeEncodeError, TypeError, RecursionError):
        pass  # TypeError: a value JSON does not know (Parquet bytes, dates): the walk judges the rest
    return _unholdable(raw, lambda path: f"row{path}")


def _unholdable(value: Any, name: Callable[[str], str]) -> tuple[str, str] | None:
    """``(code, message)`` for the first text that is not valid Unicode or number that is NaN or
    Infinity in ``value``, the place named by ``name`` of its path there (``.tools[0].function``,
    ``[2]``, `` (key)`` for a key itself; ``""`` for ``value`` itself)."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                return "invalid_text", f"{name(path)} is not valid Unicode text ({_lone_surrogate(exc)})"
        elif isinstance(value, float):
            if not math.isfinite(value):
                return "non_standard_number", f"{name(path)} is {value!r}, which JSON cannot hold"
        elif isinstance(value, dict):  # pushed last first, so the first bad place in the row is named
            for key, item in reversed(value.items()):
                stack.append((f"{path}.{cut(str(key), KEY_CHARS)}", item))  # (a 1 MB key names no place)
                if isinstance(key, str):
                    stack.append((f"{path} (key)", key))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in reversed(list(enumerate(value))))
    return None


def _lone_surrogate(exc: UnicodeEncodeError) -> str:
    """Where and what: U+DC80..U+DCFF is how the reader keeps a byte that is not UTF-8
    (``surrogateescape``), which a user looks for as a byte, not as a surrogate."""
    code = ord(exc.object[exc.start])
    if 0xDC80 <= code <= 0xDCFF:
        return (f"U+{code:04X} at character {exc.start}: the byte 0x{code - 0xDC00:02X}, which is not UTF-8, "
                f"or a \\u{code:04x} escape")
    return f"a lone surrogate U+{code:04X} at character {exc.start}"


def conflicting_carriers(raw: Any, options: ConvertOptions) -> tuple[str, str] | None:
    """A row that holds its conversation twice: two of ``messages``, ``conversations`` (as mapped by
    ``columns``) and a list of turn pairs (pairs.py), or one of them beside the flat prompt/answer
    columns or xLAM's ``query``/``answers``. Which one is meant cannot be told, so neither is picked."""
    if not isinstance(raw, dict):
        return None
    cols = options.columns

    def held(key: str) -> bool:  # null, [] or "" carries nothing (a union schema's empty column)
        value = raw.get(key)
        return value is not None and not (isinstance(value, (list, str)) and not value)

    present = [k for k in (cols.messages, cols.conversations) if held(k)]
    present += [k for k, _ in pair_lists(raw, cols) if k not in present]  # `conversation`'s turn pairs
    if present and held(cols.prompt) and held(cols.answer):
        present.append(f"{cols.prompt}/{cols.answer}")
    if present and all(held(k) for k in XLAM_CONVERSATION):
        present.append("/".join(XLAM_CONVERSATION))
    if len(present) > 1:
        return "conflicting_carriers", f"the row holds {' and '.join(present)}: which conversation is meant is unclear"
    return None


def _escaped(raw: Any) -> Any:
    """A raw record that cannot be written as UTF-8 JSON, as exact ASCII-escaped JSON text."""
    if isinstance(raw, str):
        return raw.encode("utf-8", "backslashreplace").decode("utf-8")
    return json.dumps(raw, ensure_ascii=True, default=repr)


MISSING_REASONING_CAUSE = "because trained turns had no reasoning (missing_reasoning={policy})"


def convert_row(
    raw: Any,
    *,
    format: str,
    options: ConvertOptions,
    source: str | None = None,
    row: int | None = None,
    default_format: str = "openai",
    fill: Fill | None = None,
    text: str | None = None,
    late_check: bool = True,
) -> BeamRow | Rejection:
    """Convert, ``fill``, apply the missing-reasoning policy, validate; attach ``meta`` or the rejection context.

    ``format="auto"`` reads the row by the format its shape shows, ``default_format`` when it shows
    none. A kept row's ``meta`` is ``{"source", "row"}``, plus ``notes`` when it carries some, plus
    ``reasoning`` (per-turn provenance) when a ``fill`` ran.

    ``text``: the JSON text ``raw`` was decoded from by ``jsontext.loads`` (``check_record``'s).
    ``late_check=False``: the caller serializes every kept row itself and checks it there
    (``late_rejection``), rather than have each kept row serialized twice; the row's ``meta.places``
    then holds the source entry of each message for that check, which the caller takes off
    (``take_places``) before anything is written.
    """
    asked = format
    if format == "auto":
        format = resolve_format(raw, options, default_format)
    if format not in FORMAT_CONVERTERS:
        raise BeamError(f"unknown format {format!r} (known: auto, {', '.join(FORMAT_CONVERTERS)})")
    if isinstance(raw, BadRecord):
        code = "unreadable_rest" if raw.rest else raw.code
        return Rejection(code, raw.describe()).at(source=source, row=row, raw=_escaped(raw.text))
    problem = check_record(raw, options.max_row_chars, text=text)
    if problem is None:
        problem = conflicting_carriers(raw, options)
    if problem is not None:
        raw_out = raw if problem[0] == "conflicting_carriers" else _escaped(raw)
        if problem[0] == "row_too_large":  # the rejects line names the row, not 50 MB of it again
            raw_out = _escaped(raw)[:1000]
        return Rejection(*problem).at(source=source, row=row, raw=raw_out)
    converter = CONVERTERS[FORMAT_CONVERTERS[format]]
    try:
        result = converter(raw, options=_asking(options, origins=fill is not None))
        places = None if isinstance(result, Rejection) else take_places(result)
        if not isinstance(result, Rejection) and options.infer_tools and options.inferred_tools:
            result = declare_inferred(result, options.inferred_tools)  # before a fill: its prompt shows them
        if not isinstance(result, Rejection):
            converted = result if fill is None else fill(result)
            result = apply_missing_reasoning(converted, options.missing_reasoning)
            result = validate(result, options=options, places=places) or result
            if isinstance(result, Rejection) and result.code == "no_trained_turn":
                result = _explain_no_trained_turn(result, converted, options)
            if late_check and not isinstance(result, Rejection):
                result = late_rejection(result, places) or result
            if isinstance(result, Rejection) and result.code in _POLICY_CODES:
                result = _fill_cause(result, converted, places)
    except Rejection as exc:
        result = exc
    except (OutputUnwritable, RunStopped):  # a fill's store is full, its teacher refuses the key: the run ends
        raise
    except Exception as exc:  # a converter bug must not abort a long run; the row goes to rejects
        result = Rejection("converter_error", f"{type(exc).__name__}: {exc}")
    if isinstance(result, Rejection):
        if asked != "auto" and result.code == "malformed_row":
            result = _another_format(result, raw, format, options)
        return result.at(source=source, row=row, raw=raw)
    notes = {**(result.get("meta") or {}).get("notes", {}), **row_notes(result)}
    meta: dict[str, Any] = {"source": source, "row": row}
    if notes:
        meta["notes"] = notes
    inferred = (result.get("meta") or {}).get("inferred_tools")
    if inferred:
        meta["inferred_tools"] = inferred
    provenance = (result.get("meta") or {}).get("reasoning") if fill is not None else _carried_provenance(raw, result)
    if provenance is not None:  # turns a truncate policy cut are gone from the row, and from here
        meta["reasoning"] = [p for p in provenance if p.get("turn", 0) < len(result["messages"])]
    if not late_check and places:  # the caller's late_rejection names messages by them, and takes them off
        meta["places"] = places
    return {**result, "meta": meta}


def _another_format(rejection: Rejection, raw: Any, format: str, options: ConvertOptions) -> Rejection:
    """A row the asked format could not read, whose shape is another format's: the message says which
    (a Capybara pair list or a ChatML text under ``--format openai`` was told only "no 'messages' list")."""
    shown = resolve_format(raw, options, default="")
    if not shown or shown == format:
        return rejection
    return Rejection(rejection.code, f"{rejection.message} (the row's shape is format {shown}'s: try format auto "
                     f"or {shown})")


def late_rejection(row: BeamRow, places: list[str] | None = None) -> Rejection | None:
    """The one number rule on what is kept, however a value arrived (a JSON string decoded later, a
    Harmony argument cast to its schema type, a Python literal): never Infinity, never a lone
    surrogate. Of the row as converted: a ``meta`` beside it (``convert_row`` adds its own) is not looked at.

    The place is named as every other rejection names it: a message by the source entry it was read
    from (``places``, validate.Places: ``conversations[1].tool_calls[0].function.arguments.x``); what
    is the converted row's own (``tools`` read from a system prompt) says so.

    >>> row = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a",
    ...        "tool_calls": [{"function": {"name": "f", "arguments": {"x": float("inf")}}}]}]}
    >>> late_rejection(row, ["conversations[0]", "conversations[1]"]).message
    'conversations[1].tool_calls[0].function.arguments.x is inf, which JSON cannot hold'
    >>> late_rejection({"messages": [], "tools": [{"default": float("nan")}]}).message
    "the converted row's tools[0].default is nan, which JSON cannot hold"
    """
    at = Places(places)
    messages = row.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else ()):
        late = _unholdable(message, lambda path, i=i: at(i, path[1:]) if path.startswith(".") else at(i) + path)
        if late is not None:
            return Rejection(*late)
    rest = {k: v for k, v in row.items() if k not in ("meta", "messages")}
    late = _unholdable(rest, lambda path: f"the converted row's {path[1:]}" if path.startswith(".")
                       else f"the converted row{path}")
    return None if late is None else Rejection(*late)


def _carried_provenance(raw: Any, row: BeamRow) -> list[dict] | None:
    """The ``meta.reasoning`` of a source row that is already a BeamRow (``beam-sft reason``'s
    output, read again by ``prepare``): kept when its messages map one to one onto the row's.

    >>> raw = {"messages": [{"role": "user", "content": "q"}], "meta": {"reasoning": [{"turn": 0, "source": "data"}]}}
    >>> _carried_provenance(raw, {"messages": [{"role": "user", "content": "q"}]})
    [{'turn': 0, 'source': 'data'}]
    >>> _carried_provenance({**raw, "messages": []}, {"messages": [{"role": "user", "content": "q"}]})
    """
    if not isinstance(raw, dict) or not isinstance(raw.get("meta"), dict):
        return None
    entries = raw["meta"].get("reasoning")
    messages = raw.get("messages")
    if (not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("source"), str)
                                                 for e in entries)
            or not isinstance(messages, list) or len(messages) != len(row.get("messages") or [])):
        return None
    return entries


@functools.lru_cache(maxsize=16)
def _asking(options: ConvertOptions, *, origins: bool) -> ConvertOptions:
    """``options`` asking the converters for the source entry of each message (for validate's messages)
    and, with ``origins``, where each turn's reasoning came from (for a fill's provenance)."""
    return dataclasses.replace(options, message_places=True, reasoning_origins=origins or options.reasoning_origins)


def take_places(row: BeamRow) -> list[str] | None:
    """The converter's ``meta.places`` (the source entry of each message), taken off the row: it names
    messages in rejections and is never written."""
    meta = row.get("meta")
    if not isinstance(meta, dict) or "places" not in meta:
        return None
    places = meta.pop("places")
    if not meta:
        del row["meta"]
    return places


def _fill_cause(rejection: Rejection, filled: BeamRow, places: list[str] | None = None) -> Rejection:
    """The policy rejected a row whose turns a fill was asked for and refused: that refusal's code
    (the first turn's), with the policy's message after it. The turn is named by its source entry
    (``places``, validate.Places).

    >>> row = {"meta": {"reasoning": [{"turn": 1, "source": "none", "rejected": "teacher_empty",
    ...        "message": "the teacher wrote nothing"}]}}
    >>> r = _fill_cause(Rejection("missing_reasoning", "messages[1] has no reasoning"), row)
    >>> r.code, r.message
    ('teacher_empty', 'messages[1]: the teacher wrote nothing (then missing_reasoning: messages[1] has no reasoning)')
    """
    entries = (filled.get("meta") or {}).get("reasoning") or []
    refused = next((e for e in entries if isinstance(e, dict) and e.get("rejected")), None)
    if refused is None:
        return rejection
    turn = refused.get("turn")
    where = Places(places)(turn) if isinstance(turn, int) and not isinstance(turn, bool) else f"messages[{turn}]"
    return Rejection(refused["rejected"], f"{where}: {refused.get('message', '')} "
                     f"(then {rejection.code}: {rejection.message})")


def _explain_no_trained_turn(rejection: Rejection, converted: BeamRow, options: ConvertOptions) -> Rejection:
    """Under ``truncate``/``unmask`` a row without reasoning ends as ``no_trained_turn``: say why."""
    messages = converted.get("messages")
    if options.missing_reasoning == "drop" or not isinstance(messages, list):
        return rejection
    n = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant"
            and is_trained(m) and not has_reasoning(m))
    if not n:
        return rejection
    cause = MISSING_REASONING_CAUSE.format(policy=options.missing_reasoning)
    return Rejection("no_trained_turn", f"{rejection.message}, {cause}: {n} turn(s)")


class SourceConversion:
    """One source, converted lazily. ``format='auto'`` reads the first ``options.detect_rows``
    records up front to name the file's main format, then streams the rest, reading each row by
    the format its own shape shows (the main one when it shows none)."""

    def __init__(
        self,
        path: str | Path | BatchPair,
        *,
        format: str = "auto",
        options: ConvertOptions | None = None,
        source: str | None = None,
        fill: Fill | None = None,
        workers: int = 1,
    ):
        if format != "auto" and format not in FORMATS:
            raise BeamError(f"unknown format {format!r} (known: auto, {', '.join(FORMATS)})")
        self.options = options or ConvertOptions()
        ref = path if isinstance(path, (BatchPair, hub.DatasetRef)) else hub.parse_data_arg(path)
        # a dataset (a local repository's split included) is named with its split, as prepare's report does
        self.source = (ref.label if isinstance(ref, hub.DatasetRef) else str(path)) if source is None else source
        self.auto = format == "auto"
        self.fill = fill
        self.workers = max(1, workers)
        self._path = path.label if isinstance(path, BatchPair) else ref.label if isinstance(
            ref, hub.DatasetRef) else str(path)
        if isinstance(path, BatchPair):  # two files joined by custom_id (data/batch_api.py): one source
            self.source = path.label if source is None else source
            self.files, self.skipped = path.files, []
        else:  # the files a directory source reads, and those it does not (named, never passed over)
            self.files, self.skipped = expand_source(path)
        if self.options.infer_tools and not self.options.inferred_tools:
            self.options = dataclasses.replace(self.options, inferred_tools=self._tool_usage(path, format))
        self._records = iter_batch_located(path) if isinstance(path, BatchPair) else iter_located(path)
        self._head: list[tuple[str, int, Any]] = []
        if self.auto:
            self._head = list(itertools.islice(self._records, self.options.detect_rows))
            sampled = [raw for _, _, raw in self._head if not isinstance(raw, BadRecord)]
            self.format, self.detection = detect_format(sampled, self.options.columns)
            if not self._head:
                self.detection = "empty: no records"
            else:
                self.detection += "; each row read by its own shape"
        else:
            self.format, self.detection = format, f"{format}: given"
        if isinstance(path, BatchPair):
            self.detection += "; a Batch API pair joined by custom_id"
        if self.skipped:
            self.detection += f"; skipped {len(self.skipped)} file(s) that are not data files"
        gz = sum(1 for f in self.files if isinstance(f, Path) and f.is_file() and compressed(f))
        if gz:  # said, since byte offsets in its rejections count decompressed bytes
            self.detection += "; gzip, read decompressed" if gz == 1 else f"; {gz} gzip files, read decompressed"
        self.summary = SourceSummary(self.source, self.format, self.detection)

    def _tool_usage(self, path: str | Path | BatchPair, format: str) -> tuple[str, ...]:
        """The first pass of ``infer_tools``: every row converted (not validated), the calls to tools
        their rows do not declare seen (convert/infer_tools.py); the declarations they make."""
        usage = ToolUsage()
        records = iter_batch_located(path) if isinstance(path, BatchPair) else iter_located(path)
        for _, _, raw in records:
            if isinstance(raw, BadRecord):
                continue
            fmt = resolve_format(raw, self.options) if format == "auto" else format
            try:
                result = CONVERTERS[FORMAT_CONVERTERS[fmt]](raw, options=self.options)
            except Exception:  # a converter bug: the second pass rejects the row (converter_error)
                continue
            if not isinstance(result, Rejection):
                usage.observe(result)
        return usage.declarations()

    def _label(self, file: str) -> str:
        # A file read on its own keeps the caller's label; a directory's rows name their file.
        return self.source if file == self._path else file

    def _convert(self, record: tuple[str, int, Any]) -> tuple[Any, str, BeamRow | Rejection]:
        file, index, raw = record
        fmt = resolve_format(raw, self.options, self.format) if self.auto else self.format
        return raw, fmt, convert_row(raw, format=fmt, options=self.options, source=self._label(file), row=index,
                                fill=self.fill)

    def __iter__(self) -> Iterator[BeamRow | Rejection]:
        return (result for _, result in self.numbered())

    def numbered(self) -> Iterator[tuple[int, BeamRow | Rejection]]:
        """``(the record's number in the whole source, from 0; its result)``: a source of several files
        (a folder, a Batch API pair, a dataset's split) names each result by its file and its row there,
        and this number is the record's place in the source (a rejects line's ``index``)."""
        records = itertools.chain(self._head, self._records)
        for index, (raw, fmt, result) in enumerate(ordered_map(self._convert, records, self.workers)):
            if isinstance(result, Rejection):
                cause = MISSING_REASONING_CAUSE.format(policy=self.options.missing_reasoning)
                self.summary.count_rejected(result.code, fmt, cause if cause in result.message else None)
                if result.code == "unreadable_rest":
                    self.summary.unreadable = (raw.byte, raw.more)
            else:
                self.summary.count_kept(fmt, result["meta"].get("notes"))
            yield index, result


def ordered_map(fn: Callable[[Any], Any], items: Iterable[Any], workers: int) -> Iterator[Any]:
    """``map(fn, items)`` with up to ``workers`` calls at once in threads, in input order, holding at
    most ``2 * workers`` items (memory flat in the number of rows).

    >>> list(ordered_map(lambda x: x * x, range(5), 3))
    [0, 1, 4, 9, 16]
    """
    if workers <= 1:
        yield from map(fn, items)
        return
    pool = ThreadPoolExecutor(workers, thread_name_prefix="beam-sft-convert")
    try:
        window: deque = deque()
        for item in items:
            window.append(pool.submit(fn, item))
            if len(window) >= 2 * workers:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()
    except BaseException:
        # Ctrl-C, an error, a closed generator: the queued items are cancelled and the running ones not
        # waited for here, so the caller's tear-down (the teacher's abort) runs at once and ends them
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def iter_source(
    path: str | Path, *, format: str = "auto", options: ConvertOptions | None = None
) -> Iterator[BeamRow | Rejection]:
    """Stream one source's rows as ``BeamRow | Rejection``."""
    return iter(SourceConversion(path, format=format, options=options))


@dataclass
class ConvertReport:
    sources: list[SourceSummary] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)

    @property
    def read(self) -> int:
        return sum(s.read for s in self.sources)

    @property
    def kept(self) -> int:
        return sum(s.kept for s in self.sources)

    def table(self) -> str:
        lines = [format_summary_table(self.sources)]
        lines.extend(visible(f"{f.path}: skipped, {f.reason}", newlines=False) for f in self.skipped)
        return "\n".join(lines)

    def over_rate(self, max_reject_rate: float) -> list[SourceSummary]:
        """Sources whose reject rate exceeds the limit (every source within it keeps the total within it)."""
        return [s for s in self.sources if s.reject_rate > max_reject_rate]

    def to_json(self) -> dict[str, Any]:
        return {"read": self.read, "kept": self.kept, "sources": [s.to_json() for s in self.sources],
                "skipped": [{"path": str(f.path), "reason": f.reason} for f in self.skipped]}


def _check_read_once(files: Sequence[Path | str | BatchPair]) -> None:
    """One file reached twice (given twice, spelled two ways, a folder and a file in it, a dataset
    folder and a file of its split, a link) would have every row converted twice, unsaid: refused
    before any output is opened, naming both. What each reads is the readers' own listing
    (``sources.files_read``), the rule prepare's config checks by too."""
    twice = read_twice([item.files if isinstance(item, BatchPair) else files_read(item) for item in files])
    if twice is not None:
        first, second, real = twice
        raise BeamError(f"{_shown(files[first])} and {_shown(files[second])} both read {real}: its rows would be "
                        "converted twice; give it once")


def _shown(item: Path | str | BatchPair) -> str:
    return item.label if isinstance(item, BatchPair) else str(item)


def convert_files(
    paths: Iterable[str | Path | BatchPair],
    *,
    format: str = "auto",
    options: ConvertOptions | None = None,
    output: str | Path | None = None,
    rejects: str | Path | None = None,
    on_source: Callable[[SourceConversion], None] | None = None,
    fill: Fill | None = None,
    workers: int = 1,
    on_row: Callable[[BeamRow | Rejection], None] | None = None,
) -> ConvertReport:
    """Convert every source into ``output`` (JSON Lines of BeamRows) and ``rejects`` (JSON Lines).

    A directory is expanded into its data files, each reported as its own source (the files it
    does not read are listed in ``report.skipped``).
    """
    report = ConvertReport()
    files: list[Path | BatchPair] = []
    for path in paths:
        if isinstance(path, BatchPair):
            files.append(path)
            continue
        found, skipped = expand_source(path)
        files.extend(found)
        report.skipped.extend(skipped)
    _check_read_once(files)
    for path in files:  # an encoding or compression no reader reads fails before any output is opened
        for file in path.files if isinstance(path, BatchPair) else [path]:
            if isinstance(file, Path) and file.is_file():
                check_readable(file)
    out_fh = None
    if output is not None:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        out_fh = open(output, "w", encoding="utf-8")
    try:
        with RejectsWriter(rejects) as rejects_out:
            for path in files:
                conversion = SourceConversion(path, format=format, options=options, fill=fill, workers=workers)
                if on_source is not None:
                    on_source(conversion)
                for index, result in conversion.numbered():
                    if on_row is not None:
                        on_row(result)
                    if isinstance(result, Rejection):  # placed: the table's source, and its file when it has several
                        rejects_out.write(result, source=conversion.source, index=index)
                    elif out_fh is not None:
                        out_fh.write(json.dumps(result, ensure_ascii=False) + "\n")
                report.sources.append(conversion.summary)
    finally:
        if out_fh is not None:
            out_fh.close()
    return report
