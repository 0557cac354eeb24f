"""``verify_prepared``: check every row (or a sample) of a prepared dataset, in parallel, and report.

Rows stream in Arrow batches (flat numpy arrays per batch, see ``arrays``); worker processes each
check a run of rows and send back only their violations and a histogram-based aggregate, so memory
stays flat in rows. The folder rules (counts, duplicates, rejects.jsonl) read only the small
columns of every row.
"""

from __future__ import annotations

import contextlib
import gc
import math
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from beam_sft.dataset_folder.layout import TOKENIZER_DIR
from beam_sft.dataset_folder.load import recorded_digests
from beam_sft.dataset_folder.report_json import content_digest
from beam_sft.errors import VerificationError
from beam_sft.pool import imap_then_close
from beam_sft.timing import PhaseClock
from beam_sft.verify import caller_tokenizer
from beam_sft.verify import results as report_io
from beam_sft.verify.arrays import COLUMNS, TokenBatch
from beam_sft.verify.context import CheckEnv, RowContext, Violation, build_context
from beam_sft.verify.counts import FolderCounts
from beam_sft.verify.decode import RowText, TableDecoder
from beam_sft.verify.folder import PreparedFolder, open_prepared
from beam_sft.verify.invariants import FOLDER_RULES, RULE_CODES, RULES, SAMPLED_PARTS, check_row
from beam_sft.verify.provenance import check_provenance
from beam_sft.verify.stats import STATS_VERSION, Aggregator, row_stats
from beam_sft.visible import visible

CHUNK_ROWS = 128
# A caller that may choose (prepare) checks fewer rows than this in one process: starting a pool (fork,
# worker set-up: about 0.15 s on 2 cores) costs more than checking them (about 0.4 ms a row of real text).
MIN_POOL_ROWS = 2 * CHUNK_ROWS
MAX_KEPT_VIOLATIONS = 10_000
PARITY_SAMPLE = 32  # rows that also get the sampled rules (tokenization and prompts re-rendered)
SAMPLE_KEY = "verify_sample"  # report.json's key for a partial run that found nothing (``verify`` stays)


@dataclass(frozen=True)
class VerifyResult:
    """``ok`` is True when no row breaks any rule; ``stats`` is the report's "verify" section.

    ``violations`` holds the first MAX_KEPT_VIOLATIONS; all of them are in verify_violations.jsonl
    and counted in ``stats["violations"]``.
    """

    ok: bool
    violations: list[Violation]
    stats: dict
    directory: Path
    # The folder's result after the run: this run's when it was full or found a violation, else (a
    # clean partial run) the full result recorded before it, None when there is none.
    recorded_ok: bool | None = None
    # The environment the rows were checked with (its tokenizer is the folder's, or proven the same):
    # the report page drawn just after reuses it instead of loading DIR/tokenizer again.
    env: CheckEnv | None = field(default=None, compare=False, repr=False)


def load_tokenizer(directory: str | Path):
    """The tokenizer saved beside the dataset (DIR/tokenizer)."""
    return open_prepared(directory).tokenizer


def load_prepared_dataset(directory: str | Path):
    """The prepared dataset, checked for the columns verify needs."""
    return open_prepared(directory).dataset


def select_positions(num_rows: int, sample: int | None, seed: int = 0) -> list[int]:
    """All positions, or a reproducible random sample of ``sample`` of them, in order.

    >>> select_positions(5, None)
    [0, 1, 2, 3, 4]
    >>> len(select_positions(100, 7)), select_positions(100, 7) == select_positions(100, 7)
    (7, True)
    """
    if sample is None or sample >= num_rows:
        return list(range(num_rows))
    if sample < 1:
        raise VerificationError(f"--sample must be at least 1, got {sample}")
    return sorted(random.Random(seed).sample(range(num_rows), sample))


# --- checking batches -------------------------------------------------------------------------------------


