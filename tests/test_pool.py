"""beam_sft.pool.imap_then_close: results in order; the pool closed and joined at the end (its workers
exit by themselves, no signal), terminated only when the reader stops early or a task fails."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from beam_sft.pool import imap_then_close


def _square(x: int) -> int:
    return x * x


def _pid(_: int) -> int:
    return os.getpid()


def _fail(x: int) -> int:
    if x == 3:
        raise ValueError("three")
    return x


def _context():
    return multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")


def test_results_in_order_then_the_workers_exit_by_themselves():
    pool = _context().Pool(2)
    workers = multiprocessing.active_children()  # the pool's workers (the test looks at how they end)
    assert len(workers) == 2
    assert list(imap_then_close(pool, _square, range(20))) == [x * x for x in range(20)]
    assert all(w.exitcode == 0 for w in workers)  # the sentinel's exit, not SIGTERM's -15


def test_a_reader_that_stops_early_ends_the_pool():
    pool = _context().Pool(2)
    workers = multiprocessing.active_children()
    assert len(workers) == 2
    results = imap_then_close(pool, _pid, range(50))
    next(results)
    results.close()
    assert all(w.exitcode is not None for w in workers)


def test_a_failed_task_ends_the_pool_and_raises():
    pool = _context().Pool(2)
    workers = multiprocessing.active_children()
    assert len(workers) == 2
    with pytest.raises(ValueError, match="three"):
        list(imap_then_close(pool, _fail, range(6)))
    assert all(w.exitcode is not None for w in workers)
