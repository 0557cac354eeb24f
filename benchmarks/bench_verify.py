"""Time the encode phase of ``beam-sft prepare`` against ``beam-sft verify`` on the same folder.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_verify.py --rows 10000 \
        [--tokenizer .cache/gptoss-tokenizer/beam] [--work /tmp/bench-verify] [--num-proc N]

The rows are ``tests/verify/corpus_rows.py``'s (real public text, every row its own system prompt
and tool set; the same rows verify's differential tests render).

Both commands run as a user runs them (the CLI, all cores): ``prepare --no-verify`` first (its
report gives the encode phase), then ``verify``. The last line is
``verify_vs_encode=<verify seconds / encode-phase seconds>`` (verify's own phase, from inside the
command; ``verify_cli_vs_encode`` counts the whole command with its start-up).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the rows are the tests' own

from beam_sft.timing import timed  # noqa: E402
from tests.verify.corpus_rows import REALISTIC, bench_rows  # noqa: E402


def _run(argv: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with timed() as took:
        subprocess.run([sys.executable, "-m", "beam_sft", *argv], check=True, env=env, cwd=ROOT,
                       stdout=subprocess.DEVNULL)
    return took.phases["total"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokenizer", type=Path, default=None,
                        help="default: $BEAM_REALISTIC_TOKENIZER, .cache/gptoss-tokenizer/beam, else the fixture")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-verify"))
    parser.add_argument("--num-proc", type=int, default=None)
    parser.add_argument("--reuse", action="store_true", help="keep an existing prepared folder")
    args = parser.parse_args(argv)

    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    tokenizer = args.tokenizer or Path(os.environ.get("BEAM_REALISTIC_TOKENIZER") or REALISTIC)
    if not tokenizer.is_dir():
        from beam_sft.harmony.fixture import build_tokenizer

        tokenizer = work / "fixture-tokenizer"
        build_tokenizer().save_pretrained(tokenizer)
    data = work / f"rows-{args.rows}-{args.seed}.jsonl"
    if not data.is_file():
        with data.open("w", encoding="utf-8") as fh:
            for row in bench_rows(args.rows, args.seed):
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    prepared = work / "prepared"
    procs = ["--num-proc", str(args.num_proc)] if args.num_proc else []
    if not (args.reuse and (prepared / "report.json").is_file()):
        if prepared.exists():
            shutil.rmtree(prepared)
        _run(["prepare", "--data", str(data), "--tokenizer", str(tokenizer), "--output", str(prepared),
              "--no-verify", "--no-cache", *procs])
    report = json.loads((prepared / "report.json").read_text())
    encode = report["timing"]["phases"]["encode"]
    verify_cli = _run(["verify", str(prepared), "--no-histogram", *procs])
    report = json.loads((prepared / "report.json").read_text())
    section = report["verify"]
    verify = section.get("timing", {}).get("seconds", verify_cli)
    print(f"tokenizer {tokenizer}")
    print(f"rows {section['rows']}  tokens {section['tokens']}  ok {section['ok']}  "
          f"violations {section['violations']['total']}")
    print(f"encode phase {encode:.2f}s   verify {verify:.2f}s   verify command {verify_cli:.2f}s")
    print(f"verify_vs_encode={verify / encode:.3f} verify_cli_vs_encode={verify_cli / encode:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
