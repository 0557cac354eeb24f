"""A prepared folder whose files changed since they were written is refused, naming the file: on a
cache hit (``prepare`` again), before training (``check_trainable``), and by ``load_prepared``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from beam_sft.dataset_folder import check_integrity, load_prepared, read_report
from beam_sft.errors import OutputRefused, PreflightError, PreparedError
from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
from beam_sft.train.data import check_trainable
from tests.encode.conftest import simple_row, write_jsonl


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, fixture_dir) -> tuple[Path, PrepareConfig]:
    root = tmp_path_factory.mktemp("integrity")
    rows = [simple_row(i) for i in range(6)] + [{"messages": [{"role": "user", "content": "no answer"}]}]
    data = write_jsonl(root / "rows.jsonl", rows)
    config = PrepareConfig(sources=[SourceSpec(path=str(data))], tokenizer=str(fixture_dir),
                           output=str(root / "out"), num_proc=1)
    return Path(prepare(config)), config


def _copy(pristine, tmp_path) -> tuple[Path, PrepareConfig]:
    out, config = pristine
    target = tmp_path / "out"
    shutil.copytree(out, target)
    return target, PrepareConfig(**{**config.__dict__, "output": str(target)})


def _arrow(directory: Path) -> Path:
    return sorted(directory.glob("data-*.arrow"))[0]


def _flip_bit(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-7])


def _edit_tokenizer(directory: Path) -> Path:
    path = directory / "tokenizer" / "tokenizer_config.json"
    config = json.loads(path.read_text())
    config["model_max_length"] = 12345
    path.write_text(json.dumps(config))
    return path


def _edit_rejects(directory: Path) -> Path:
    path = directory / "rejects.jsonl"
    path.write_text("")
    return path


CORRUPTIONS = {
    "bit-flipped arrow": lambda d: (_flip_bit(_arrow(d)), _arrow(d))[1],
    "truncated arrow": lambda d: (_truncate(_arrow(d)), _arrow(d))[1],
    "deleted arrow": lambda d: (p := _arrow(d), p.unlink(), p)[2],
    "edited tokenizer": _edit_tokenizer,
    "emptied rejects": _edit_rejects,
    "added file": lambda d: ((d / "tokenizer" / "extra.json").write_text("{}"), d / "tokenizer" / "extra.json")[1],
}


def test_the_report_records_every_file(pristine):
    out, _ = pristine
    files = read_report(out)["files"]
    assert files["algorithm"] == "sha256"
    names = set(files["files"])
    assert {"dataset_info.json", "state.json", "rejects.jsonl", "tokenizer/tokenizer.json"} <= names
    assert any(n.startswith("data-") and n.endswith(".arrow") for n in names)
    assert "report.json" not in names and "verify_violations.jsonl" not in names
    check_integrity(out)  # as written: fine
    check_trainable(out)


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_a_changed_file_is_refused_by_name(pristine, tmp_path, kind):
    directory, config = _copy(pristine, tmp_path)
    changed = CORRUPTIONS[kind](directory)
    # the cache hit checks the files before reuse; an added file is refused before that (a
    # folder holding a file no prepare wrote is never replaced)
    with pytest.raises(OutputRefused if kind == "added file" else PreparedError) as info:
        prepare(config)
    assert str(changed) in str(info.value)
    with pytest.raises(PreflightError, match=f"refusing to train: {changed}"):
        check_trainable(directory)
    with pytest.raises(PreparedError, match=str(changed)):
        load_prepared(directory)


def test_a_changed_file_can_be_trained_on_only_when_asked_loudly(pristine, tmp_path, caplog):
    directory, _ = _copy(pristine, tmp_path)
    _edit_rejects(directory)
    with caplog.at_level("WARNING", logger="beam_sft.train"):
        check_trainable(directory, allow_unverified=True)
    assert "NOT PROVEN" in caplog.text and "rejects.jsonl" in caplog.text