def check_batch(batch: TokenBatch, env: CheckEnv) -> tuple[list[Violation], Aggregator]:
    """Every rule on every row of ``batch``, and the batch's statistics."""
    bad = batch.bad_id_rows(env.vocab_size, env.decoder.holes)
    safe = env.safe_ids(batch.ids) if bad else batch.ids  # rows with bad ids are not decoded
    forbidden = batch.rows_where(env.forbidden_table, safe)
    markers, letters = batch.split_by_row(env.marker_table, safe, env.markers.letter_of)
    runs = batch.mask_runs_by_row()
    trained, binary = batch.row_counts()
    data = offsets = None
    if isinstance(env.decoder, TableDecoder):
        data, offsets = env.decoder.gather(safe)
    violations: list[Violation] = []
    totals = Aggregator()
    for k, position in enumerate(batch.positions):
        ids, mask, columns = batch.row(k)
        text = RowText(env.decoder, ids, data, offsets, int(batch.id_offsets[k]))
        ctx = build_context(position, ids, mask, columns, env, text, bad.get(k, ()), forbidden.get(k, ()),
                            markers[k], runs[k], letters[k], (trained[k], binary[k]))
        violations.extend(check_row(ctx, env))
        totals.add(row_stats(ctx))
    return violations, totals


def check_records(records: Iterable[tuple[int, dict]], env: CheckEnv) -> tuple[list[Violation], Aggregator]:
    """Every rule on rows given as (position, dict of columns), through the same path as a dataset."""
    violations: list[Violation] = []
    totals = Aggregator()
    chunk: list[tuple[int, dict]] = []

    def flush() -> None:
        found, counted = check_batch(TokenBatch.from_records([r for _, r in chunk], [p for p, _ in chunk]), env)
        violations.extend(found)
        totals.merge(counted)
        chunk.clear()

    for item in records:
        chunk.append(item)
        if len(chunk) >= CHUNK_ROWS:
            flush()
    if chunk:
        flush()
    return violations, totals


# Worker processes get the dataset and the environment once: inherited on fork, loaded on spawn.
_WORKER: dict = {}


def _init_worker(directory: str, max_length: int | None, sampled: frozenset[int]) -> None:
    gc.disable()  # collected once a chunk instead (collect_after_chunk, _collect_per_chunk)
    if "env" not in _WORKER:  # spawned, or forked by the pool to replace a worker after the run
        try:        # cleared what the first ones inherited: build it from the folder
            folder = open_prepared(directory)
            env = CheckEnv.create(folder.tokenizer, max_length=max_length)
            env.sampled = sampled
            rows = _Rows(Path(directory))
        except Exception:
            if not Path(directory).exists():  # the run is ending (interrupted while its workers start)
                raise SystemExit(0) from None  # and removed its staging folder: leave without a traceback
            raise
        _WORKER.update(rows=rows, env=env)
    gc.freeze()


class _Rows:
    """The dataset's rows by position, only the columns the checks read, each record batch read with
    plain reads when needed (``dataset_folder.arrow_dataset.RowReader``): the Arrow files are never
    memory-mapped here, so a process's RSS does not grow with the rows it checked (every page of a
    mapping a process has read would stay in its resident set until the mapping went)."""

    def __init__(self, directory: Path, reader=None):
        from beam_sft.dataset_folder.arrow_dataset import RowReader

        # (the opened folder's reader where there is one: its index of the batches is built already)
        self.reader = reader if reader is not None else RowReader(directory)
        self.columns = [c for c in COLUMNS if c in self.reader.schema.names]

    def table(self, chunk: range | list[int]):
        if isinstance(chunk, range):
            table = self.reader.slice(chunk.start, chunk.stop)
        else:
            table = self.reader.take(list(chunk))
        return table.select(self.columns)


FULL_COLLECT_EVERY = 16  # chunks; the others collect the young generation only (``collect_after_chunk``)


def collect_after_chunk(done: int) -> None:
    """The collection after the ``done``-th chunk: a row's garbage cycles (render contexts) are made
    and die within its chunk, so collecting the objects made since the last collection (generation
    0) frees them; survivors move up and are not walked again after every chunk, which a full pass
    did (7% of a worker's CPU on real text). Every FULL_COLLECT_EVERY chunks a full pass takes any
    cycle that reached into older survivors: memory still does not grow with rows."""
    gc.collect() if done % FULL_COLLECT_EVERY == 0 else gc.collect(0)


def _check_chunk(chunk: range | list[int]) -> tuple[list[Violation], Aggregator]:
    try:
        return check_batch(TokenBatch.from_table(_WORKER["rows"].table(chunk), chunk), _WORKER["env"])
    finally:
        _WORKER["chunks"] = _WORKER.get("chunks", 0) + 1
        collect_after_chunk(_WORKER["chunks"])


