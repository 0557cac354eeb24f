"""``prepare(config) -> Path``: sources in, a prepared dataset directory out (see DESIGN.md).

1. Fingerprint the inputs; a complete directory with the same fingerprint is reused as it is.
2. Read this shard's raw records into one Arrow file (the only serial step).
3. Choose the encoder: the fast one when its start-up probe matches ``apply_chat_template``.
4. One ``datasets.map`` pass with ``num_proc`` workers: convert, mix, encode, length policy.
5. Save the dataset, the tokenizer, report.json and rejects.jsonl into a staging directory, move it
   into place, then verify it (``beam_sft.verify``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

from beam_sft.data import cache as cache_dir
from beam_sft.data import fingerprint as fp
from beam_sft.data.hub import source_digest
from beam_sft.encode.config import PrepareConfig
from beam_sft.errors import ConfigError, VerificationError

logger = logging.getLogger("beam_sft.encode")

# Bump when the prepared layout or the encoding rules change in a way the code digests miss.
ENCODER_VERSION = 1
PROBE_SAMPLE = 32


def load_tokenizer(name: str | None):
    if not name:
        raise ConfigError("tokenizer", "no tokenizer: set data.prepare.tokenizer, --tokenizer or $BEAM_MODEL_ID")
    try:
        if _plain_fast_tokenizer(Path(name)):
            # The class AutoTokenizer would pick, without importing torch on the way.
            from transformers import PreTrainedTokenizerFast

            return PreTrainedTokenizerFast.from_pretrained(name)
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as exc:
        raise ConfigError("tokenizer", f"cannot load {name!r}: {exc}") from exc


def save_tokenizer(tokenizer, name: str, out: Path) -> None:
    """DIR/tokenizer: the source files as they are when ``load_tokenizer`` read them from a plain
    tokenizer folder (a 200k vocabulary saves in seconds), else ``save_pretrained``."""
    source = Path(name)
    if _plain_fast_tokenizer(source):
        out.mkdir(parents=True)
        for file in sorted(source.iterdir()):
            if file.is_file() and (file.name in fp.TOKENIZER_FILES or file.name.startswith("chat_template")):
                shutil.copy2(file, out / file.name)
        return
    tokenizer.save_pretrained(str(out))


def _plain_fast_tokenizer(directory: Path) -> bool:
    import json

    try:
        config = json.loads((directory / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (directory / "tokenizer.json").is_file() and config.get("tokenizer_class") in (
        "PreTrainedTokenizerFast", "TokenizersBackend") and not config.get("auto_map")


def fingerprint_parts(config: PrepareConfig, tokenizer) -> dict[str, Any]:
    """Everything the output depends on (see ``beam_sft.data.fingerprint``)."""
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else repr(tokenizer.chat_template)
    return {
        "encoder_version": ENCODER_VERSION,
        "encoder_code": fp.package_digest("beam_sft.encode"),
        "converter_code": fp.package_digest("beam_sft.convert"),
        "data_code": fp.package_digest("beam_sft.data"),
        "template": fp.digest_bytes((template or "").encode()),
        "tokenizer": fp.tokenizer_digest(tokenizer),
        "response_template": fp.digest_json(getattr(tokenizer, "response_template", None)),
        "libraries": fp.library_versions(),
        "sources": [
            {"path": s.path, "label": s.label, "format": s.format, "weight": s.weight, "column_map": s.column_map,
             "convert": s.convert, "data": source_digest(s)}
            for s in config.sources
        ],
        "options": {
            "max_length": config.max_length, "length_policy": config.length_policy,
            "missing_reasoning": config.missing_reasoning, "seed": config.seed, "encoder": config.encoder,
            "num_shards": config.num_shards,
        },
        "shard_index": config.shard_index,
    }


def fingerprints(config: PrepareConfig, tokenizer) -> tuple[str, str, dict]:
    """(fingerprint, the fingerprint shared by all shards of the run, the parts)."""
    parts = fingerprint_parts(config, tokenizer)
    base = {k: v for k, v in parts.items() if k != "shard_index"}
    return fp.combine(parts), fp.combine(base), parts


def _sample_rows(records, jobs, n: int) -> list[dict]:
    """The first ``n`` convertible rows of the data, for the probe."""
    from beam_sft.convert.pipeline import convert_row
    from beam_sft.convert.rows import Rejection
    from beam_sft.encode.batch import _decode

    rows = []
    head = records.select(range(min(len(records), 4 * n)))
    for text, error, source_id, row_index in zip(head["raw"], head["error"], head["source_id"], head["row_index"],
                                                  strict=True):
        job = jobs[source_id]
        result = convert_row(_decode(text, error), format=job.format, options=job.options, source=job.label,
                             row=row_index)
        if not isinstance(result, Rejection):
            rows.append(result)
            if len(rows) >= n:
                break
    return rows


def choose_encoder(config: PrepareConfig, tokenizer, sample: list[dict]):
    """(kind, encoder, report section). ``auto`` falls back to the template encoder on any doubt."""
    from beam_sft.encode.fast import FastEncoder, unsupported_reasons
    from beam_sft.encode.probe import probe, probe_rows
    from beam_sft.encode.template_encode import TemplateEncoder

    if config.encoder == "template":
        return "template", TemplateEncoder(tokenizer), {"name": "template", "reason": "requested"}
    reasons = unsupported_reasons(tokenizer)
    if reasons:
        problem = "; ".join(reasons)
    else:
        try:
            fast = FastEncoder(tokenizer)
            result = probe(fast, TemplateEncoder(tokenizer), probe_rows() + sample)
        except Exception as exc:  # e.g. a transformers version whose internals moved: be slow, not wrong
            result = None
            problem = f"fast encoder failed to start: {type(exc).__name__}: {exc}"
        if result is not None and result.ok:
            section = {"name": "fast", "probe": result.to_json(), "word_path": fast.words is not None}
            return "fast", fast, section
        if result is not None:
            problem = f"start-up probe mismatch: {result.mismatch}"
    if config.encoder == "fast":
        raise ConfigError("encoder", f"the fast encoder cannot be used here: {problem}")
    logger.warning("falling back to the template encoder: %s", problem)
    return "template", TemplateEncoder(tokenizer), {"name": "template", "fallback_reason": problem}


def _effective_procs(config: PrepareConfig, rows: int) -> int:
    return max(1, min(config.resolved_num_proc(), math.ceil(rows / config.batch_size)))


def _verify(directory: Path, num_proc: int) -> None:
    from beam_sft.verify import verify_prepared

    result = verify_prepared(directory, num_proc=num_proc)
    if not result.ok:
        raise VerificationError(
            f"{directory}: {len(result.violations)} mask violation(s); see report.json and verify_violations.jsonl"
        )


def _cache_hit(final: Path, config: PrepareConfig) -> Path:
    logger.info("cache hit: %s", final)
    if config.verify:
        report = cache_dir.read_report(final) or {}
        if "verify" not in report:
            _verify(final, config.resolved_num_proc())
        elif not report["verify"].get("ok", True):
            raise VerificationError(f"{final}: a cached dataset that failed verification; see its report.json")
    return final


def prepare(config: PrepareConfig) -> Path:
    """Prepare (or reuse) the dataset ``config`` describes; returns its directory."""
    from datasets import Dataset, disable_progress_bars

    from beam_sft.encode import batch as batch_mod
    from beam_sft.encode import read
    from beam_sft.encode import report as rep

    started = time.time()
    phases: dict[str, float] = {}

    def phase(name: str, since: list[float] = [started]) -> None:  # noqa: B006 (a running clock)
        now = time.time()
        phases[name] = round(now - since[0], 3)
        since[0] = now
        logger.info("%s: %.2fs", name, phases[name])

    if not config.sources:
        raise ConfigError("sources", "no data sources given")
    if config.output:
        cache_dir.check_output_target(Path(config.output))  # before any work: never the user's folder
    tokenizer = load_tokenizer(config.tokenizer)
    phase("load_tokenizer")
    fingerprint, base_fingerprint, parts = fingerprints(config, tokenizer)
    phase("fingerprint")
    final = Path(config.output) if config.output else cache_dir.default_output(fingerprint)
    if config.cache and cache_dir.is_cached(final, fingerprint):
        return _cache_hit(final, config)

    cache_dir.check_output_target(final)
    staging = cache_dir.staging_dir(final)
    work = staging / ".work"
    try:
        disable_progress_bars()
        save_tokenizer(tokenizer, config.tokenizer, staging / "tokenizer")
        jobs, infos, n_records = read.write_records(config, work / "records.arrow")
        records = Dataset.from_file(str(work / "records.arrow"))
        phase("read")
        kind, encoder, encoder_section = choose_encoder(config, tokenizer, _sample_rows(records, jobs, PROBE_SAMPLE))
        phase("probe")
        job = batch_mod.EncodeJob(
            key=f"{fingerprint}:{os.getpid()}:{time.time_ns()}", tokenizer_dir=str(staging / "tokenizer"),
            encoder=kind, sources=tuple(jobs), seed=config.seed, max_length=config.max_length,
            length_policy=config.length_policy, work_dir=str(work),
        )
        batch_mod.install_state(job, tokenizer, encoder)
        procs = _effective_procs(config, n_records)
        with _forked_workers_single_threaded(procs > 1):
            encoded = _encode(records, job, config, procs, work)
        phase("encode")
        encoded.save_to_disk(str(staging))
        phase("save")
        encode_seconds = time.time() - started
        _write_rejects(work, staging / "rejects.jsonl")
        stats = rep.read_stats(work)
        tokens = rep.TokenStats()
        tokens.add_dataset(encoded)
        del encoded, records
        shutil.rmtree(work)
        phase("report")
        from beam_sft.data.mix import mix_report

        sources = rep.sources_section(infos, stats)
        report = {
            "version": rep.REPORT_VERSION,
            "fingerprint": fingerprint,
            "fingerprint_base": base_fingerprint,
            "fingerprint_parts": parts,
            "shard": {"index": config.shard_index, "count": config.num_shards},
            "config": dataclasses.asdict(config),
            "encoder": {**encoder_section, "fallback_rows": sum(stats["totals"]["fallback_rows"].values())},
            "sources": sources,
            "mix": mix_report({n: s["weight"] for n, s in sources.items()}, {n: s["read"] for n, s in sources.items()},
                              {n: s["rows_out"] for n, s in sources.items()}, config.seed),
            "length_policy": rep.length_section(config, stats),
            "rejects": rep.rejects_section(stats),
            "tokens": tokens.to_json(),
            "timing": {"seconds": round(encode_seconds, 2), "phases": phases, "records": n_records, "num_proc": procs,
                       "records_per_second": round(n_records / encode_seconds, 1) if encode_seconds else None},
        }
        rep.write_report(staging, report)
        cache_dir.publish(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logger.info("prepared %s rows into %s (%.1fs)", report["tokens"]["rows"], final, time.time() - started)
    if config.verify:
        _verify(final, config.resolved_num_proc())
    return final


def _encode(records, job, config: PrepareConfig, procs: int, work: Path):
    from beam_sft.encode import batch as batch_mod

    return records.with_format("arrow").map(
        batch_mod.process_batch, batched=True, batch_size=config.batch_size, with_rank=True,
        num_proc=procs if procs > 1 else None, fn_kwargs={"job": job},
        remove_columns=records.column_names, features=batch_mod.output_features(),
        load_from_cache_file=False, new_fingerprint=fp.digest_bytes(job.key.encode())[:32],
        cache_file_name=str(work / "encoded.arrow"),
    ).with_format(None)


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


def _write_rejects(work: Path, out: Path) -> None:
    with open(out, "w", encoding="utf-8") as sink:
        for path in sorted(work.glob("rejects-*.jsonl")):
            with open(path, encoding="utf-8") as source:
                shutil.copyfileobj(source, sink)
