"""Verify a prepared dataset's masks before a run starts, and inspect single rows.

``verify_prepared(directory, *, num_proc=1, sample=None) -> VerifyResult`` checks every row against
the rules in ``invariants`` (codes in ``RULE_CODES``) and writes report.json's "verify" section.
"""

from beam_sft.verify.api import VerifyResult, inspect_row, verify_prepared
from beam_sft.verify.context import Violation
from beam_sft.verify.invariants import RULE_CODES

__all__ = ["RULE_CODES", "VerifyResult", "Violation", "inspect_row", "verify_prepared"]
