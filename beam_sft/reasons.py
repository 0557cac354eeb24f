"""The old path of ``beam_sft.reject_codes`` (the one table of reject reason codes), kept for one
release: it re-exports that module's names and warns (``FutureWarning``) when imported.
``python -m beam_sft.reasons --markdown`` still prints the table."""

from __future__ import annotations

import warnings

from beam_sft.reject_codes import REASON_CODES, REASONS, STAGES, Reason, codes, main, markdown

__all__ = ["REASONS", "REASON_CODES", "STAGES", "Reason", "codes", "main", "markdown"]

warnings.warn("beam_sft.reasons is now beam_sft.reject_codes; the old path goes in the next release",
              FutureWarning, stacklevel=2)

if __name__ == "__main__":
    raise SystemExit(main())
