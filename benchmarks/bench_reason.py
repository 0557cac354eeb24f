#!/usr/bin/env python
"""Does concurrency pay? ``beam-sft reason``'s requests/s against a local ``transformers serve``
(the fixture model unless ``--model``) at concurrency 1, 4 and 16, every request a fresh one (a new
cache folder per run: nothing comes from the cache). The server runs with ``--continuous-batching``
(concurrent requests share forward passes, as vLLM and SGLang do); ``--no-continuous-batching``
measures plain ``transformers serve``, which on a CPU generates for one request at a time.

    python benchmarks/bench_reason.py --rows 32 --max-tokens 16
    python benchmarks/bench_reason.py --base-url http://HOST:8000/v1 --model NAME   # any endpoint
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def rows(n: int) -> list[dict]:
    return [{"messages": [{"role": "user", "content": f"Question {i}: what is {i} + {i}?"},
                          {"role": "assistant", "content": str(2 * i)}]} for i in range(n)]


def measure(base_url: str, model: str, src: Path, concurrency: int, max_tokens: int, work: Path) -> dict:
    from beam_sft.convert.options import ConvertOptions
    from beam_sft.reason.config import TeacherConfig
    from beam_sft.reason.run import reason_files
    from beam_sft.timing import timed

    config = TeacherConfig(base_url=base_url, model=model, concurrency=concurrency, max_tokens=max_tokens,
                           cache_dir=str(work / f"cache-{concurrency}"), retries=0, timeout=600)
    with timed() as took:
        run = reason_files([src], config, options=ConvertOptions(missing_reasoning="unmask"), format="openai",
                           output=work / f"out-{concurrency}.jsonl", rejects=work / f"rej-{concurrency}.jsonl")
    seconds = took.phases["total"]
    return {"concurrency": concurrency, "requests": run.budget.requests, "seconds": round(seconds, 2),
            "requests_per_s": round(run.budget.requests / seconds, 2), "tokens": run.budget.tokens,
            "errors": run.budget.errors}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=48)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--base-url", help="an endpoint already serving (default: start transformers serve)")
    parser.add_argument("--model", help="the model to serve / ask (default: the fixture model)")
    parser.add_argument("--serve-arg", action="append", default=[], help="extra transformers serve flag")
    parser.add_argument("--no-continuous-batching", action="store_true", help="serve without continuous batching")
    args = parser.parse_args(argv)
    from beam_sft.reason.local_server import local_server

    with tempfile.TemporaryDirectory(prefix="bench-reason-") as tmp:
        work = Path(tmp)
        src = work / "rows.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in rows(args.rows)), encoding="utf-8")

        warm = work / "warm"
        warm.mkdir()
        (warm / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows(4)), encoding="utf-8")

        def run_all(base_url: str, model: str) -> list[dict]:
            measure(base_url, model, warm / "rows.jsonl", 1, args.max_tokens, warm)  # warm-up: first calls
            return [measure(base_url, model, src, c, args.max_tokens, work) for c in args.concurrency]

        if args.base_url:
            results = run_all(args.base_url, args.model)
        else:
            model = args.model
            if model is None:
                from beam_sft.harmony.fixture import build_fixture

                model = str(build_fixture(work / "fixture"))
            with local_server(model, log=work / "serve.log", extra_args=(*(() if args.no_continuous_batching else ("--continuous-batching",)), *args.serve_arg)) as server:
                results = run_all(server.base_url, server.model)
    base = results[0]["requests_per_s"]
    for r in results:
        r["speedup_vs_first"] = round(r["requests_per_s"] / base, 2) if base else None
    print(json.dumps({"rows": args.rows, "max_tokens": args.max_tokens,
                      "continuous_batching": not args.no_continuous_batching and not args.base_url,
                      "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
