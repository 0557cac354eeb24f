"""Beam's own architecture (the ``beam`` fixture) under every launcher, 2 CPU processes through
``accelerate launch`` (slow tier).

- DDP and ZeRO-2 train a few steps, with no aux loss, the routers float32 after wrapping and the
  correction biases unchanged (beam_run.json).
- ZeRO-3 + LoRA (attention, output gate, dense MLP and experts: beam-attention-mlp): the loss falls,
  the adapter is gathered from the shards, resumes with the losses of the uninterrupted run, and
  `beam-sft merge` gives a folder whose logits equal the trained adapter's, its correction biases
  bit for bit the base's. FSDP2 (and ZeRO-3) full fine-tunes, sharded save, export and resume:
  tests/train/test_export.py (``beam-*`` runs).
- Disjoint routing (rank r -> experts 2r, 2r+1) under ZeRO-3 and FSDP2 finishes; a timeout fails it.
- A stopped rank (SIGSTOP) is named within the pre-flight timeout, not waited on for 30 minutes.

Each launch runs 2-4 steps on 16-48 short rows: about 30-90 s on 2 shared cores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
import yaml

from beam_sft.train.callbacks import read_losses

from .conftest import REPO_ROOT, recipe_dict
from .moe_support import assert_beam_routers_kept

pytestmark = pytest.mark.slow

ATTN = {"beam": "sdpa", "gpt_oss": "eager", "deepseek_v3": "sdpa"}
LAUNCH_TIMEOUT = 420  # seconds: a hang fails the test instead of blocking the suite


def _recipe(tmp_path, model_dir, prepared, out, arch, name="recipe.yaml", **sections):
    sft = {"use_cpu": True, "max_steps": 4, "save_strategy": "steps", "save_steps": 2, **sections.pop("sft", {})}
    data = recipe_dict(model_dir, prepared, out, model={"attn_implementation": ATTN[arch]}, sft=sft, **sections)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def free_port() -> int:
    """A free TCP port for the rendezvous: the configs' static default (29500) is shared by every
    launch on the machine, and two launches on one port join each other's process group."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _launch_cmd(config: str, target: list[str], args: list[str]) -> list[str]:
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
            str(REPO_ROOT / "configs" / "accelerate" / config), "--main_process_port", str(free_port()),
            *target, *args]


def _kill_all(proc) -> None:
    """The launcher and its workers (torchrun may put them in a session of their own)."""
    for pid in _rank_pids(proc.pid).values():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def _launch(config: str, args: list[str], *, script: str | None = None, env: dict | None = None,
            timeout: int = LAUNCH_TIMEOUT):
    """accelerate launch in its own session, on a free port; on timeout every process is killed."""
    target = [script] if script else ["-m", "beam_sft", "train"]
    cmd = _launch_cmd(config, target, args)
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
                "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_all(proc)
        pytest.fail(f"launch did not finish within {timeout}s (a hang): {' '.join(cmd)}")
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def _ok(result):
    assert result.returncode == 0, f"launch failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"


def _losses(out):
    return {r["step"]: r for r in read_losses(out)}


@pytest.mark.parametrize(("config", "kind"), [("cpu-ddp.yaml", "MULTI_CPU"), ("cpu-zero2.yaml", "DEEPSPEED")],
                         ids=["ddp", "zero2"])
def test_beam_trains_under_ddp_and_zero2(config, kind, moe_dirs, prepared_dir, tmp_path):
    out = tmp_path / "out"
    recipe = _recipe(tmp_path, moe_dirs["beam"], prepared_dir, out, "beam", sft={"max_steps": 3, "save_strategy": "no"})
    _ok(_launch(config, ["--config", str(recipe)]))
    meta = json.loads((out / "beam_run.json").read_text())
    assert meta["distributed"]["type"] == kind and meta["distributed"]["num_processes"] == 2
    losses = _losses(out)
    assert sorted(losses) == [1, 2, 3] and not [r for r in losses.values() if "aux_loss" in r]
    assert_beam_routers_kept(moe_dirs["beam"], out, trained=True, run=out)  # saved whole under DDP and ZeRO-2


