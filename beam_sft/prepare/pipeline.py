"""``prepare(config) -> Path``: sources in, a prepared dataset directory out (see the README's "Pipeline" section).

1. Fingerprint the inputs; a complete folder with the same fingerprint, whose files are still what
   its report recorded, is reused as it is.
2. Read this shard's raw records into one Arrow file (``records.py``, the only serial step).
3. Convert the first records in this process; their rows feed the encoder choice (the start-up
   probe, ``beam_sft.encode.select``), and are then encoded here, so no row is converted twice.
4. One pass over the rest with ``num_proc`` forked workers (``encode_pool.py``, ``batch.py``):
   convert, mix, encode, length policy; every record comes back as a row with a status. A batch
   ``head_start``'s child converted while the tokenizer loaded is read back instead of converted,
   where it is proven the same (``convert_ahead.py``).
5. As the output tables come back, in record order: count the statuses, write rejects.jsonl, and
   write the ``kept`` rows to the dataset in batches (``dataset_folder.arrow_dataset``); then the report
   (with the files' digests) into the staging folder. Memory does not depend on rows: no file is
   memory-mapped and no process holds more than a few batches.
6. Verify the staging folder (``beam_sft.verify.verify_prepared``) and publish it (one atomic
   rename) only when every row passes. A failed verification publishes and caches nothing: the
   folder is kept aside, as ``.NAME.failed-verification``, with its verify_violations.jsonl, and
   marked (report.json ``kept_aside``) so that train refuses it wherever it is pointed at.
   Either way the folder gets its report page (``report.html``, ``beam_sft.verify.report_html``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from beam_sft.data import fingerprint as fp
from beam_sft.data.rejects import sources_table  # convert's table: one renderer
from beam_sft.dataset_folder import output
from beam_sft.dataset_folder import report_json as rep
from beam_sft.dataset_folder.arrow_dataset import DatasetWriter
from beam_sft.dataset_folder.integrity import check_integrity, file_digests
from beam_sft.dataset_folder.layout import REJECTS_FILE, TOKENIZER_DIR
from beam_sft.dataset_folder.load import KEPT_ASIDE_KEY, check_counts, check_verified
from beam_sft.dataset_folder.lock import clear_stale_lock, output_lock
from beam_sft.dataset_folder.tokenizer import load_tokenizer, save_tokenizer
from beam_sft.encode import select
from beam_sft.encode.length import char_bound
from beam_sft.errors import ConfigError, NothingKept, PreparedError, VerificationError
from beam_sft.prepare import batch as batch_mod
from beam_sft.prepare import cache, records
from beam_sft.prepare.children import children_die_with_me
from beam_sft.prepare.config import PrepareConfig
from beam_sft.prepare.encode_pool import encoded_tables, tasks_after
from beam_sft.prepare.head_start import HeadStart, head_start
from beam_sft.prepare.progress import Counter, bar, heartbeat
from beam_sft.prepare.resolved import ResolvedPrepare, ahead_plan, resolve
from beam_sft.timing import PhaseClock, timed
from beam_sft.verify import verify_prepared
from beam_sft.verify.api import MIN_POOL_ROWS
from beam_sft.verify.caller_tokenizer import tokenizer_files
from beam_sft.verify.context import CheckEnv

logger = logging.getLogger("beam_sft.prepare")

PROBE_SAMPLE = 32
HEAD_RECORDS = 4 * PROBE_SAMPLE  # converted in this process: enough for PROBE_SAMPLE rows, mostly
# Rows longer than this (as read) stay out of the probe sample: the probe encodes each twice.
PROBE_MAX_CHARS = 50_000


class Clock(PhaseClock):
    """Seconds per phase, in order (beam_sft/timing.py), each logged as it ends."""

    def __init__(self) -> None:
        super().__init__()
        self.progress_interval = 0.0
        self.bars = True

    def phase(self, name: str) -> float:
        seconds = super().phase(name)
        logger.info("%s: %.2fs", name, seconds)
        return seconds


@dataclasses.dataclass(frozen=True)
class LoadedTokenizer:
    """The run's tokenizer and the digests of the files it was read from (taken before reading),
    which let verify use this object instead of loading DIR/tokenizer again once it has proven the
    two the same (``beam_sft.verify.caller_tokenizer``)."""

    tokenizer: object
    files: dict[str, str] | None


def load_run_tokenizer(name) -> LoadedTokenizer:
    folder = Path(name) if name else None
    files = tokenizer_files(folder) if folder is not None and folder.is_dir() else None
    return LoadedTokenizer(load_tokenizer(name), files)


def verify_folder(directory: Path, num_proc: int, loaded: LoadedTokenizer | None = None) -> None:
    """Run ``beam_sft.verify`` on a prepared folder; VerificationError naming it on any violation."""
    with children_die_with_me():
        result = verify_prepared(directory, num_proc=num_proc, pool_min_rows=MIN_POOL_ROWS,
                                 **_tokenizer_kwargs(loaded))
    if not result.ok:
        raise VerificationError(
            f"{directory}: {len(result.violations)} mask violation(s); see report.json and verify_violations.jsonl"
        )


def failed_dir(final: Path) -> Path:
    """Where a folder that failed verification is kept for inspection (never published, never cached)."""
    return final.parent / f".{final.name}.failed-verification"


def _tokenizer_kwargs(loaded: LoadedTokenizer | None) -> dict:
    return {} if loaded is None else {"tokenizer": loaded.tokenizer, "tokenizer_files": loaded.files}


def verify_then_publish(staging: Path, final: Path, num_proc: int, *, verify: bool, clock: Clock | None = None,
                        loaded: LoadedTokenizer | None = None, env=None) -> Path:
    """Verify ``staging`` (when asked) and publish it as ``final`` only if every row passes.

    On a violation the staging folder is moved to ``failed_dir(final)`` (replacing an earlier failed
    one of ours) and VerificationError names it; ``final`` is left as it was. ``env``: verify's
    environment, made from ``loaded``'s tokenizer while the encode workers ran (``verify_prepared``).
    """
    if verify:
        with timed() as took, children_die_with_me():  # verify's worker processes too
            result = verify_prepared(staging, num_proc=num_proc, pool_min_rows=MIN_POOL_ROWS, env=env,
                                     **_tokenizer_kwargs(loaded))
        seconds = took.phases["total"]
        if clock is not None:
            clock.phase("verify")
        report = rep.require_report(staging)
        timing = report.setdefault("timing", {})
        timing.setdefault("phases", {})["verify"] = seconds
        if not result.ok:  # the folder is marked, so train refuses it wherever it is pointed at
            report[KEPT_ASIDE_KEY] = f"{len(result.violations)} violation(s); nothing was published"
        rep.write_report(staging, report)
        # after verify: the page shows its result (a failed folder keeps its page too), drawn with
        # verify's environment (its tokenizer is the folder's, or proven the same), not a second load
        write_page(staging, final, result.env)
        if not result.ok:
            failed = failed_dir(final)
            # an earlier failed result goes only when it holds nothing but ours; else it is kept, and so is this one
            if (failed.exists() or failed.is_symlink()) and not output.remove_ours(failed, "an earlier failed result"):
                failed = final.parent / f"{failed.name}-{os.getpid()}"
            os.replace(staging, failed)
            raise VerificationError(
                f"{final}: {len(result.violations)} mask violation(s): nothing was published or cached. The dataset "
                f"and verify_violations.jsonl are in {failed}")
    else:
        write_page(staging, final)
    return output.publish(staging, final)


def write_page(staging: Path, final: Path, env=None) -> None:
    """report.html beside report.json, in the staging folder (so it is published with it; like the
    report it is not digested). A page that cannot be drawn costs a warning, never the prepared data."""
    from beam_sft.verify.report_html import write_report_page

    report = rep.read_report(staging)
    if isinstance(report, dict) and (report.get("tokens") or {}).get("rows") == 0:
        return  # a shard that kept no row: nothing to draw (the merged folder gets its page)
    try:
        write_report_page(staging, shown_as=final, env=env)
    except Exception as exc:  # noqa: BLE001 (the dataset is good; only its picture failed)
        logger.warning("%s: the report page could not be written (%s: %s); `beam-sft report %s` retries",
                       staging, type(exc).__name__, exc, staging)


def _cache_hit(final: Path, plan: ResolvedPrepare, loaded: LoadedTokenizer | None = None) -> Path:
    logger.info("cache hit: %s", final)
    report = rep.require_report(final)
    check_integrity(final, report)  # the report's seal, then every file's digest
    check_counts(final, report)
    if _verifies(plan, report):
        if "verify" not in report:
            verify_folder(final, plan.num_proc, loaded)
            return final
        try:  # a full pass of exactly these files, not a sample's result
            check_verified(final, report)
        except PreparedError as exc:
            raise VerificationError(f"a cached dataset that is not proven: {exc}") from exc
    return final


def _needs_verify(final: Path, plan: ResolvedPrepare) -> bool:
    report = rep.read_report(final)
    return _verifies(plan, report) and (not isinstance(report, dict) or "verify" not in report)


def _verifies(plan: ResolvedPrepare, report) -> bool:
    """Whether this folder is verified: not a shard that kept no row (there is nothing to verify; the
    merge verifies the merged folder, and refuses a merge that keeps nothing)."""
    empty_shard = plan.num_shards > 1 and isinstance(report, dict) and (report.get("tokens") or {}).get("rows") == 0
    return bool(plan.verify) and not empty_shard


def prepare(config: PrepareConfig, *, progress_interval: float = 0.0, bars: bool = True) -> Path:
    """Prepare (or reuse) the dataset ``config`` describes; returns its directory.

    ``progress_interval`` > 0 logs a progress line (records, rows/s, ETA) that often while encoding;
    ``bars``: a progress bar for the encode pass (``progress.bar``).
    The config is read here and by ``resolve`` only: every step after reads the resolved plan.
    """
    clock = Clock()
    clock.progress_interval = progress_interval
    clock.bars = bars
    if not config.sources:
        raise ConfigError("sources", "no data sources given")
    if config.output:
        from beam_sft.paths import check_paths

        # before any work: never the user's folder, never over (or inside) what the run reads
        check_paths({"sources": [s.path for s in config.sources],
                     "batch_input": [s.batch_input for s in config.sources if s.batch_input],
                     "tokenizer": config.tokenizer},
                    {"output": config.output})
        output.check_output_target(Path(config.output))
    # the fingerprint's code and data digests worked out on the other core while the tokenizer loads,
    # then records converted there until the encode workers start (``convert_ahead``)
    with head_start(config.sources, ahead_plan(config, HEAD_RECORDS)) as head:
        loaded = load_run_tokenizer(config.tokenizer)
        tokenizer = loaded.tokenizer
        clock.phase("load_tokenizer")
        # the config interpreted once: every step below reads the plan
        plan = resolve(config, tokenizer, head.result() if head is not None else None)
        del config  # past here nothing reads the config (a read would be a NameError): the plan holds the values
        fingerprint, base_fingerprint, parts = cache.fingerprints(plan, tokenizer)
        clock.phase("fingerprint")
        final = Path(plan.output) if plan.output else cache.default_output(fingerprint)
        # A complete folder is published by one atomic rename, so reading a cache hit needs no lock (the
        # other processes of a training run all read it at once, after the first one prepared it).
        # A hit that still needs verifying writes verify's outputs into the folder: that one takes the lock.
        if plan.cache and cache.is_cached(final, fingerprint) and not _needs_verify(final, plan):
            clear_stale_lock(final)  # a killed run's lock is never left behind by the runs that only read
            return _cache_hit(final, plan, loaded)
        with output_lock(final):  # one writer per folder; a second run is refused with the holder's pid
            if plan.cache and cache.is_cached(final, fingerprint):  # finished while we looked
                return _cache_hit(final, plan, loaded)
            output.check_output_target(final)
            with output.staged(final) as staging:
                # verify's environment, made while the encode workers run (not after them, on one core)
                check_env = _EarlyCheckEnv(tokenizer, plan.max_length) if _verifies(plan, None) else None
                report = _prepare_into(staging, final, plan, tokenizer, clock, fingerprint, base_fingerprint, parts,
                                       head, check_env)
                verify_then_publish(staging, final, plan.num_proc, verify=_verifies(plan, report), clock=clock,
                                    loaded=loaded, env=check_env.env if check_env is not None else None)
    logger.info("prepared %s rows into %s (%.1fs)", report["tokens"]["rows"], final, clock.elapsed())
    return final


class _EarlyCheckEnv:
    """Verify's ``CheckEnv`` (its byte table, its compile of the template), made when called; ``env``
    stays None until then, and after an error, which is left for verify: it makes one itself and
    raises where it always did."""

    def __init__(self, tokenizer, max_length: int | None):
        self.tokenizer, self.max_length = tokenizer, max_length
        self.env: CheckEnv | None = None

    def __call__(self) -> None:
        try:
            self.env = CheckEnv.create(self.tokenizer, max_length=self.max_length)
        except Exception:  # noqa: BLE001
            self.env = None


def _prepare_into(staging: Path, final: Path, plan: ResolvedPrepare, tokenizer, clock: Clock, fingerprint: str,
                  base_fingerprint: str, parts: dict, early: HeadStart | None = None,
                  during_encode: Callable[[], None] | None = None) -> dict:
    """The run's dataset in ``staging``: records read, converted, encoded, counted, and the report.
    ``early``: head_start's child (its converted batches); ``during_encode``: called once while the
    encode workers run (the first table back), where this process would otherwise wait."""
    work = staging / output.WORK_DIR
    save_tokenizer(tokenizer, plan.tokenizer, staging / TOKENIZER_DIR)
    jobs, infos, n_records = records.write_records(plan, work / "records.arrow")
    source_records = records.RecordsFile(work / "records.arrow")
    clock.phase("read")
    if plan.teacher is not None:
        from beam_sft.prepare.teacher import ask_teacher

        refusals = work / "teacher_refusals.json"
        ask_teacher(plan.teacher, batch_mod.iter_records(source_records, jobs), jobs, refusals,
                    quiet=clock.progress_interval <= 0)
        jobs = [dataclasses.replace(j, reasoning=plan.teacher, reasoning_refusals=str(refusals)) for j in jobs]
        clock.phase("teacher")
    job = batch_mod.EncodeJob(
        key=f"{fingerprint}:{os.getpid()}:{time.time_ns()}", tokenizer_dir=str(staging / TOKENIZER_DIR),
        encoder="template", sources=tuple(jobs), seed=plan.seed, max_length=plan.max_length,
        length_policy=plan.length_policy,
        max_chars=char_bound(tokenizer, plan.max_length, plan.length_policy),
    )
    head_count = min(n_records, HEAD_RECORDS)
    head, rest_batch, rest_skip = source_records.head(head_count)
    head_items = batch_mod.convert_records(
        tuple(head.column(name).to_pylist() for name in batch_mod.RECORD_COLUMNS), job)
    del head
    longest = min(PROBE_MAX_CHARS, job.max_chars or PROBE_MAX_CHARS)
    sample = [item.row for item in head_items
              if isinstance(item, batch_mod.Pending) and item.chars <= longest]
    sample = sample[:PROBE_SAMPLE]
    kind, encoder, encoder_section = select.choose_encoder(plan.encoder, tokenizer, sample)
    job = dataclasses.replace(job, encoder=kind)
    clock.phase("probe")

    counter = Counter() if clock.progress_interval > 0 else None
    collected = _Collector(staging, fingerprint=_dataset_fingerprint(job))
    ahead = None
    try:
        collected.add(batch_mod.encode_items(head_items, job, encoder))
        del head_items, sample
        # stopped only now: it converts while this process encodes the head, and answers within 16 records
        ahead = early.take_ahead() if early is not None else None
        if ahead is not None and not ahead.usable(job.sources, job.seed):
            ahead.close()
            ahead = None
        batch_mod.install_state(job, tokenizer, encoder, counter, ahead)
        rest = n_records - head_count
        procs = _effective_procs(plan, rest)
        if rest:
            if counter is not None:
                counter.add(head_count)
            tasks = tasks_after(rest_batch, rest_skip, source_records.num_batches)
            # closing(): an error or an interrupt here ends the pool before the staging folder goes
            with _forked_workers_single_threaded(procs > 1), children_die_with_me(), \
                    heartbeat("encode", n_records, counter, clock.progress_interval), \
                    bar("encode", n_records, head_count, show=clock.bars) as progress, \
                    contextlib.closing(encoded_tables(work / "records.arrow", tasks, job, procs, work)) as tables:
                for table, done in tables:
                    collected.add(table)
                    progress.update(done)
                    if during_encode is not None:
                        during_encode()
                        during_encode = None
        clock.phase("encode")
        collected.close()
    except BaseException:
        collected.abort()
        raise
    finally:
        source_records.close()
        if ahead is not None:
            ahead.close()
    counts, tokens = collected.counts, collected.tokens
    for info in infos:
        # (a shard's range may hold no record of a source: the merge says when the source is empty)
        if not counts.sources[info.label]["read"] and plan.num_shards == 1:
            logger.warning("source %s (%s) is empty: no records in it", info.label, info.path)
    if counts.kept() == 0 and plan.num_shards == 1:  # (a shard may keep none: the merge decides)
        raise NothingKept(f"nothing to prepare: no row of any source was kept\n"
                          f"{sources_table(rep.sources_section(infos, counts))}")
    clock.phase("save")
    shutil.rmtree(work)
    encode_seconds = clock.elapsed()
    report = rep.build_report(
        fingerprint=fingerprint, fingerprint_base=base_fingerprint, fingerprint_parts=parts,
        shard={"index": plan.shard_index, "count": plan.num_shards}, config=plan.report_config,
        encoder=encoder_section, infos=infos, counts=counts, seed=plan.seed, max_length=plan.max_length,
        length_policy=plan.length_policy, tokens=tokens,
        timing={"seconds": round(encode_seconds, 2), "phases": clock.phases, "records": n_records,
                "num_proc": procs, "records_per_second": round(n_records / encode_seconds, 1) if encode_seconds else None},
        files=file_digests(staging),
    )
    clock.phase("report")
    report["timing"]["phases"] = dict(clock.phases)
    rep.write_report(staging, report)
    return report


def _dataset_fingerprint(job) -> str:
    """The fingerprint state.json records (unique per run, as the ``datasets.map`` one was)."""
    return fp.digest_bytes(job.key.encode())[:16]


class _Collector:
    """The parent's side of the encode pass, one output table at a time, in record order: counts
    (``Counts``, ``TokenStats``), rejects.jsonl lines, and the kept rows (``STATUS_COLUMNS`` dropped)
    written to the dataset in batches (``dataset_folder.arrow_dataset``). Memory: one table."""

    def __init__(self, staging: Path, *, fingerprint: str):
        self.counts, self.tokens = rep.Counts(), rep.TokenStats()
        self._rejects = open(staging / REJECTS_FILE, "w", encoding="utf-8")
        self._dataset = DatasetWriter(staging, fingerprint=fingerprint)

    def add(self, table) -> None:
        schema = _output_schema()
        if not table.schema.equals(schema, check_metadata=False):
            table = table.cast(schema)
        batch_mod.count_table(table, self.counts, self.tokens)
        for line in batch_mod.reject_lines(table):
            self._rejects.write(line + "\n")
        self._dataset.write(batch_mod.kept_rows(table))

    def close(self) -> None:
        self._rejects.close()
        self._dataset.close()

    def abort(self) -> None:
        self._rejects.close()
        self._dataset.abort()


@functools.lru_cache(maxsize=1)
def _output_schema():
    return batch_mod.output_schema()


def _effective_procs(plan: ResolvedPrepare, rows: int) -> int:
    return max(1, min(plan.num_proc, math.ceil(max(rows, 1) / plan.batch_size)))


@contextlib.contextmanager
def _forked_workers_single_threaded(forking: bool):
    """Workers are forked after the probe used the tokenizer's thread pool: tell ``tokenizers`` (which
    would otherwise warn and turn it off itself), then put the variable back as it was."""
    previous = os.environ.get("TOKENIZERS_PARALLELISM")
    if forking:
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = previous
