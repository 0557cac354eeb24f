"""Verify a prepared dataset's masks before a run starts, and inspect single rows.

``verify_prepared(directory, *, num_proc=1, sample=None, ..., tokenizer=None, tokenizer_files=None)
-> VerifyResult`` checks every row
against the rules in ``invariants`` and the folder's counts against its report (``counts``), and
writes report.json's "verify" section (codes in ``RULE_CODES``; what runs on every row and what
on the parity sample is in the section's ``coverage``). Nothing here imports ``beam_sft.encode``:
an encoder bug cannot hide in code the two share. A caller that already holds the tokenizer
(prepare) passes it as ``tokenizer``; it is used only once proven to be DIR/tokenizer's
(``caller_tokenizer``).
"""

from beam_sft.verify.api import VerifyResult, inspect_row, verify_prepared
from beam_sft.verify.context import Violation
from beam_sft.verify.invariants import RULE_CODES

__all__ = ["RULE_CODES", "VerifyResult", "Violation", "inspect_row", "verify_prepared"]
