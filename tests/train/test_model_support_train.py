"""`beam-sft train` says which transformers a Beam checkpoint needs with the pre-flight off too
(the pre-flight's own check is in tests/test_model_support.py); absence simulated, not installed."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from .conftest import recipe_dict


def test_train_without_preflight_says_which_transformers(fixture_dir, prepared_dir, tmp_path, monkeypatch):
    from beam_sft.errors import BeamError
    from beam_sft.train.recipe import recipe_from_dict
    from beam_sft.train.trainer import build

    model = tmp_path / "beam-ckpt"
    shutil.copytree(fixture_dir, model)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "model_type": "beam"}))
    monkeypatch.setitem(sys.modules, "transformers.models.beam", None)
    recipe = recipe_from_dict(recipe_dict(model, prepared_dir, tmp_path / "out", preflight={"enabled": False}))
    with pytest.raises(BeamError, match=r"needs transformers>=5\.21\.0"):
        build(recipe)
