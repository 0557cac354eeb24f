"""``make demo``: the main job end to end on the CPU (the logic lives in ``beam_sft/demo.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a fresh clone without installing

from beam_sft.demo import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
