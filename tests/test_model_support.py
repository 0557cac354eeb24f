"""Which transformers a Beam checkpoint needs, said before anything fails inside it.

The absence of ``transformers.models.beam`` is simulated (``sys.modules`` entry set to None, which is
how Python marks a module that cannot be imported), not installed: the pinned transformers ships it.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from beam_sft.model_support import FIRST_RELEASE, TESTED, missing_support, model_type_at

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def without_beam(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers.models.beam", None)


@pytest.fixture
def beam_checkpoint(fixture_dir, tmp_path):
    """The fixture's tokenizer beside a config.json that says model_type "beam"."""
    out = tmp_path / "beam-ckpt"
    shutil.copytree(fixture_dir, out)
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "model_type": "beam"}))
    return out


def test_the_floor_is_the_first_release_with_beam():
    """pyproject's transformers range starts at or after the release that first shipped
    models/beam/, the install line names that range, and the pinned install is in it (so nothing
    below is said on a supported install)."""
    from importlib.metadata import version

    from packaging.requirements import Requirement
    from packaging.version import Version

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    spec = next(Requirement(d) for d in deps if Requirement(d).name == "transformers").specifier
    first = Version(FIRST_RELEASE["beam"][0])
    assert Version("5.20.0") not in spec and all(Version(s.version) >= first for s in spec if ">" in s.operator)
    assert Requirement(TESTED).specifier == spec
    assert Version(version("transformers")) in spec
    assert missing_support("beam") is None and missing_support("llama") is None


def test_missing_beam_is_named_with_the_release(without_beam):
    line = missing_support("beam")
    assert line and "transformers>=5.21.0" in line and f"pip install '{TESTED}'" in line and "transformers.models.beam" in line and "\n" not in line
    assert missing_support("llama") is None and missing_support(None) is None


def test_model_type_at(beam_checkpoint, tmp_path):
    assert model_type_at(beam_checkpoint) == "beam"
    assert model_type_at(beam_checkpoint / "config.json") == "beam"
    (tmp_path / "list.json").write_text("[1]")
    assert model_type_at(tmp_path / "list.json") is None
    assert model_type_at(tmp_path / "nowhere") is None and model_type_at("org/some-hub-id") is None


def test_plan_says_which_transformers(without_beam, beam_checkpoint, capsys):
    from beam_sft.cli import main

    assert main(["plan", "--model", str(beam_checkpoint)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs transformers>=5.21.0" in err, err


def test_check_tokenizer_says_which_transformers(without_beam, beam_checkpoint, capsys):
    from beam_sft.cli import main

    code = main(["check-tokenizer", str(beam_checkpoint)])
    out, err = capsys.readouterr()
    assert code in (1, 2), (out, err)  # a problem listed (the tokenizer read), or it could not load at all
    assert "needs transformers>=5.21.0" in out + err, (out, err)


def test_check_tokenizer_is_silent_when_beam_is_there(beam_checkpoint, capsys):
    from beam_sft.cli import main

    assert main(["check-tokenizer", str(beam_checkpoint)]) == 0
    assert "transformers>=" not in capsys.readouterr().out


def test_preflight_says_which_transformers(without_beam, beam_checkpoint, tokenizer):
    from beam_sft.errors import PreflightError
    from beam_sft.train.preflight import check_model_tokenizer

    with pytest.raises(PreflightError, match=r"needs transformers>=5\.21\.0"):
        check_model_tokenizer(str(beam_checkpoint), tokenizer)
