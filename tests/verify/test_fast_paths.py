"""The batch-wide and well-formed-row fast paths of verify give exactly what the general code gives.

- ``TokenBatch.mask_runs_by_row`` (all rows' mask runs at once) is ``mask_runs`` of each row.
- ``parse_aligned_messages`` (a well-formed row read from its text cut at the markers) returns the
  messages ``parse_messages`` finds, bodies included, exactly when ``parse_messages`` finds no
  problem; on any other row it returns None, so the general reader names the problem.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_sft.harmony.spans import mask_runs, split_markers
from beam_sft.verify.arrays import TokenBatch
from beam_sft.verify.context import CheckEnv
from beam_sft.verify.decode import RowText
from beam_sft.verify.spans import MarkerIds, parse_aligned_messages, parse_messages


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0, 0, 1, 1, 2]), max_size=12), min_size=1, max_size=6))
def test_batch_mask_runs_are_each_rows_mask_runs(masks):
    records = [{"input_ids": [5] * len(m), "assistant_masks": m} for m in masks]
    batch = TokenBatch.from_records(records, range(len(records)))
    assert batch.mask_runs_by_row() == [mask_runs(m) for m in masks]
    trained, binary = batch.row_counts()
    assert trained == [sum(1 for v in m if v) for m in masks]
    assert binary == [all(v in (0, 1) for v in m) for m in masks]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.sampled_from([5, 5, 7, 9]), max_size=10), min_size=1, max_size=5))
def test_batch_marker_letters_are_each_rows(rows):
    records = [{"input_ids": r, "assistant_masks": [0] * len(r)} for r in rows]
    batch = TokenBatch.from_records(records, range(len(records)))
    table = np.zeros(10, dtype=bool)
    table[[7, 9]] = True
    positions, letters = batch.split_by_row(table, batch.ids, lambda ids: "".join("a" if i == 7 else "b" for i in ids))
    assert positions == [[i for i, t in enumerate(r) if t in (7, 9)] for r in rows]
    assert positions == batch.split_by_row(table, batch.ids)
    assert letters == ["".join("a" if t == 7 else "b" for t in r if t in (7, 9)) for r in rows]


def _both(ids: np.ndarray, env: CheckEnv):
    where = np.flatnonzero(np.isin(ids, env.markers.array)).tolist()
    text = RowText(env.decoder, ids)
    parts = split_markers(text.full)
    aligned = len(parts) == 2 * len(where) + 1
    if aligned:
        text.align(parts, where)
    general = parse_messages(ids, env.markers, text.text, where)
    fast = parse_aligned_messages(ids, env.markers, where, parts) if aligned else None
    return general, fast, aligned


def _same(general, fast) -> None:
    messages, problems = general
    if problems:
        assert fast is None
        return
    assert fast is not None
    assert fast == messages
    assert [m.body for m in fast] == [m.body for m in messages]
    # role and part are set when the fast reader builds a message: the properties' own answers
    assert [(m.role, m.part) for m in fast] == [(type(m).role.func(m), type(m).part.func(m)) for m in messages]


def test_clean_rows_take_the_fast_path(clean_records, tokenizer):
    env = CheckEnv.create(tokenizer)
    for record in clean_records:
        general, fast, aligned = _both(np.asarray(record["input_ids"], dtype=np.int64), env)
        assert aligned and general[1] == [] and fast is not None
        _same(general, fast)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_marker_edit_reads_the_same_both_ways(data, clean_records, tokenizer):
    env = _ENV.setdefault("env", CheckEnv.create(tokenizer))
    record = data.draw(st.sampled_from(clean_records))
    ids = list(record["input_ids"])
    markers = sorted(env.markers.all)
    for _ in range(data.draw(st.integers(1, 3))):
        where = [i for i, t in enumerate(ids) if t in env.markers.all]
        action = data.draw(st.sampled_from(["drop", "insert", "replace", "drop_text"]))
        if action == "drop" and where:
            del ids[data.draw(st.sampled_from(where))]
        elif action == "insert":
            ids.insert(data.draw(st.integers(0, len(ids))), data.draw(st.sampled_from(markers)))
        elif action == "replace" and where:
            ids[data.draw(st.sampled_from(where))] = data.draw(st.sampled_from(markers))
        elif action == "drop_text":
            plain = [i for i, t in enumerate(ids) if t not in env.markers.all]
            if plain:
                del ids[data.draw(st.sampled_from(plain))]
    general, fast, aligned = _both(np.asarray(ids, dtype=np.int64), env)
    if aligned:
        _same(general, fast)


_ENV: dict = {}


def test_letters_name_every_marker(tokenizer):
    marker_ids = MarkerIds.from_tokenizer(tokenizer)
    ids = np.array([marker_ids.start, marker_ids.message, marker_ids.channel, marker_ids.constrain, marker_ids.end,
                    marker_ids.call, marker_ids.ret], dtype=np.int64)
    assert marker_ids.letter_of(ids) == "SMCKELR"
    try:
        marker_ids.letter_of(np.array([marker_ids.start + 100_000], dtype=np.int64))
    except ValueError:
        pass
    else:
        raise AssertionError("a non-marker id must not get a letter")


def test_the_decoder_probe_sees_one_wrong_byte_anywhere(tokenizer):
    """The start-up proof of the byte table (one gather, one decode_batch) still compares every id."""
    import copy

    from beam_sft.verify.decode import TableDecoder, _probe

    size = len(tokenizer)
    table = TableDecoder.build(tokenizer, size)
    assert _probe(table, tokenizer, size) is None
    for token in (0, size // 2, size - 1):
        broken = copy.copy(table)
        broken.blob = table.blob.copy()
        broken.blob[table.starts[token]] ^= 0x01  # one bit of one token's bytes
        assert _probe(broken, tokenizer, size) is not None, token
        short = copy.copy(table)
        short.lengths = table.lengths.copy()
        short.lengths[token] = 0
        assert _probe(short, tokenizer, size) is not None, token


def test_row_turn_lookup_is_the_general_one(clean_records, tokenizer):
    from beam_sft.verify.api import check_batch
    from beam_sft.verify.context import build_context
    from beam_sft.verify.spans import turn_at

    env = CheckEnv.create(tokenizer)
    batch = TokenBatch.from_records(clean_records, range(len(clean_records)))
    assert check_batch(batch, env)[0] == []
    for k in range(len(batch)):
        ids, mask, columns = batch.row(k)
        ctx = build_context(k, ids, mask, columns, env, RowText(env.decoder, ids))
        assert ctx.turns
        assert [ctx.turn_at(i) for i in range(-1, len(ids) + 1)] == [turn_at(ctx.turns, i)
                                                                       for i in range(-1, len(ids) + 1)]


def test_quick_message_is_the_dataclass():
    import dataclasses

    from beam_sft.verify.spans import Message

    values = (0, 2, 5, "<|end|>", "get_weather", "assistant", "analysis", 1, "body")
    quick, plain = Message.quick(*values), Message(*values)
    assert quick == plain and quick.body == plain.body and hash(quick) == hash(plain)
    assert dataclasses.astuple(quick) == dataclasses.astuple(plain) == values  # every field set, in order
    for header in (("assistant", None, "analysis"), ("assistant", "f", "analysis"), ("assistant", None, None),
                   ("f", "assistant", None), ("user", None, None), ("x", None, "final")):
        quick = Message.quick(0, 2, 5, "<|end|>", *header, 1, "")
        assert (quick.role, quick.part) == (Message(0, 2, 5, "<|end|>", *header, 1).role,
                                            Message(0, 2, 5, "<|end|>", *header, 1).part), header
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick.start = 1


@settings(max_examples=300, deadline=None)
@given(st.text("ab<|>", max_size=12), st.text("ab<|>", max_size=12), st.text("abc", max_size=12))
def test_inserted_block_finds_any_one_insertion(left, right, block):
    from beam_sft.verify.invariants import _common_prefix, inserted_block

    a, b = left + right, left + block + right
    naive = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    assert _common_prefix(a, b) == naive
    found = inserted_block(b, a)
    assert found is not None
    start, end = found
    assert end - start == len(block) and b[:start] + b[end:] == a
    other = inserted_block(left + "Z" + right, a + "Y")
    assert other is None or (left + "Z" + right)[:other[0]] + (left + "Z" + right)[other[1]:] == a + "Y"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_spans_are_turns_only_when_the_span_rules_hold(data, clean_records, tokenizer):
    """``RowContext.spans_are_turns`` (the clean row's shortcut past span_count/start/end and
    trained_context) is never true on a row where one of those rules, run in full, finds something."""
    import copy

    from beam_sft.verify import invariants as inv
    from beam_sft.verify.api import check_records

    env = _ENV.setdefault("env", CheckEnv.create(tokenizer))
    record = copy.deepcopy(data.draw(st.sampled_from(clean_records)))
    mask = record["assistant_masks"]
    for _ in range(data.draw(st.integers(0, 3))):
        i = data.draw(st.integers(0, len(mask) - 1))
        mask[i] = 1 - mask[i]
    record["num_trained"] = sum(mask)
    batch = TokenBatch.from_records([record], [0])
    ids, row_mask, columns = batch.row(0)
    from beam_sft.verify.context import build_context

    ctx = build_context(0, ids, row_mask, columns, env, RowText(env.decoder, ids))
    shortcut = ctx.spans_are_turns
    assert ctx.message_trained == ctx._trained_between([(m.start, m.end + 1) for m in ctx.messages])
    fast = inv._aligned_spans(ctx)
    ctx.__dict__["spans_are_turns"] = False
    assert fast == inv._aligned_spans(ctx)  # the spans read against the turns one by one
    ctx.__dict__["spans_are_turns"] = shortcut
    codes = ("span_count", "span_start", "span_end", "trained_context")
    full = [v for code in codes for v in _without_shortcut(inv, code, ctx, env)]
    if shortcut:
        assert full == []
    found = {v.rule for v in check_records([(0, record)], env)[0]}
    assert {v.rule for v in full} == found & set(codes)


def _without_shortcut(inv, code, ctx, env):
    saved = ctx.spans_are_turns
    ctx.__dict__["spans_are_turns"] = False  # run the rule in full
    try:
        return inv.RULES[code](ctx, env)
    finally:
        ctx.__dict__["spans_are_turns"] = saved


class _HoledBackend:
    """The fixture's backend with no token for id ``hole`` (as a vocabulary with a gap in its ids)."""

    def __init__(self, backend, hole: int):
        self._backend, self._hole = backend, hole

    def id_to_token(self, i):
        return None if i == self._hole else self._backend.id_to_token(i)

    def __getattr__(self, name):
        return getattr(self._backend, name)


