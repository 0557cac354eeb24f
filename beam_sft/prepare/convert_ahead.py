"""Records converted on the idle core while the tokenizer loads, handed to the encode workers.

Loading the tokenizer takes one core for a second or two (importing transformers, then the backend's
read of tokenizer.json, which holds the GIL); then come the run's other serial steps (the records
file, the start-up probe). ``head_start``'s child, once its digests are sent, reads the records as
the run will (``records.record_batches``: the same reader, so the same batches) and converts them
(``batch.convert_records``: decode, convert, mix, the row column) batch after batch into an unlinked
temporary file, until the parent says stop, just before it forks the encode workers. A worker given
a batch the child converted reads its items back (a fifth of converting them) instead.

Conversion depends on the tokenizer only through the converter options' forbidden tokens (its added
and special tokens). The child predicts them from the tokenizer folder's files
(``predicted_forbidden``). A speculation, never a second path: the parent uses the child's items
only where everything ``convert_records`` reads is the same as in the run (``Ahead.usable``: the
source jobs, options included, and the seed), and a worker only for a batch whose record columns
have the digest the child converted (``Ahead.take``). Anything else (a wrong prediction, a file
changed between the two reads, a child that failed or was killed) converts as it always did.
(tests/prepare/test_convert_ahead.py.)
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import select
from dataclasses import dataclass, field
from pathlib import Path

from beam_sft.convert.validate import forbidden_among
from beam_sft.dataset_folder.tokenizer import added_tokens_entries
from beam_sft.prepare.batch import RECORD_COLUMNS, EncodeJob, convert_records
from beam_sft.prepare.records import record_batches

# The child stops converting once its file holds this much (pickled rows are about twice their JSON).
MAX_AHEAD_BYTES = 256 << 20
_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


@dataclass(frozen=True)
class Entry:
    offset: int
    length: int
    digest: bytes  # batch_digest of the record columns it was converted from


@dataclass
class Ahead:
    """The child's converted batches: its source jobs and seed, and batch index -> Entry in ``fd``."""

    jobs: tuple
    seed: int
    entries: dict[int, Entry] = field(default_factory=dict)
    fd: int = -1

    def usable(self, jobs, seed: int) -> bool:
        """Whether the run converts exactly as the child did: the same seed, and the child's source jobs
        (each source's label, format, weight and converter options) the run's own, in order."""
        return bool(self.entries) and seed == self.seed and tuple(jobs[:len(self.jobs)]) == self.jobs

    def take(self, index: int | None, columns: tuple[list, ...]) -> list | None:
        """The converted items of record batch ``index`` when the child converted exactly these columns."""
        entry = self.entries.get(index) if index is not None else None
        digest = batch_digest(columns) if entry is not None else None
        if digest is None or digest != entry.digest:
            return None
        try:  # each blob names the columns it was converted from: a misplaced one is refused too
            held, items = pickle.loads(_pread_all(self.fd, entry.length, entry.offset))
        except Exception:  # noqa: BLE001 (the file is gone or short: convert as always)
            return None
        return items if held == digest and isinstance(items, list) and len(items) == len(columns[0]) else None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def batch_digest(columns: tuple[list, ...]) -> bytes:
    """A digest of one record batch's columns as ``to_pylist`` gives them (what conversion reads)."""
    return hashlib.blake2b(pickle.dumps(columns, protocol=pickle.HIGHEST_PROTOCOL), digest_size=16).digest()


