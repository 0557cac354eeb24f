"""`beam-sft eval` on the Beam fixture (transformers' real BeamForCausalLM, MoE): it loads, generates
and scores every turn (a random model: the figures are not the point, that every turn is scored is)."""

from __future__ import annotations

import json

import pytest

from beam_sft.cli import main

pytestmark = pytest.mark.slow


def test_local_eval_on_the_beam_fixture(tmp_path_factory, eval_prepared, tmp_path):
    from beam_sft.harmony.fixture import build_fixture

    beam = build_fixture(tmp_path_factory.mktemp("beam") / "beam", arch="beam")
    assert json.loads((beam / "config.json").read_text())["model_type"] == "beam"
    out = tmp_path / "eval.json"
    assert main(["eval", str(beam), "--data", str(eval_prepared), "--rows", "3", "--max-new-tokens", "8",
                 "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["run"]["turns"] == 4 == data["counts"]["format_valid"]["denominator"] == len(data["samples"])
    assert all(s["generated"] for s in data["samples"])
