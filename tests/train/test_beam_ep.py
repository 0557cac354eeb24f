"""Expert parallelism on Beam's own model code, as far as 2 CPU processes (gloo) show it (issue 21 item 8).

``tests/train/beam_ep_probe.py`` loads a tiny ``BeamForCausalLM`` (one dense layer, three sparse of 8
experts top-2 in 2 groups, sliding layers with RoPE and a full NoPE layer, the output gate, the soft
cap) with ``from_pretrained(..., distributed_config=DistributedConfig(...))`` in several modes, each
rank feeding its own batch where the mode is data-parallel, and compares the logits before and after
one AdamW step with the unsharded model's (the step on the mean of both ranks' losses). What it pins
(transformers 5.24, torch 2.13, measured 2026-12-01) is in the README's "Fine-tuning Beam"; a change in
either shows here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import REPO_ROOT
from .test_multinode import _free_port

PROBE = REPO_ROOT / "tests" / "train" / "beam_ep_probe.py"

# mode -> (fraction of all parameters a rank holds, of the expert parameters), or the refusal's text
# and where transformers raises it.
EXPECTED = {
    # Experts split over the EP group of 2 (4 of 8 each), the rest FSDP-sharded; tokens exchanged by
    # all-to-all (what "auto" picks when the ranks see different batches).
    "ep_size=2 fsdp_size=2": (0.50, 0.50),
    "ep_size=2 fsdp_size=2 all_to_all": (0.50, 0.50),
    # Experts split, attention tensor-parallel (Beam's base_model_tp_plan), norms and router whole.
    "ep_size=2 tp_size=2": (0.50, 0.50),
    "fsdp_size=2": (0.50, 0.50),
    "tp_size=2": (0.50, 0.50),
    "ep_size=2": ("`ep_size` must divide `fsdp_size * tp_size`", "transformers/distributed/configuration_utils.py"),
}


@pytest.fixture(scope="module")
def beam_ep_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("beam-ep")
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    subprocess.run([sys.executable, str(PROBE), str(out), "--build"], env=env, check=True, capture_output=True,
                   timeout=300)
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                          str(_free_port()), str(PROBE), str(out)], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads((out / "results.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(EXPECTED))
def test_expert_parallelism_on_beam(mode, beam_ep_results):
    result = beam_ep_results[mode]
    expected = EXPECTED[mode]
    if isinstance(expected[0], float):
        assert result["ok"] and result["backward"], result
        assert result["max_logit_diff"] < 1e-5, result  # the unsharded logits, every rank's batch
        assert result["max_logit_diff_after_step"] < 1e-4, result  # and after backward + AdamW
        assert result["router_dtype"] == "torch.float32", result  # _keep_in_fp32_modules_strict survives
        assert result["held_fraction"] == pytest.approx(expected[0], abs=0.01), result
        assert result["expert_held_fraction"] == pytest.approx(expected[1], abs=0.01), result
    else:
        assert not result["ok"] and expected[0] in result["error"], result
        assert result["where"].startswith(expected[1]), result
