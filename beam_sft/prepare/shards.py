"""Sharded preparation: N processes or machines each prepare one contiguous range of the records
(``shard_plan``); ``merge_shards`` joins their directories into one prepared dataset, the very
folder one unsharded ``prepare`` of the same config writes: the same rows in the same order, the
same rejects, the same report (its fingerprint too) but for timing and the ``engine`` section,
which names the shards it was merged from.

Each shard counts every record (reading is cheap) but converts and encodes only its own. Mixing
decisions depend on the row alone (``beam_sft.data.mix``), so shards need not talk to each other.
The merge checks that the shards come from the same run (same ``fingerprint_base``), that each
index from 0 to N-1 is there exactly once, and that each shard's report is sealed, its counts agree
(``dataset_folder.report_json.count_problems``) and its files are what it recorded;
then it concatenates the datasets (record batch by record batch with plain reads through
``dataset_folder.arrow_dataset``: nothing is memory-mapped, so memory does not grow with rows), the rejects,
and the report counts, through the same report builder as ``prepare``, and publishes the result
only once it verified (like ``prepare``). Rows come shard by shard, which is the unsharded order.
"""

from __future__ import annotations

import logging
import shutil
from collections import Counter
from pathlib import Path

from beam_sft.data.fingerprint import combine
from beam_sft.data.rejects import sources_table  # convert's table: one renderer
from beam_sft.dataset_folder import output
from beam_sft.dataset_folder import report_json as rep
from beam_sft.dataset_folder.arrow_dataset import DatasetWriter, iter_batches
from beam_sft.dataset_folder.integrity import check_integrity, file_digests
from beam_sft.dataset_folder.layout import COLUMNS, DATASET_INFO_FILE, REJECTS_FILE, TOKENIZER_DIR
from beam_sft.dataset_folder.load import KEPT_ASIDE_KEY, check_counts, check_verified
from beam_sft.dataset_folder.lock import output_lock
from beam_sft.errors import ConfigError, NothingKept
from beam_sft.paths import check_paths
from beam_sft.prepare.cache import combined, unsharded_parts
from beam_sft.prepare.pipeline import verify_then_publish

logger = logging.getLogger("beam_sft.prepare")


def _reports(shards: list[Path]) -> list[dict]:
    reports = []
    for shard in shards:
        report = rep.read_report(shard)
        if report is None or not (shard / DATASET_INFO_FILE).is_file():
            raise ConfigError("shards", f"{shard}: not a prepared dataset (no report.json or dataset)")
        check_integrity(shard, report)  # its seal and its files
        check_counts(shard, report)  # before its counts are summed into the merged report
        check_verified_shard(shard, report)
        reports.append(report)
    return reports


def check_verified_shard(shard: Path, report: dict) -> None:
    """A shard that recorded a verification must have passed a full one (a shard prepared with
    ``--no-verify`` is verified as part of the merge)."""
    if "verify" in report or report.get(KEPT_ASIDE_KEY):
        check_verified(shard, report)


def _first_difference(shards: list[Path], reports: list[dict]) -> str:
    """Which shard differs from the first, and in what part of the fingerprint (data, options,
    tokenizer, template, code, ...), for the refusal to say."""
    def parts(report: dict) -> dict:
        value = report.get("fingerprint_parts")
        return value if isinstance(value, dict) else {}

    first = parts(reports[0])
    for shard, report in zip(shards[1:], reports[1:], strict=True):
        if report.get("fingerprint_base") == reports[0].get("fingerprint_base"):
            continue
        other = parts(report)
        keys = sorted(k for k in set(first) | set(other) if k != "shard_index" and first.get(k) != other.get(k))
        detail = _source_difference(first, other) if keys == ["sources"] else ", ".join(keys) or "its base"
        return f"{shard} differs from {shards[0]} in {detail}"
    return "their fingerprints differ"


def _source_difference(first: dict, other: dict) -> str:
    a, b = first.get("sources") or [], other.get("sources") or []
    if len(a) != len(b):
        return f"sources ({len(a)} against {len(b)})"
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x != y and isinstance(x, dict) and isinstance(y, dict):
            keys = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
            return f"sources[{i}] ({', '.join(keys)})"
    return "sources"


def check_shards(shards: list[Path], reports: list[dict]) -> None:
    """Same run, every shard index exactly once."""
    bases = {r.get("fingerprint_base") for r in reports}
    if len(bases) != 1:
        raise ConfigError("shards", "the shards come from different runs (their fingerprint_base differ): "
                                    + _first_difference(shards, reports))
    counts = {r["shard"]["count"] for r in reports}
    if len(counts) != 1:
        raise ConfigError("shards", f"the shards disagree on the number of shards: {sorted(counts)}")
    count = counts.pop()
    indices = Counter(r["shard"]["index"] for r in reports)
    missing = sorted(set(range(count)) - set(indices))
    twice = sorted(i for i, n in indices.items() if n > 1)
    if missing or twice:
        raise ConfigError("shards", f"shard indices: missing {missing}, given twice {twice} (of {count})")