def test_zero3_lora_on_beam_saves_resumes_and_merges(moe_dirs, prepared_dir, tmp_path):
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    model_dir = moe_dirs["beam"]
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "experts": True, "target_modules": "beam-attention-mlp"}
    recipe = _recipe(tmp_path, model_dir, prepared_dir, whole, "beam", lora=lora, sft={"learning_rate": 1e-2})
    _ok(_launch("cpu-zero3.yaml", ["--config", str(recipe)]))
    meta = json.loads((whole / "beam_run.json").read_text())
    assert meta["distributed"]["type"] == "DEEPSPEED" and meta["distributed"]["zero_stage"] == 3
    losses = _losses(whole)
    assert sorted(losses) == [1, 2, 3, 4] and losses[4]["loss"] < losses[1]["loss"]

    weights = load_file(whole / "adapter_model.safetensors")  # gathered from the ZeRO-3 shards
    experts = [v for k, v in weights.items() if ".experts." in k and "lora_B" in k]
    assert experts and all(v.numel() > 0 and float(v.abs().max()) > 0 for v in experts)
    assert [k for k in weights if ".self_attn.gate_proj." in k] and [k for k in weights if ".layers.0.mlp." in k]
    assert not [k for k in weights if ".mlp.gate." in k], "routers stay frozen"

    _ok(_launch("cpu-zero3.yaml", ["--config", str(recipe), "--sft.output_dir", str(resumed),
                                   "--sft.resume_from_checkpoint", str(whole / "checkpoint-2")]))
    again = _losses(resumed)
    assert sorted(again) == [3, 4]
    for step in (3, 4):
        assert again[step]["loss"] == pytest.approx(losses[step]["loss"], rel=1e-4)

    from beam_sft.train.merge import merge_adapter

    merged = merge_adapter(whole, tmp_path / "merged")
    ids = torch.tensor([[5, 17, 300, 42, 9, 100] * 6])  # longer than the sliding window
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), str(whole)).eval()
    with torch.no_grad():
        want = adapted(ids).logits
        got = AutoModelForCausalLM.from_pretrained(merged).eval()(ids).logits
        base = AutoModelForCausalLM.from_pretrained(model_dir).eval()(ids).logits
    assert torch.allclose(got, want, atol=1e-4) and not torch.allclose(got, base, atol=1e-4)
    assert_beam_routers_kept(model_dir, merged, trained=False, run=whole)  # frozen routers, biases as loaded


@pytest.mark.parametrize("config", ["cpu-zero3.yaml", "cpu-fsdp2.yaml"], ids=["zero3", "fsdp2"])
def test_disjoint_routing_never_deadlocks(config, moe_dirs, prepared_dir, tmp_path):
    out, routing = tmp_path / "out", tmp_path / "routing"
    recipe = _recipe(tmp_path, moe_dirs["beam"], prepared_dir, out, "beam", sft={"max_steps": 2, "save_strategy": "no"})
    _ok(_launch(config, ["--config", str(recipe)], script=str(Path(__file__).with_name("disjoint_routing.py")),
                env={"BEAM_ROUTING_DIR": str(routing)}, timeout=LAUNCH_TIMEOUT))
    used = [set(json.loads((routing / f"rank{r}.json").read_text())) for r in (0, 1)]
    assert used == [{0, 1}, {2, 3}], "each rank routed only to its own experts"
    assert sorted(_losses(out)) == [1, 2]


def _rank_pids(root: int) -> dict[int, int]:
    """RANK -> pid of the training processes below ``root`` (read from /proc; torchrun may give its
    workers a session of their own, so follow parent ids)."""
    parents, found = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    for pid in parents:
        ancestor, depth = parents.get(pid), 0
        while ancestor not in (None, 0, 1, root) and depth < 8:
            ancestor, depth = parents.get(ancestor), depth + 1
        if ancestor != root:
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        ranks = [v.split(b"=", 1)[1] for v in environ if v.startswith(b"RANK=")]
        if ranks and b"beam_sft" in cmdline:
            found[int(ranks[0])] = pid
    return found


def test_a_stopped_rank_is_named_within_the_preflight_timeout(fixture_dir, prepared_dir, tmp_path):
    out = tmp_path / "out"
    data = recipe_dict(fixture_dir, prepared_dir, out, sft={"use_cpu": True, "max_steps": 2, "save_strategy": "no"},
                       preflight={"timeout": 10})
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(data))
    cmd = _launch_cmd("cpu-ddp.yaml", ["-m", "beam_sft", "train"], ["--config", str(recipe)])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    lines: list[str] = []
    named = threading.Event()

    def read_stderr():
        for line in proc.stderr:
            lines.append(line)
            if "rank(s) 1 did not answer" in line:
                named.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    stopped = None
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            pids = _rank_pids(proc.pid)
            if 1 in pids and (out / "prepared_view").is_dir():  # rank 1 got past the group's set-up
                stopped = pids[1]
                os.kill(stopped, signal.SIGSTOP)
                break
            time.sleep(0.05)
        assert stopped is not None, f"rank 1 never started: {''.join(lines)[-3000:]}"
        started = time.monotonic()
        assert named.wait(200), f"rank 1 not named 200 s after it stopped: {''.join(lines)[-4000:]}"
        assert time.monotonic() - started < 200
        # Rank 0 has failed; the launcher now terminates rank 1, which a stopped process takes only once
        # it runs again (else torch's launcher waits a fixed 30 s before SIGKILL: its grace, not ours).
        os.kill(stopped, signal.SIGCONT)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("the job did not end after rank 0 named the stopped rank")
        reader.join(timeout=10)
        assert proc.returncode != 0
    finally:
        if stopped is not None:
            try:
                os.kill(stopped, signal.SIGCONT)
            except ProcessLookupError:
                pass
        if proc.poll() is None:
            _kill_all(proc)