def test_the_byte_table_leaves_holes_out(tokenizer):
    """An id with no token is a hole (bad_token_id's): no bytes in the table, and the start-up probe,
    first drawn as if there were none, is drawn again around it and still proves the rest."""
    import types

    from beam_sft.verify.decode import TableDecoder, _probe_sequences, build_decoder, vocab_tokens

    size, hole = len(tokenizer), 7
    tokens = vocab_tokens(tokenizer, size)
    assert None not in tokens and len(tokens) == size
    shim = types.SimpleNamespace(backend_tokenizer=_HoledBackend(tokenizer.backend_tokenizer, hole))
    decoder, note = build_decoder(shim, size)
    assert note is None and isinstance(decoder, TableDecoder) and decoder.holes == {hole}
    assert decoder.lengths[hole] == 0
    whole = TableDecoder.from_tokens(tokens)
    others = np.array([i for i in range(size) if i != hole], dtype=np.int64)
    assert decoder.gather(others)[0].tobytes() == whole.gather(others)[0].tobytes()
    assert all(hole not in seq for seq in _probe_sequences(decoder.holes, size))
    assert any(hole in seq for seq in _probe_sequences(frozenset(), size))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_byte_table_gather_is_each_tokens_bytes_end_to_end(data, tokenizer):
    """``TableDecoder.gather`` (one cumulative sum, or np.repeat when a token has no bytes) gives
    every token's bytes in order and their offsets, as a per-token concatenation would."""
    from beam_sft.verify.decode import TableDecoder

    table = _ENV.setdefault("table", TableDecoder.build(tokenizer, len(tokenizer)))
    if data.draw(st.booleans()):  # a table with empty tokens (the other branch)
        table = TableDecoder(table.blob, table.starts, table.lengths.copy(), table.holes)
        table.lengths[data.draw(st.lists(st.integers(0, len(tokenizer) - 1), min_size=1, max_size=5))] = 0
    ids = np.array(data.draw(st.lists(st.integers(0, len(tokenizer) - 1), max_size=40)), dtype=np.int64)
    got, offsets = table.gather(ids)
    pieces = [table.blob[table.starts[i]:table.starts[i] + table.lengths[i]].tobytes() for i in ids.tolist()]
    assert got.tobytes() == b"".join(pieces)
    assert offsets.tolist() == [sum(map(len, pieces[:k])) for k in range(len(pieces) + 1)]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_piece_decoder_decodes_as_the_byte_table(data, tokenizer):
    """The token-by-token views decode short runs by ``TableDecoder.piece_decoder`` (each token's
    bytes taken once): the same text as ``decode`` on every run, cut characters (U+FFFD) included,
    and so the same ``token_texts``."""
    from beam_sft.verify.decode import TableDecoder
    from beam_sft.verify.tokens import token_texts

    table = _ENV.setdefault("table", TableDecoder.build(tokenizer, len(tokenizer)))
    text = data.draw(st.text(alphabet=st.sampled_from("ab é中😀\n<|>"), max_size=30))
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    ids += data.draw(st.lists(st.integers(0, len(tokenizer) - 1), max_size=8))  # any ids, cut bytes too
    decode = table.piece_decoder(ids)
    for start in range(len(ids)):
        run = ids[start:start + data.draw(st.integers(0, 12))]
        assert decode(run) == table.decode(run)
    assert token_texts(ids, decode) == token_texts(ids, table.decode)
