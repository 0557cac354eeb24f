"""Reports for prepared folders that tests write by hand: complete and sealed as prepare's own, so
verify and train hold them to the same rules (``dataset_folder.report_json.count_problems``, the seal, the
files' digests)."""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path


def complete_report(report: dict, records: list[dict], directory: Path) -> dict:
    """``report`` (sources, mix seed, length policy) with what prepare derives from them filled in,
    as prepare's report builder would: totals, the mix, token statistics of ``records``, the files'
    digests (sealed when written by ``write_report``)."""
    import numpy as np

    from beam_sft.data.mix import mix_report
    from beam_sft.dataset_folder import file_digests
    from beam_sft.dataset_folder.report_json import REPORT_VERSION, TokenStats

    report = copy.deepcopy(report)
    report["version"] = REPORT_VERSION
    by_code: Counter = Counter()
    for entry in report["sources"].values():
        entry.setdefault("formats", {"openai": entry["read"]})
        entry.setdefault("empty", entry["read"] == 0)
        by_code.update(entry["rejected"])
    report.setdefault("rejects", {"total": sum(by_code.values()), "by_code": dict(sorted(by_code.items()))})
    policy = report.setdefault("length_policy", {})
    policy.setdefault("dropped_too_long", by_code.get("too_long", 0))
    policy.setdefault("trimmed_rows", 0)
    policy.setdefault("trimmed_messages", 0)
    sources = report["sources"]
    report["mix"] = mix_report({n: e["weight"] for n, e in sources.items()}, {n: e["read"] for n, e in sources.items()},
                               {n: e["rows_out"] for n, e in sources.items()}, report.get("mix", {}).get("seed", 0))
    report.setdefault("encoder", {"name": "test", "fallback_rows": 0})
    report.setdefault("shard", {"index": 0, "count": 1})
    report.setdefault("fingerprint_parts", {"options": {"num_shards": 1, "seed": report["mix"]["seed"]},
                                            "shard_index": 0})
    stats = TokenStats()
    stats.add(np.array([r["source"] for r in records]), np.array([r["num_tokens"] for r in records]),
              np.array([r["num_trained"] for r in records]))
    report["tokens"] = stats.to_json()
    report["files"] = file_digests(directory)
    return report


def sources_of(records: list[dict]) -> dict:
    """Per-source counts of ``records`` as prepare writes them: every row read, kept and written once."""
    counts = Counter(r["source"] for r in records)
    return {name: {"weight": 1.0, "read": n, "kept": n, "rejected": {}, "selected": n, "rows_out": n}
            for name, n in sorted(counts.items())}


def passed_verification(report: dict, note: str) -> dict:
    """A verify section that says a full verification of exactly the report's files passed (for
    tests that need a folder train accepts without running verify on it)."""
    from beam_sft.dataset_folder.load import recorded_digests
    from beam_sft.dataset_folder.report_json import content_digest

    return {"ok": True, "full": True, "sample": None, "verified_files": recorded_digests(report),
            "verified_report": content_digest(report),
            "max_length": (report.get("length_policy") or {}).get("max_length"), "note": note}