@contextlib.contextmanager
def _collect_per_chunk():
    """While rows are checked in this process: what was alive before frozen out of the collector's
    sight, automatic collection off, and one collection after each chunk instead (the caller's).

    A row leaves some eighty objects in reference cycles (the template's render contexts), so
    collections cannot stop; but the automatic ones, every few hundred allocations, and their full
    passes over the whole heap (a loaded tokenizer and whatever the caller holds) cost several per
    cent of the checks, and a forked worker's would also copy every page of the heap it inherited.
    Each chunk's collection walks only what was made since the freeze. Restored on exit.
    (tests/verify/test_api.py: the caller's collector state after a run.)"""
    enabled = gc.isenabled()
    # A caller that froze objects itself keeps exactly those frozen (unfreeze would thaw them too).
    freeze = gc.get_freeze_count() == 0
    gc.disable()
    if freeze:
        gc.freeze()
    try:
        yield
    finally:
        if freeze:
            gc.unfreeze()
        if enabled:
            gc.enable()


def _columns(dataset) -> list[str]:
    return [c for c in COLUMNS if c in dataset.column_names]


def _chunks(positions: Sequence[int], size: int) -> list[range | list[int]]:
    if isinstance(positions, range):
        return [range(i, min(i + size, positions.stop)) for i in range(positions.start, positions.stop, size)]
    return [list(positions[i:i + size]) for i in range(0, len(positions), size)]


def _iter_checks(folder: PreparedFolder, positions: Sequence[int], num_proc: int,
                 env: CheckEnv) -> Iterator[tuple[list[Violation], Aggregator]]:
    """(violations, statistics) chunk by chunk, in row order, from this process or a pool."""
    if num_proc <= 1 or len(positions) < 2:
        rows = _Rows(folder.directory, folder.dataset.reader)
        with _collect_per_chunk():
            for done, chunk in enumerate(_chunks(positions, CHUNK_ROWS), 1):
                found = check_batch(TokenBatch.from_table(rows.table(chunk), chunk), env)
                collect_after_chunk(done)
                yield found
        return
    import multiprocessing

    size = max(1, min(CHUNK_ROWS, math.ceil(len(positions) / (num_proc * 8))))
    # fork starts workers in milliseconds with the dataset and the environment (byte table included)
    # already built; spawn builds them again in each worker.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    if method == "fork":
        _WORKER.update(rows=_Rows(folder.directory, folder.dataset.reader), env=env)
    try:
        context = multiprocessing.get_context(method)
        with _collect_per_chunk():  # forked while frozen: a worker's collections skip what it inherited
            pool = context.Pool(num_proc, initializer=_init_worker,
                                initargs=(str(folder.directory), env.max_length, env.sampled))
        yield from imap_then_close(pool, _check_chunk, _chunks(positions, size))
    finally:
        _WORKER.clear()


def pool_procs(num_proc: int, rows: int, min_rows: int = MIN_POOL_ROWS) -> int:
    """The processes worth starting to check ``rows`` rows with up to ``num_proc`` of them: never more
    than the rows, so every worker gets a chunk (``_iter_checks`` cuts at least one per process).

    >>> pool_procs(2, 10), pool_procs(2, MIN_POOL_ROWS), pool_procs(0, 10_000), pool_procs(2, 10, min_rows=0)
    (1, 2, 1, 2)
    >>> pool_procs(99_999, 6, min_rows=0)
    6
    """
    return max(1, min(num_proc, rows)) if rows >= min_rows else 1


def configured_max_length(report: dict) -> int | None:
    """max_length from report.json's length policy, when prepare recorded one.

    >>> configured_max_length({"length_policy": {"max_length": 2048}})
    2048
    """
    policy = report.get("length_policy")
    value = policy.get("max_length") if isinstance(policy, dict) else None
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _folder_counts(folder: PreparedFolder) -> FolderCounts:
    counts = FolderCounts()
    small = [c for c in ("source", "row_index", "num_tokens", "num_trained") if c in folder.dataset.column_names]
    position = 0
    from beam_sft.dataset_folder.arrow_dataset import small_columns

    for table in small_columns(folder.directory, small):  # (no data file stays mapped)
        counts.add_table(table, position)
        position += table.num_rows
    return counts


