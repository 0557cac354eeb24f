#!/usr/bin/env python
"""Benchmark `beam-sft prepare` against TRL's own dataset preparation and the tokenization floor.

    python scripts/bench_prepare.py --rows 2000            (`make bench`)
    python scripts/bench_prepare.py --rows 20000 --skip-fixture

The logic lives in beam_sft/encode/bench.py; its last line is
`ratio_vs_trl=<x> ratio_vs_floor=<y>` (rows/s of beam-sft divided by theirs).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from beam_sft.encode.bench import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
