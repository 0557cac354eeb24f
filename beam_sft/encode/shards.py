"""Sharded preparation: N processes or machines each prepare rows ``i % N == I``; ``merge_shards``
joins their directories into one prepared dataset.

Each shard reads every record (reading is cheap) but converts and encodes only its own. Mixing
decisions depend on the row alone (``beam_sft.data.mix``), so shards need not talk to each other.
The merge checks that the shards come from the same run (same ``fingerprint_base``) and that each
index from 0 to N-1 is there exactly once, then concatenates the datasets (memory-mapped, so memory
stays flat), the rejects, and the report counts. Rows come shard by shard.
"""

from __future__ import annotations

import shutil
from collections import Counter, defaultdict
from pathlib import Path

from beam_sft.data import cache as cache_dir
from beam_sft.data.fingerprint import combine
from beam_sft.errors import ConfigError


def _reports(shards: list[Path]) -> list[dict]:
    reports = []
    for shard in shards:
        report = cache_dir.read_report(shard)
        if report is None or not (shard / "dataset_info.json").is_file():
            raise ConfigError("shards", f"{shard}: not a prepared dataset (no report.json or dataset)")
        reports.append(report)
    return reports


def check_shards(shards: list[Path], reports: list[dict]) -> None:
    """Same run, every shard index exactly once."""
    bases = {r.get("fingerprint_base") for r in reports}
    if len(bases) != 1:
        raise ConfigError("shards", "the shards come from different runs (their fingerprint_base differ)")
    counts = {r["shard"]["count"] for r in reports}
    if len(counts) != 1:
        raise ConfigError("shards", f"the shards disagree on the number of shards: {sorted(counts)}")
    count = counts.pop()
    indices = Counter(r["shard"]["index"] for r in reports)
    missing = sorted(set(range(count)) - set(indices))
    twice = sorted(i for i, n in indices.items() if n > 1)
    if missing or twice:
        raise ConfigError("shards", f"shard indices: missing {missing}, given twice {twice} (of {count})")


def _merge_sources(reports: list[dict]) -> dict:
    merged: dict[str, dict] = {}
    for report in reports:
        for name, entry in report["sources"].items():
            target = merged.setdefault(name, {k: v for k, v in entry.items()
                                              if k in ("path", "format", "detection", "weight")}
                                       | {"read": 0, "kept": 0, "rejected": Counter(), "selected": 0, "rows_out": 0})
            for key in ("read", "kept", "selected", "rows_out"):
                target[key] += entry[key]
            target["rejected"].update(entry["rejected"])
    for entry in merged.values():
        entry["rejected"] = dict(sorted(entry["rejected"].items()))
    return merged


def merge_shards(shards: list[str | Path], output: str | Path, *, verify: bool = True, num_proc: int = 1) -> Path:
    """Join the prepared shard directories into ``output``; returns it."""
    from datasets import concatenate_datasets, load_from_disk

    from beam_sft.data.mix import mix_report
    from beam_sft.encode import report as rep

    shards = [Path(s) for s in shards]
    if not shards:
        raise ConfigError("shards", "no shard directories given")
    reports = _reports(shards)
    check_shards(shards, reports)
    order = sorted(range(len(shards)), key=lambda i: reports[i]["shard"]["index"])
    shards, reports = [shards[i] for i in order], [reports[i] for i in order]
    final = Path(output)
    if any(final.resolve() == s.resolve() for s in shards):
        raise ConfigError("output", f"{final} is one of the shards being merged")
    cache_dir.check_output_target(final)
    staging = cache_dir.staging_dir(final)
    try:
        dataset = concatenate_datasets([load_from_disk(str(s)) for s in shards])
        dataset.save_to_disk(str(staging))
        shutil.copytree(shards[0] / "tokenizer", staging / "tokenizer")
        with open(staging / "rejects.jsonl", "wb") as sink:
            for shard in shards:
                if (shard / "rejects.jsonl").is_file():
                    with open(shard / "rejects.jsonl", "rb") as source:
                        shutil.copyfileobj(source, sink)
        tokens = rep.TokenStats()
        tokens.add_dataset(dataset)
        del dataset
        sources = _merge_sources(reports)
        rejected: dict[str, Counter] = defaultdict(Counter)
        for name, entry in sources.items():
            rejected[name].update(entry["rejected"])
        first = reports[0]
        report = {
            "version": rep.REPORT_VERSION,
            "fingerprint": combine({"merged": first["fingerprint_base"], "shards": len(shards)}),
            "fingerprint_base": first["fingerprint_base"],
            "fingerprint_parts": {k: v for k, v in first["fingerprint_parts"].items() if k != "shard_index"},
            "shard": {"merged": len(shards), "count": first["shard"]["count"]},
            "config": {**first["config"], "shard_index": None, "output": str(final)},
            "encoder": {"name": sorted({r["encoder"]["name"] for r in reports}),
                        "fallback_rows": sum(r["encoder"].get("fallback_rows", 0) for r in reports)},
            "sources": sources,
            "mix": mix_report({n: s["weight"] for n, s in sources.items()}, {n: s["read"] for n, s in sources.items()},
                              {n: s["rows_out"] for n, s in sources.items()}, first["mix"]["seed"]),
            "length_policy": {
                **{k: first["length_policy"][k] for k in ("max_length", "policy")},
                **{k: sum(r["length_policy"][k] for r in reports)
                   for k in ("dropped_too_long", "trimmed_rows", "trimmed_messages")},
            },
            "rejects": rep.rejects_section({"rejected": rejected}),
            "tokens": tokens.to_json(),
            "timing": {"shards": [r.get("timing") for r in reports]},
        }
        rep.write_report(staging, report)
        cache_dir.publish(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if verify:
        from beam_sft.encode.pipeline import _verify

        _verify(final, num_proc)
    return final

