#!/usr/bin/env python
"""Do the fast renderer's shortcuts pay? Encode the same rows three ways, one process (fixture
tokenizer unless ``--tokenizer``), best of ``--repeat`` runs: ``native`` (Beam's template in Python,
``encode/fast/native.py``: the default), ``memo`` (the memoised Jinja render, what any other template
gets) and ``no_memo`` (transformers' own render).

    python benchmarks/bench_render_memo.py --rows 2000 [--row-set realtext] [--tokenizer DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--tokenizer", default=None)
    parser.add_argument("--unique-tools", action="store_true", help="rename every tool per row (no repeats)")
    parser.add_argument("--row-set", choices=("synthetic", "realtext"), default="synthetic")
    args = parser.parse_args(argv)
    from beam_sft.data.synthetic import synthetic_rows
    from beam_sft.dataset_folder.tokenizer import load_tokenizer
    from beam_sft.encode.fast.encoder import FastEncoder
    from beam_sft.harmony.fixture import build_tokenizer

    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else build_tokenizer()
    if args.row_set == "realtext":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from realtext import real_text_rows

        rows = [json.loads(json.dumps(r)) for r in real_text_rows(args.rows, seed=0)]
    else:
        rows = [json.loads(json.dumps(r)) for r in synthetic_rows(args.rows, seed=0)]
    if args.unique_tools:
        for i, row in enumerate(rows):
            for tool in row.get("tools") or ():
                tool["function"]["description"] = f"{tool['function'].get('description', '')} (variant {i})"
    result = {}
    modes = {"native": {}, "memo": {"native_render": False}, "no_memo": {"memo_render": False}}
    for mode, options in modes.items():
        best = None
        for _ in range(args.repeat):
            encoder = FastEncoder(tokenizer, **options)
            start = time.perf_counter()
            for i in range(0, len(rows), 128):
                encoder.encode_batch(rows[i:i + 128], plain=True)
            seconds = time.perf_counter() - start
            best = seconds if best is None else min(best, seconds)
        result[mode] = round(best, 3)
    result["memo_speedup"] = round(result["no_memo"] / result["memo"], 2)
    result["native_speedup"] = round(result["no_memo"] / result["native"], 2)
    print(json.dumps({"rows": args.rows, "row_set": args.row_set, "unique_tools": args.unique_tools, **result}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