def _tokenizer_for(folder: PreparedFolder, tokenizer, files: Mapping[str, str] | None) -> tuple[object, dict]:
    """The tokenizer to check with, and where it came from (the report's ``tokenizer`` entry)."""
    if tokenizer is None:
        return folder.tokenizer, {"from": "folder"}
    found = caller_tokenizer.differences(tokenizer, folder.directory / TOKENIZER_DIR, files)
    if found:
        return folder.tokenizer, {"from": "folder", "caller_differs": found}
    return tokenizer, {"from": "caller"}


def verify_prepared(directory: str | Path, *, num_proc: int = 1, sample: int | None = None, seed: int = 0,
                    max_length: int | None = None, write: bool = True, histogram: bool = True,
                    parity_sample: int = PARITY_SAMPLE, tokenizer=None,
                    tokenizer_files: Mapping[str, str] | None = None, pool_min_rows: int = 0,
                    env: CheckEnv | None = None) -> VerifyResult:
    """Check every row of a prepared dataset (or ``sample`` rows) against every rule, the folder's
    files against the digests report.json records and its seal (``provenance``), and every count of
    the report against the rows and rejects (``counts``).

    Writes report.json's "verify" section (other sections kept), DIR/verify_violations.jsonl and
    DIR/report_lengths.png unless ``write``/``histogram`` are False. ``max_length`` defaults to the
    one report.json's length policy records. ``parity_sample`` rows (seeded) also get the sampled
    rules. Works on a staging folder as well as a published one.

    Only a *full* run (every row, the recorded max_length, a parity sample) records its result as
    the "verify" section, with ``full: true`` and the digests it checked (``verified_files``,
    ``verified_report``): what train requires. A partial run that finds a violation records it
    there (a downgrade); one that finds none is written as ``verify_sample`` and leaves "verify"
    and verify_violations.jsonl as they were, so a sample never turns a failure into a pass.
    Nothing is written into report.json when it is missing or its seal does not hold.

    ``tokenizer``: the tokenizer object the caller already holds (prepare's), used instead of loading
    DIR/tokenizer again once ``caller_tokenizer.differences`` proves it is that one (same file bytes;
    template, added and special tokens, backend parts unchanged since loading). ``tokenizer_files``:
    ``{file name: sha256}`` of the files the caller loaded it from (``caller_tokenizer.tokenizer_files``),
    else they are read from its ``name_or_path``. When anything differs DIR/tokenizer is loaded as
    without it, and the section's ``tokenizer`` entry says why.

    ``pool_min_rows``: with fewer rows to check than this, one process checks them, whatever
    ``num_proc`` asks (prepare passes ``MIN_POOL_ROWS``); 0, the default, honours ``num_proc``.

    ``env``: a ``CheckEnv`` the caller made from ``tokenizer`` (prepare makes it while its encode
    workers run), used only when that tokenizer is the one the rows are checked with (proven as
    above) and for the same ``max_length``; otherwise one is made here.
    """
    directory = Path(directory)
    if not directory.is_dir():  # a mistyped path is that, not a folder whose report.json is missing
        raise VerificationError(visible(f"{directory}: " + ("not a folder (give the folder prepare wrote)"
                                                            if directory.exists() else "no such folder"),
                                        newlines=False))
    provenance, writable = check_provenance(directory)  # before anything reads the files it names
    try:
        return _verify_folder(directory, provenance, writable, num_proc=num_proc, sample=sample, seed=seed,
                              max_length=max_length, write=write, histogram=histogram, parity_sample=parity_sample,
                              tokenizer=tokenizer, tokenizer_files=tokenizer_files, pool_min_rows=pool_min_rows,
                              env=env)
    except Exception as exc:
        if not provenance:
            raise
        # A changed file can break its reader in any way (a tokenizer that does not parse, Arrow that
        # does not decode): the one line names the file, and what reading it then did.
        first = provenance[0]
        raise VerificationError(visible(f"{directory}: [{first.rule}] {first.message} (and so: {exc})",
                                        newlines=False)) from exc  # (file names come from report.json)


