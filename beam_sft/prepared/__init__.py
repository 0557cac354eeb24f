"""The old path of ``beam_sft.dataset_folder`` (the prepared-folder contract), kept for one release.

Importing it warns (``FutureWarning``) and gives the new package's names; its submodules keep their
old paths too (``beam_sft.prepared.layout`` is ``beam_sft.dataset_folder.layout``, the same module
object, and ``beam_sft.prepared.report`` is ``beam_sft.dataset_folder.report_json``).
"""

from __future__ import annotations

import sys
import warnings

from beam_sft.dataset_folder import (
    COLUMNS,
    REQUIRED_COLUMNS,
    arrow_dataset,
    build_report,
    check_counts,
    check_integrity,
    check_output_target,
    check_verified,
    features,
    file_digests,
    integrity,
    layout,
    load,
    load_prepared,
    load_tokenizer,
    lock,
    oserrors,
    output,
    owner,
    prepared_tokenizer,
    publish,
    read_report,
    reject_json,
    reject_line,
    rejects,
    report_json,
    require_report,
    save_tokenizer,
    staging_dir,
    tokenizer,
    update_report,
    write_report,
)

report = report_json  # the old name of the report.json module

__all__ = [  # the new package's __all__ (a test holds them equal)
    "COLUMNS", "REQUIRED_COLUMNS", "build_report", "check_counts", "check_integrity", "check_output_target", "check_verified",
    "features", "file_digests", "load_prepared", "load_tokenizer", "prepared_tokenizer", "publish",
    "read_report", "reject_json", "reject_line", "require_report", "save_tokenizer", "staging_dir",
    "update_report", "write_report",
]

# The old submodule paths name the new modules themselves (no second copy with its own state): the
# import system looks a submodule up in sys.modules once its package is imported, before any file.
SUBMODULES = {"arrow_dataset": arrow_dataset, "integrity": integrity, "layout": layout, "load": load, "lock": lock,
              "oserrors": oserrors, "output": output, "owner": owner, "rejects": rejects, "report": report_json,
              "tokenizer": tokenizer}
for _name, _module in SUBMODULES.items():
    sys.modules.setdefault(f"{__name__}.{_name}", _module)

warnings.warn("beam_sft.prepared is now beam_sft.dataset_folder (and its report module report_json); "
              "the old path goes in the next release", FutureWarning, stacklevel=2)
