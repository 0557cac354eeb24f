"""Several machines: two "machines" on localhost train exactly like one machine with two processes,
and the SLURM scripts launch what they should (rendered with a fake SLURM environment).

The SLURM tests run the real sbatch scripts with stub ``srun``/``scontrol``/``sbatch``/``accelerate``/
``beam-sft`` executables on PATH that print their argv, so they are cheap and default tier; the
localhost runs are slow tier (two ``accelerate launch`` processes, gloo).
"""

from __future__ import annotations

import os
import shlex
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from beam_sft.train.callbacks import read_losses

from .conftest import REPO_ROOT, recipe_dict

SLURM = REPO_ROOT / "scripts" / "slurm"


# ---------------------------------------------------------------- SLURM scripts, rendered

STUB_SRUN = r"""#!/bin/bash
# fake srun: drop srun's own options, run the command once per node (--ntasks-per-node=1)
args=("$@")
while [[ ${args[0]} == --* ]]; do args=("${args[@]:1}"); done
for ((i = 0; i < SLURM_NNODES; i++)); do
  SLURM_NODEID=$i SLURM_PROCID=$i SLURM_LOCALID=0 "${args[@]}"
done
"""
STUB_ECHO = """#!/bin/bash
echo "{name} $*"
"""
STUB_SCONTROL = """#!/bin/bash
# fake scontrol show hostnames
printf 'gpu-node-%s\\n' 007 008 009
"""
STUB_SBATCH = """#!/bin/bash
echo "sbatch $*" >> "$STUB_LOG"
echo 4242
"""


def _stubs(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    files = {"srun": STUB_SRUN, "scontrol": STUB_SCONTROL, "sbatch": STUB_SBATCH,
             "accelerate": STUB_ECHO.format(name="accelerate"), "beam-sft": STUB_ECHO.format(name="beam-sft")}
    for name, text in files.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def _run(script: str, args: list[str], tmp_path: Path, **env) -> list[str]:
    bin_dir = _stubs(tmp_path)
    full_env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path),
                "STUB_LOG": str(tmp_path / "sbatch.log"), **env}
    result = subprocess.run(["bash", str(SLURM / script), *args], cwd=REPO_ROOT, env=full_env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line.startswith(("accelerate ", "beam-sft "))]


def test_train_sbatch_launches_one_accelerate_per_node_with_slurm_rendezvous(tmp_path):
    env = {"SLURM_NNODES": "3", "SLURM_JOB_ID": "12345", "SLURM_JOB_NODELIST": "gpu-node-[007-009]",
           "SLURM_GPUS_ON_NODE": "8"}
    lines = _run("train.sbatch", ["recipes/beam-full-zero3.yaml", "--sft.learning_rate", "2e-5"], tmp_path, **env)
    assert len(lines) == 3, lines
    for rank, line in enumerate(lines):
        argv = shlex.split(line)
        assert argv[:2] == ["accelerate", "launch"]
        opts = dict(zip(argv[2::1], argv[3::1], strict=False))
        assert opts["--config_file"] == "configs/accelerate/multinode-zero3.yaml"
        assert opts["--num_machines"] == "3" and opts["--num_processes"] == "24"
        assert opts["--machine_rank"] == str(rank)
        assert opts["--main_process_ip"] == "gpu-node-007"
        assert opts["--main_process_port"] == str(29500 + 12345 % 1000)
        assert argv[-6:] == ["beam_sft", "train", "--config", "recipes/beam-full-zero3.yaml",
                             "--sft.learning_rate", "2e-5"]
        assert argv[-7] == "-m"


def test_train_sbatch_takes_the_fsdp2_config_and_refuses_outside_slurm(tmp_path):
    env = {"SLURM_NNODES": "2", "SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]", "GPUS_PER_NODE": "4",
           "ACCELERATE_CONFIG": "configs/accelerate/multinode-fsdp2.yaml", "MASTER_ADDR": "10.0.0.1"}
    lines = _run("train.sbatch", ["recipes/beam-lora.yaml"], tmp_path, **env)
    assert len(lines) == 2
    assert all("--config_file configs/accelerate/multinode-fsdp2.yaml" in line for line in lines)
    assert all("--num_processes 8 " in line and "--main_process_ip 10.0.0.1 " in line for line in lines)
    result = subprocess.run(["bash", str(SLURM / "train.sbatch"), "recipes/beam-lora.yaml"], cwd=REPO_ROOT,
                            env={"PATH": os.environ["PATH"]}, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "SLURM" in result.stderr


def test_prepare_sbatch_submits_an_array_then_a_dependent_merge(tmp_path):
    args = ["--num-shards", "4", "--output", "out/prepared/big", "--", "--config", "recipes/beam-lora.yaml"]
    _run("prepare.sbatch", args, tmp_path)
    submitted = (tmp_path / "sbatch.log").read_text().splitlines()
    assert len(submitted) == 2, submitted
    assert "--array=0-3" in submitted[0] and "--parsable" in submitted[0]
    assert "--dependency=afterok:4242" in submitted[1]
    assert "BEAM_PREPARE_STEP=merge" in submitted[1]

    lines = _run("prepare.sbatch", args, tmp_path, SLURM_ARRAY_TASK_ID="2", SLURM_ARRAY_JOB_ID="4242")
    assert lines == ["beam-sft prepare --config recipes/beam-lora.yaml --num-shards 4 --shard-index 2 "
                     "--output out/prepared/big.shards/shard-2"]
    lines = _run("prepare.sbatch", args, tmp_path, BEAM_PREPARE_STEP="merge")
    assert lines == ["beam-sft merge-shards " + " ".join(f"out/prepared/big.shards/shard-{i}" for i in range(4))
                     + " --output out/prepared/big"]


# ---------------------------------------------------------------- two machines on localhost

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(config: str, recipe: Path, extra: list[str]):
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
           str(REPO_ROOT / "configs" / "accelerate" / config), *extra, "-m", "beam_sft", "train",
           "--config", str(recipe)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc, timeout=900):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"launch failed:\n{out[-2000:]}\n{err[-5000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["zero3", "fsdp2"])
