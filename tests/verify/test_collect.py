"""Verify's collection after each chunk of rows (``api.collect_after_chunk``): the young generation
after most chunks, a full pass every ``FULL_COLLECT_EVERY``, so memory stays bounded while the
survivors are not walked again after every chunk."""

from __future__ import annotations

import gc
import weakref

from beam_sft.verify import api
from beam_sft.verify.api import FULL_COLLECT_EVERY, collect_after_chunk, verify_prepared


class _Node:
    other: object = None


def test_a_cycle_through_an_older_survivor_is_freed_within_one_round():
    enabled = gc.isenabled()
    gc.disable()
    try:
        old = _Node()
        gc.collect(0)  # survives a young collection: now older than what the next chunks make
        young = _Node()
        young.other, old.other = old, young
        gone = weakref.ref(old)
        del old, young
        for done in range(1, FULL_COLLECT_EVERY):
            collect_after_chunk(done)
        assert gone() is not None  # young collections leave it (it reaches into an older survivor)
        collect_after_chunk(FULL_COLLECT_EVERY)
        assert gone() is None  # the round's full pass frees it
    finally:
        (gc.enable if enabled else gc.disable)()


def test_rows_checked_here_collect_young_and_full_in_rounds(clean_dir, monkeypatch):
    calls: list[tuple] = []
    collect = gc.collect
    monkeypatch.setattr(api.gc, "collect", lambda *generation: calls.append(generation) or collect(*generation))
    monkeypatch.setattr(api, "CHUNK_ROWS", 1)
    monkeypatch.setattr(api, "FULL_COLLECT_EVERY", 3)
    assert verify_prepared(clean_dir, num_proc=1, write=False).ok
    assert len(calls) >= 4 and calls[:4] == [(0,), (0,), (), (0,)]