def predicted_forbidden(directory: str | Path) -> tuple[str, ...]:
    """The forbidden tokens ``resolve`` will find in the tokenizer at ``directory`` once it is loaded,
    predicted from its files: tokenizer.json's added tokens, tokenizer_config.json's added tokens and
    special tokens, special_tokens_map.json and added_tokens.json. Sorted, as ``resolve`` holds them.
    Only a prediction: ``Ahead.usable`` compares the options it gave with the run's."""
    directory = Path(directory)
    tokens: set = set()
    entries = added_tokens_entries(directory / "tokenizer.json")
    if entries is None:
        raise ValueError("tokenizer.json's added tokens could not be read from its head")
    tokens.update(e.get("content") for e in entries)
    config = _json(directory / "tokenizer_config.json")
    decoder = config.get("added_tokens_decoder") or {}
    tokens.update(v.get("content") if isinstance(v, dict) else v for v in decoder.values())
    for source in (config, _json(directory / "special_tokens_map.json")):
        tokens.update(_special(source))
    tokens.update(_json(directory / "added_tokens.json"))
    return tuple(sorted(forbidden_among(tokens)))


def _json(path: Path) -> dict:
    if not path.exists():
        return {}
    value = json.loads(path.read_text(encoding="utf-8"))
    return value if isinstance(value, dict) else {}


def _special(config: dict) -> list:
    out = []
    values = [config.get(key) for key in _SPECIAL_KEYS]
    for key in ("additional_special_tokens", "extra_special_tokens"):
        more = config.get(key)
        values += list(more.values()) if isinstance(more, dict) else list(more or ())
    for value in values:
        out.append(value.get("content") if isinstance(value, dict) else value)
    return out


def convert_ahead(plan, fd: int, stop_fd: int) -> Ahead:
    """The child's work: convert ``plan``'s (``resolved.AheadPlan``) record batches past the parent's head
    into ``fd`` until ``stop_fd`` is readable, the records end or MAX_AHEAD_BYTES is reached."""
    sources = plan.resolved_sources(predicted_forbidden(plan.tokenizer_dir))
    jobs: list = []
    ahead = Ahead((), plan.seed)
    offset = index = seen = 0
    for kind, value in record_batches(sources, plan.batch_size, None):
        if kind == "job":
            jobs.append(value)
        if kind != "batch":
            continue
        index, seen = index + 1, seen + value.num_rows
        if seen <= plan.head_records:  # the parent converts its head itself (the probe's rows)
            continue
        if offset >= MAX_AHEAD_BYTES or _stopped(stop_fd):
            break
        columns = tuple(value.column(name).to_pylist() for name in RECORD_COLUMNS)
        job = EncodeJob(key="", tokenizer_dir="", encoder="", sources=tuple(jobs), seed=plan.seed,
                        max_length=None, length_policy="")
        items = _convert_until_stopped(columns, job, stop_fd)
        if items is None:  # stopped inside the batch: the parent is waiting, the workers convert it
            break
        digest = batch_digest(columns)
        blob = pickle.dumps((digest, items), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            _pwrite_all(fd, blob, offset)
        except OSError:  # the temporary folder is full: what is written stands
            break
        ahead.entries[index - 1] = Entry(offset, len(blob), digest)
        ahead.jobs = tuple(jobs)
        offset += len(blob)
    return ahead


# Records converted between two looks at the stop pipe: the parent waits at most this many rows'
# conversion for the child's answer, not a whole batch's (a batch of long rows takes seconds).
STOP_EVERY = 16


def _stopped(stop_fd: int) -> bool:
    return bool(select.select([stop_fd], [], [], 0)[0])


def _convert_until_stopped(columns: tuple[list, ...], job, stop_fd: int) -> list | None:
    """``convert_records(columns, job)``, STOP_EVERY records at a time (each record is converted on
    its own, so the items are the same); None when the parent says stop before the end."""
    items: list = []
    for start in range(0, len(columns[0]), STOP_EVERY):
        if start and _stopped(stop_fd):
            return None
        items += convert_records(tuple(column[start:start + STOP_EVERY] for column in columns), job)
    return items


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def _pread_all(fd: int, length: int, offset: int) -> bytes:
    parts = []
    while length:
        chunk = os.pread(fd, length, offset)
        if not chunk:
            raise EOFError("the converted batches' file is shorter than its index")
        parts.append(chunk)
        length -= len(chunk)
        offset += len(chunk)
    return b"".join(parts)