def _verify_folder(directory: Path, provenance: list[Violation], writable: bool, *, num_proc: int,
                   sample: int | None, seed: int, max_length: int | None, write: bool, histogram: bool,
                   parity_sample: int, tokenizer, tokenizer_files: Mapping[str, str] | None,
                   pool_min_rows: int = 0, env: CheckEnv | None = None) -> VerifyResult:
    clock = PhaseClock()  # beam_sft/timing.py
    phases = clock.phases
    phase = clock.phase

    folder = open_prepared(directory)
    report = folder.report
    recorded_max_length = configured_max_length(report)
    max_length = max_length if max_length is not None else recorded_max_length
    tokenizer, tokenizer_source = _tokenizer_for(folder, tokenizer, tokenizer_files)
    phase("load")
    if env is None or env.tokenizer is not tokenizer or env.max_length != max_length:
        env = CheckEnv.create(tokenizer, max_length=max_length)
    phase("start")
    num_rows = len(folder.dataset)
    positions: Sequence[int] = range(num_rows) if sample is None or sample >= num_rows else \
        select_positions(num_rows, sample, seed)
    if parity_sample < 0:
        raise VerificationError(f"--parity-sample must be at least 0, got {parity_sample}")
    picks = select_positions(len(positions), max(1, min(parity_sample, len(positions))), seed + 1)
    env.sampled = frozenset(positions[i] for i in picks) if parity_sample > 0 else frozenset()
    # Only a run over every row, with the recorded max_length and the parity sample on, may record a
    # pass: one that checked less reports its own result but never clears a recorded failure.
    full = len(positions) == num_rows and max_length == recorded_max_length and parity_sample > 0
    num_proc = pool_procs(num_proc, len(positions), pool_min_rows)
    totals = Aggregator()
    by_rule: Counter = Counter()
    rows_with: set[int] = set()
    kept: list[Violation] = []

    def record(violation: Violation, out) -> None:
        by_rule[violation.rule] += 1
        if violation.row is not None:
            rows_with.add(violation.row)
        out.write(violation)
        if len(kept) < MAX_KEPT_VIOLATIONS:
            kept.append(violation)

    # Violations stream to the file, so a dataset broken on every row does not fill memory.
    # closing(): an exception here (an interrupt) must end the pool now, before the caller removes
    # the folder its workers read; a suspended generator would keep them running until collected.
    with report_io.ViolationWriter(directory if write else None) as out, \
            contextlib.closing(_iter_checks(folder, positions, num_proc, env)) as checks:
        for found, counted in checks:
            for violation in found:
                record(violation, out)
            totals.merge(counted)
        phase("rows")
        folder_found, rejections = _folder_counts(folder).check(report, folder.rejects)
        for violation in [*provenance, *folder_found]:
            record(violation, out)
        phase("folder")
        out.discard = not full and not by_rule  # a clean partial run keeps the full run's file
    total = sum(by_rule.values())
    section = {
        "version": STATS_VERSION,
        "ok": total == 0,
        "full": full,
        "rows": num_rows,
        "sample": None if len(positions) == num_rows else sample,
        "verified_files": recorded_digests(report) if not provenance else None,
        "verified_report": content_digest(report) if not provenance else None,
        **totals.result(),
        "max_length": max_length,
        "rejections": rejections,
        "violations": {"total": total, "rows": len(rows_with),
                       "by_rule": {code: by_rule[code] for code in RULE_CODES if by_rule[code]}},
        "coverage": {
            "every_row": [code for code in RULES if code not in ("template_parity",)],
            "sampled": {"rows": len(env.sampled), "of": len(positions),
                        "parts": {code: SAMPLED_PARTS[code] for code in RULES if code in SAMPLED_PARTS}},
            "folder": list(FOLDER_RULES),
        },
        "tokenizer": tokenizer_source,
        "parser": env.parser_name,
        "decoder": env.decoder.name,
        "timing": {"seconds": 0.0, "phases": phases, "num_proc": max(1, num_proc)},
    }
    if write and histogram and totals.rows and (full or total):
        report_io.write_histogram(directory, totals.lengths, totals.fractions)
        phase("histogram")
    # Everything but writing the section itself (the one thing that cannot time itself).
    section["timing"]["seconds"] = round(clock.elapsed(), 3)
    recorded = report.get("verify") if isinstance(report.get("verify"), dict) else None
    if write and writable:
        if full or total:  # a partial run may only downgrade: it found a violation
            report_io.merge_verify_section(directory, section)
        else:  # reported as the sample it was; the recorded result stays
            report_io.merge_verify_section(directory, section, key=SAMPLE_KEY)
    if full or total:
        recorded_ok = total == 0
    else:
        recorded_ok = None if recorded is None else recorded.get("ok") is True and recorded.get("full") is True
    return VerifyResult(total == 0, kept, section, directory, recorded_ok=recorded_ok, env=env)