def test_two_machines_on_localhost_train_like_one(strategy, fixture_dir, prepared_dir, tmp_path):
    losses = {}
    for name in ("one", "two"):
        out = tmp_path / name
        data = recipe_dict(fixture_dir, prepared_dir, out)
        data["sft"].update({"use_cpu": True, "max_steps": 4})
        recipe = tmp_path / f"{name}.yaml"
        recipe.write_text(yaml.safe_dump(data))
        if name == "one":
            _finish(_launch(f"cpu-{strategy}.yaml", recipe, ["--main_process_port", str(_free_port())]))
        else:
            port = str(_free_port())
            procs = [_launch(f"cpu-multinode-{strategy}.yaml", recipe,
                             ["--num_machines", "2", "--num_processes", "2", "--machine_rank", str(rank),
                              "--main_process_ip", "127.0.0.1", "--main_process_port", port])
                     for rank in (0, 1)]
            for proc in procs:
                _finish(proc)
        losses[name] = {r["step"]: r["loss"] for r in read_losses(out)}
    assert sorted(losses["two"]) == [1, 2, 3, 4]
    for step in range(1, 5):
        assert losses["two"][step] == pytest.approx(losses["one"][step], rel=1e-6)


# ---------------------------------------------------------------- tensor / expert parallelism on gloo

# mode -> expected: the fraction of (all, expert) parameters a rank holds when it runs (logits equal the
# unsharded model's, backward and an AdamW step work), or the text of its refusal. Measured 2026-12-01.
PARALLEL_MODES = {
    "transformers tp_size=2 (llama)": (0.50, None),
    # gpt_oss's base_model_tp_plan shards only the embedding: the experts stay whole on every rank.
    "transformers tp_size=2 (gpt_oss)": (0.80, 1.0),
    "transformers ep_size=2 fsdp_size=2 (gpt_oss)": (0.50, 0.50),
    "transformers ep_size=2 tp_size=2 (gpt_oss)": (0.58, 0.50),  # experts split, attention whole
    "transformers fsdp_size=2 (gpt_oss)": (0.50, 0.50),
    "transformers ep_size=2 (gpt_oss)": "`ep_size` must divide `fsdp_size * tp_size`",
    "accelerate tp_size=2 (llama)": "got DistributedType.MULTI_CPU",
}


@pytest.fixture(scope="module")
def parallel_models(tmp_path_factory):
    out = tmp_path_factory.mktemp("parallel")
    subprocess.run([sys.executable, str(REPO_ROOT / "tests" / "train" / "parallel_probe.py"), str(out), "--build"],
                   check=True, capture_output=True, timeout=300)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(PARALLEL_MODES))
def test_what_tensor_and_expert_parallelism_do_on_gloo(mode, parallel_models):
    """What the pinned transformers' DistributedConfig and accelerate's ParallelismConfig do with 2 CPU
    processes over gloo (README, "Fine-tuning Beam", reports it); a change in either version shows here."""
    import json

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PROBE_MODE": mode,
           "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                    "--master_port", str(_free_port()), str(REPO_ROOT / "tests" / "train" / "parallel_probe.py"),
                    str(parallel_models)], env=env, capture_output=True, timeout=300, check=True)
    result = json.loads((parallel_models / f"results-{mode.replace(' ', '_')}.json").read_text())[mode]
    expected = PARALLEL_MODES[mode]
    if isinstance(expected, tuple):
        assert result["ok"] and result["backward"], result
        assert result["max_logit_diff"] < 1e-5
        assert result["held_fraction"] == pytest.approx(expected[0], abs=0.01), result
        if expected[1] is not None:
            assert result["expert_held_fraction"] == pytest.approx(expected[1], abs=0.01), result
    else:
        assert not result["ok"] and expected in result["error"], result
