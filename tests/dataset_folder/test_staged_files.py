"""``staged_folder``: the whole-folder outputs of ``merge`` and ``export``, published only when complete."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from beam_sft.dataset_folder.staged_files import staged_folder


def test_a_new_folder_gets_the_mode_a_folder_made_now_gets(tmp_path):
    """mkdtemp makes 0700: a merged model would be hidden from the cluster's other users."""
    old = os.umask(0o022)
    try:
        with staged_folder(tmp_path / "out", "merging") as staging:
            (staging / "model.safetensors").write_bytes(b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o755
    assert (tmp_path / "out" / "model.safetensors").read_bytes() == b"x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_an_existing_empty_folder_is_kept_with_its_mode_even_the_working_folder(tmp_path, monkeypatch):
    """``-o .`` failed at the end (rmdir of the working folder); a user's empty folder was replaced,
    losing its mode (and owner, ACLs)."""
    mine = tmp_path / "mine"
    mine.mkdir()
    os.chmod(mine, 0o750)
    inode = mine.stat().st_ino
    with staged_folder(mine) as staging:
        (staging / "config.json").write_text("{}")
        (staging / "sub").mkdir()
    assert mine.stat().st_ino == inode and stat.S_IMODE(mine.stat().st_mode) == 0o750
    assert sorted(p.name for p in mine.iterdir()) == ["config.json", "sub"]
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    with staged_folder(Path(".")) as staging:
        (staging / "a.txt").write_text("a")
    assert (here / "a.txt").read_text() == "a" and sorted(p.name for p in here.iterdir()) == ["a.txt"]


def test_a_failure_leaves_nothing(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    for final in (tmp_path / "new", mine):
        with pytest.raises(RuntimeError):
            with staged_folder(final) as staging:
                (staging / "half.bin").write_bytes(b"x")
                raise RuntimeError("the load failed")
    assert not (tmp_path / "new").exists() and list(mine.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]