# --- one row, for inspect ---------------------------------------------------------------------------------


def load_row(directory: str | Path, position: int) -> tuple[RowContext, CheckEnv]:
    """(RowContext, CheckEnv) for the row at ``position``, for inspection (reads that row only)."""
    contexts, env = load_rows(directory, [position])
    return contexts[0], env


class _NoRenderer:
    """For views that only draw rows: the chat template is never compiled (a third of a second a
    folder), and a rule that would render says so instead of passing."""

    def render(self, *args, **kwargs):
        raise RuntimeError("this CheckEnv was made to draw rows, not to check them (load_rows(check=False))")


def load_rows(directory: str | Path, positions: Sequence[int], *, check: bool = True,
              env: CheckEnv | None = None) -> tuple[list[RowContext], CheckEnv]:
    """A RowContext for each row at ``positions`` and the one CheckEnv they share (reads those rows only).
    ``check=False``: the env can decode and draw the rows but not run ``check_row`` on them.
    ``env``: one already built for this folder's tokenizer (``VerifyResult.env``), so that neither the
    tokenizer is loaded again (seconds for a 200k vocabulary) nor the byte table rebuilt."""
    folder = open_prepared(directory)
    for position in positions:
        if not 0 <= position < len(folder.dataset):
            raise VerificationError(f"row {position} is out of range: the dataset has {len(folder.dataset)} rows")
    if env is None:
        env = CheckEnv.create(folder.tokenizer, max_length=configured_max_length(folder.report),
                              renderer=None if check else _NoRenderer())
    env = replace(env, sampled=frozenset(positions))  # (a copy: the caller's env keeps its own sample)
    contexts = []
    for position in positions:
        batch = TokenBatch.from_table(folder.dataset.rows(position, position + 1, _columns(folder.dataset)), [position])
        bad = batch.bad_id_rows(env.vocab_size, env.decoder.holes)
        forbidden = batch.rows_where(env.forbidden_table, env.safe_ids(batch.ids))
        ids, mask, columns = batch.row(0)
        text = RowText(env.decoder, env.safe_ids(ids))
        contexts.append(build_context(position, ids, mask, columns, env, text, bad.get(0, ()), forbidden.get(0, ())))
    return contexts, env


def row_view(ctx: RowContext, env: CheckEnv) -> tuple[list[str], list[str]]:
    """(token texts, vocabulary strings) of one row, as ``inspect`` shows it. Ids outside the vocabulary
    are shown as ``⟨bad id N⟩``, never decoded."""
    from beam_sft.verify.tokens import token_texts

    safe = env.safe_ids(ctx.ids)
    # (env.decode on ids already safe; by the byte table's pieces where there is one: same text)
    decode = env.decoder.piece_decoder(safe) if isinstance(env.decoder, TableDecoder) else env.decode
    texts = token_texts(safe, decode)
    raw = env.tokenizer.convert_ids_to_tokens(safe.tolist())
    for i in ctx.bad_ids:
        texts[i] = raw[i] = f"⟨bad id {int(ctx.ids[i])}⟩"
    return texts, raw


def inspect_row(directory: str | Path, position: int, *, color: bool = True,
                html: bool = False) -> tuple[str, str | None]:
    """The terminal view of one row, and its HTML page when ``html``. Ids outside the vocabulary are
    shown as ``⟨bad id N⟩`` (and reported), never decoded."""
    from beam_sft.verify.view_terminal import render_terminal

    ctx, env = load_row(directory, position)
    violations = check_row(ctx, env)
    texts, raw = row_view(ctx, env)
    page = None
    if html:
        from beam_sft.verify.view_html import render_html

        page = render_html(ctx, texts, raw, violations)
    return render_terminal(ctx, texts, color=color, violations=violations), page
