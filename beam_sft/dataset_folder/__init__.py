"""The contract of a prepared folder, in one place: what ``prepare`` and ``merge-shards`` write and
``verify``, ``inspect`` and ``train`` read (see ``layout`` for the files and columns).

- ``layout``: file names, ``COLUMNS`` / ``REQUIRED_COLUMNS`` and their ``features()``;
- ``load_prepared(DIR)``: the dataset, after checking report, digests, columns (and verification);
- ``load_tokenizer(name)`` / ``prepared_tokenizer(DIR)`` / ``save_tokenizer``: the one tokenizer path;
- ``read_report`` / ``write_report`` (atomic) / ``update_report`` / ``build_report``: report.json;
- ``file_digests`` / ``check_integrity``: the files' sizes and SHA-256, recorded and checked;
- ``reject_line`` / ``reject_json``: a rejects.jsonl line (the one writer, surrogate-safe);
- ``check_output_target`` / ``staging_dir`` / ``publish``: writing a folder without harm.
"""

from beam_sft.dataset_folder.integrity import check_integrity, file_digests
from beam_sft.dataset_folder.layout import COLUMNS, REQUIRED_COLUMNS, features
from beam_sft.dataset_folder.load import check_counts, check_verified, load_prepared
from beam_sft.dataset_folder.output import check_output_target, publish, staging_dir
from beam_sft.dataset_folder.rejects import reject_json, reject_line
from beam_sft.dataset_folder.report_json import (
    build_report,
    read_report,
    require_report,
    update_report,
    write_report,
)
from beam_sft.dataset_folder.tokenizer import load_tokenizer, prepared_tokenizer, save_tokenizer

__all__ = [
    "COLUMNS", "REQUIRED_COLUMNS", "build_report", "check_counts", "check_integrity", "check_output_target", "check_verified",
    "features", "file_digests", "load_prepared", "load_tokenizer", "prepared_tokenizer", "publish",
    "read_report", "reject_json", "reject_line", "require_report", "save_tokenizer", "staging_dir",
    "update_report", "write_report",
]