def merge_shards(shards: list[str | Path], output_dir: str | Path, *, verify: bool = True, num_proc: int = 1,
                 engine: dict | None = None) -> Path:
    """Join the prepared shard directories into ``output_dir``; returns it.

    ``engine`` (the Ray driver's plan and attempts) goes into the report's ``engine`` section beside
    the shards' own facts; default ``{"name": "merge-shards"}``."""
    shards = [Path(s) for s in shards]
    if not shards:
        raise ConfigError("shards", "no shard directories given")
    reports = _reports(shards)
    check_shards(shards, reports)
    order = sorted(range(len(shards)), key=lambda i: reports[i]["shard"]["index"])
    shards, reports = [shards[i] for i in order], [reports[i] for i in order]
    final = Path(output_dir)
    check_paths({"SHARD_DIR": shards}, {"--output": final})  # not a shard, nor inside or around one

    with output_lock(final):
        return _merge_into(shards, reports, final, verify=verify, num_proc=num_proc,
                           engine=engine or {"name": "merge-shards"})


def merge_checked_shards(shards: list[Path], final: Path, *, verify: bool, num_proc: int, engine: dict,
                         config: dict, loaded=None) -> Path:
    """``merge_shards`` for a caller that already holds ``final``'s lock and checked the paths (the
    Ray driver): the same checks of every shard, the same merge; ``config`` is the run's own config
    (the merged report's ``config``, as one unsharded run records it)."""
    reports = _reports(shards)
    check_shards(shards, reports)
    if [r["shard"]["index"] for r in reports] != list(range(len(shards))):
        raise ConfigError("shards", "the shard folders are not given in shard order")
    return _merge_into(shards, reports, final, verify=verify, num_proc=num_proc, engine=engine, config=config,
                       loaded=loaded)


def _merge_into(shards: list[Path], reports: list[dict], final: Path, *, verify: bool, num_proc: int,
                engine: dict, config: dict | None = None, loaded=None) -> Path:
    output.check_output_target(final)
    with output.staged(final) as staging:
        tokens = rep.TokenStats()
        writer = DatasetWriter(staging, fingerprint=combine(
            {"merged": reports[0]["fingerprint_base"], "shards": len(shards), "dataset": True})[:16])
        try:
            for shard in shards:
                for batch in iter_batches(shard, list(COLUMNS)):
                    writer.write(batch)
                    tokens.add_batch(batch)
            writer.close()
        except BaseException:
            writer.abort()
            raise
        shutil.copytree(shards[0] / TOKENIZER_DIR, staging / TOKENIZER_DIR)
        with open(staging / REJECTS_FILE, "wb") as sink:
            for shard in shards:
                if (shard / REJECTS_FILE).is_file():
                    with open(shard / REJECTS_FILE, "rb") as source:
                        shutil.copyfileobj(source, sink)
        counts = rep.Counts()
        for report in reports:
            counts.merge(rep.Counts.from_report(report))
        if counts.kept() == 0:  # (each shard may keep none; the merged folder must keep a row, as prepare's)
            raise NothingKept(f"nothing to merge: no shard kept a row\n"
                              f"{sources_table(rep.sources_section(rep.infos_from_report(reports[0]), counts))}")
        for name, entry in counts.sources.items():
            if not entry["read"]:
                logger.warning("source %s is empty: no records in it", name)
        first = reports[0]
        parts = unsharded_parts(first["fingerprint_parts"])
        fingerprint, base = combined(parts)
        # (summed by build_report)
        encoder = {k: v for k, v in first["encoder"].items() if k not in ("fallback_rows", "native_rows")}
        report = rep.build_report(
            fingerprint=fingerprint, fingerprint_base=base, fingerprint_parts=parts, shard={"index": 0, "count": 1},
            config={**(config or first["config"]), "num_shards": 1, "shard_index": 0, "output": str(final)},
            encoder={**encoder, "name": rep.encoder_names(r["encoder"] for r in reports)},
            infos=rep.infos_from_report(first), counts=counts, seed=first["mix"]["seed"],
            max_length=first["length_policy"]["max_length"], length_policy=first["length_policy"]["policy"],
            tokens=tokens, timing={"shards": [r.get("timing") for r in reports]}, files=file_digests(staging),
        )
        # How it was made: the shards (their own fingerprints and encoder probes) and the engine's facts.
        report["engine"] = {**engine, "shards": [
            {"index": r["shard"]["index"], "fingerprint": r["fingerprint"], "rows": r["tokens"]["rows"],
             "encoder": r["encoder"]} for r in reports]}
        rep.write_report(staging, report)
        # (``loaded``: the run's tokenizer, which verify uses once it proved it the folder's, as prepare does)
        verify_then_publish(staging, final, num_proc, verify=verify, loaded=loaded)
    return final
