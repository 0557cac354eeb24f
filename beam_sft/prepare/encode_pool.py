"""The encode pass of ``prepare``: record batches in, their output tables out, in record order.

One task per record batch of the records file (``records.RecordsFile``). With ``procs`` > 1 a pool
of forked workers runs the tasks: each reads its batch with plain reads, runs ``batch.process_batch``
(convert, mix, encode, length policy: the status table) and writes the table to its own Arrow IPC
file under the work folder, sending back only a ``Part`` (where the table is, how many rows). The
parent reads the parts back in record order (plain reads again) and removes each once read. No
process maps a file, and none holds more than a batch or two: memory does not depend on rows. With
``procs`` == 1 the same task function runs in this process and its table is used directly.

Workers are forked after the parent installed the warmed encoder (``batch.install_state``), so they
inherit it; ``children_die_with_me`` (armed by the caller) makes them die with the parent and leave
Ctrl-C to it. An interrupt or an error in the consumer ends the pool at once (``close()`` the
iterator, or leave the ``contextlib.closing`` block, before removing the work folder).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from beam_sft.pool import imap_then_close
from beam_sft.prepare import batch as batch_mod
from beam_sft.prepare.records import RecordsFile


@dataclass(frozen=True)
class Task:
    batch: int  # record batch index in the records file
    skip: int = 0  # records at its start that were already done (the head the parent converted)


@dataclass(frozen=True)
class Part:
    batch: int
    path: str  # the worker's output file
    rows: int  # output rows (one per copy or per reject)
    records: int  # records it encoded


def tasks_after(index: int, skip: int, num_batches: int) -> list[Task]:
    """The tasks for every record from batch ``index`` (less its first ``skip`` records) on.

    >>> tasks_after(0, 128, 3)
    [Task(batch=0, skip=128), Task(batch=1, skip=0), Task(batch=2, skip=0)]
    """
    return [Task(i, skip if i == index else 0) for i in range(index, num_batches)]


def encode_task(task: Task, job: batch_mod.EncodeJob, records: RecordsFile):
    """``(output table, records encoded)`` of one task (``batch.process_batch`` on its records)."""
    batch = records.batch(task.batch)
    return batch_mod.process_batch(batch, job=job, index=task.batch, skip=task.skip), batch.num_rows - task.skip


# Per worker process: the job, the records file (opened in the worker) and the work folder.
_WORKER: dict = {}


def _init_worker(job: batch_mod.EncodeJob, records_path: str, work: str) -> None:
    _WORKER.clear()
    try:
        records = RecordsFile(records_path)
    except FileNotFoundError:
        if not Path(work).exists():  # the run is ending (interrupted while starting its workers) and
            raise SystemExit(0) from None  # removed its staging folder: leave without a traceback
        raise
    _WORKER.update(job=job, records=records, work=Path(work), pid=os.getpid())


def _run(task: Task) -> Part:
    import pyarrow as pa

    table, records = encode_task(task, _WORKER["job"], _WORKER["records"])
    path = _WORKER["work"] / f"part-{task.batch:08d}.arrow"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return Part(task.batch, str(path), table.num_rows, records)


def read_part(part: Part):
    """The table a worker wrote (read into memory with plain reads), its file then removed."""
    import pyarrow as pa

    with pa.OSFile(part.path, "rb") as source:
        table = pa.ipc.open_file(source).read_all()
    os.unlink(part.path)
    return table


def encoded_tables(records_path: Path, tasks: list[Task], job: batch_mod.EncodeJob, procs: int,
                   work: Path) -> Iterator:
    """``(output table, records encoded)`` of each task, in task order (see the module docstring)."""
    if not tasks:
        return
    if procs <= 1:
        records = RecordsFile(records_path)
        try:
            for task in tasks:
                yield encode_task(task, job, records)
        finally:
            records.close()
        return

    # fork: the workers inherit the warmed encoder; spawn (where there is no fork) loads it again
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    pool = context.Pool(procs, initializer=_init_worker, initargs=(job, str(records_path), str(work)))
    for part in imap_then_close(pool, _run, tasks):
        yield read_part(part), part.records
