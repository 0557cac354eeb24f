"""``beam-sft export``: sharded checkpoints -> from_pretrained folders whose logits equal the model's.

Default tier: a DCP (FSDP ``SHARDED_STATE_DICT`` layout) checkpoint written in one process, for the
dense fixture and for gpt_oss / deepseek_v3 configs built here, exported in several small shards; a
bf16 export of the Beam fixture keeps its routers float32 bit for bit.
Slow tier: real 2-process ZeRO-3 and FSDP2 full fine-tunes of the dense and the Beam fixture save
sharded, resume with the same losses, and export to a folder whose logits equal the trained model's
(Beam: correction biases bit for bit the base's, routers float32 after wrapping).
"""

from __future__ import annotations

import json

import pytest
import torch

from beam_sft.errors import BeamError, OutputRefused
from beam_sft.train.export import FSDP_DIR, checkpoint_format, export_checkpoint, parse_size, plan_shards

from .test_plan import tiny_deepseek_v3, tiny_gpt_oss

IDS = torch.tensor([[5, 17, 300, 42, 7, 99, 3, 250]])


def _logits(model):
    model.eval()
    with torch.no_grad():
        return model(IDS).logits


def write_dcp(model, folder):
    """What accelerate's save_fsdp_model writes with SHARDED_STATE_DICT, from one process."""
    import torch.distributed.checkpoint as dcp

    folder.mkdir(parents=True, exist_ok=True)
    model.config.save_pretrained(str(folder))
    dcp.save({"model": model.state_dict()}, storage_writer=dcp.FileSystemWriter(str(folder / FSDP_DIR)),
             no_dist=True)
    return folder


def _tiny_model(arch, fixture_dir):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    if arch == "llama":
        return AutoModelForCausalLM.from_pretrained(fixture_dir)
    return AutoModelForCausalLM.from_config({"gpt_oss": tiny_gpt_oss, "deepseek_v3": tiny_deepseek_v3}[arch]())


@pytest.mark.parametrize("arch", ["llama", "gpt_oss", "deepseek_v3"])
def test_export_dcp_in_small_shards_gives_the_same_logits(arch, fixture_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    model = _tiny_model(arch, fixture_dir)
    with torch.no_grad():  # move off the init values so a reader that returns zeros/init would fail
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    checkpoint = write_dcp(model, tmp_path / "ckpt")
    assert checkpoint_format(checkpoint) == "fsdp"
    out = export_checkpoint(checkpoint, tmp_path / "exported", dtype="float32", max_shard_bytes=64_000)
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 2, "several shards"
    exported = AutoModelForCausalLM.from_pretrained(out)
    assert torch.equal(_logits(exported), _logits(model))


def test_a_bf16_export_keeps_beams_routers_float32_bit_for_bit(moe_dirs, tmp_path):
    """Exported in bfloat16, Beam's router weights and e_score_correction_bias stay float32 and equal to
    the checkpoint's (the model keeps them fp32: _keep_in_fp32_modules_strict); the rest is bf16."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(moe_dirs["beam"])
    out = export_checkpoint(write_dcp(model, tmp_path / "ckpt"), tmp_path / "exported", dtype="bfloat16")
    saved, state = load_file(out / "model.safetensors"), model.state_dict()
    routers = [k for k in saved if k.endswith((".mlp.gate.weight", ".mlp.gate.e_score_correction_bias"))]
    assert len(routers) == 10
    for key in routers:
        assert saved[key].dtype == torch.float32 and torch.equal(saved[key], state[key]), key
    assert saved["model.layers.1.mlp.experts.0.gate_proj.weight"].dtype == torch.bfloat16  # the released layout
    assert saved["model.layers.0.self_attn.gate_proj.weight"].dtype == torch.bfloat16


def tiny_beam():
    from transformers import BeamConfig

    return BeamConfig(vocab_size=256, hidden_size=32, intermediate_size=64, moe_intermediate_size=16, head_dim=8,
                      num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, num_experts=4,
                      num_experts_per_tok=2, n_group=2, topk_group=1, mlp_layer_types=["dense", "sparse", "sparse"],
                      tie_word_embeddings=False)


@pytest.mark.parametrize("arch", ["beam", "deepseek_v3", "gpt_oss", "llama"])
def test_export_writes_what_save_pretrained_writes(arch, fixture_dir, tmp_path):
    """The export's tensors are save_pretrained's, by name and value: for Beam (and every MoE whose
    experts transformers fuses on load) the released per-expert layout (``mlp.experts.0.gate_proj.weight``),
    not the in-memory fused ``mlp.experts.gate_up_proj``, which serving engines do not read. The
    index names the written tensors and their bytes, and the shard size holds for them."""
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    from .moe_support import safetensors_in

    if arch == "beam":
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(tiny_beam())
    else:
        model = _tiny_model(arch, fixture_dir)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    quarter = sum(p.numel() * p.element_size() for p in model.parameters()) // 4  # a few shards (each costs a gc)
    out = export_checkpoint(write_dcp(model, tmp_path / "ckpt"), tmp_path / "exported", dtype="float32",
                            max_shard_bytes=quarter)
    model.save_pretrained(tmp_path / "saved")
    exported, saved = safetensors_in(out), safetensors_in(tmp_path / "saved")
    assert sorted(exported) == sorted(saved)
    for name, tensor in saved.items():
        assert exported[name].dtype == tensor.dtype and torch.equal(exported[name], tensor), name
    if arch in ("beam", "deepseek_v3"):
        assert "model.layers.1.mlp.experts.3.gate_proj.weight" in exported
        assert not [n for n in exported if n.endswith(("experts.gate_up_proj", "experts.down_proj"))]

    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 2, "several shards"
    assert sorted(index["weight_map"]) == sorted(exported)
    written = 0
    for file in sorted(set(index["weight_map"].values())):
        with safe_open(str(out / file), "pt") as handle:
            assert sorted(handle.keys()) == sorted(n for n, f in index["weight_map"].items() if f == file)
            written += sum(handle.get_tensor(n).numel() * handle.get_tensor(n).element_size() for n in handle.keys())
    assert index["metadata"]["total_size"] == written
    assert index["metadata"]["total_parameters"] == model.num_parameters()  # as save_pretrained's index says
    sizes = {}
    for name, file in index["weight_map"].items():
        sizes.setdefault(file, []).append(exported[name].numel() * exported[name].element_size())
    assert all(sum(s) <= quarter or len(s) == 1 for s in sizes.values()), "--max-shard-size holds for what is written"
    if arch == "beam":  # one fused gate_up_proj (read and split once) is written across two shards
        assert any(len({index["weight_map"][f"model.layers.{layer}.mlp.experts.{e}.{proj}_proj.weight"]
                        for e in range(4) for proj in ("gate", "up")}) > 1 for layer in (1, 2))

    reloaded = AutoModelForCausalLM.from_pretrained(out).state_dict()
    for name, tensor in model.state_dict().items():
        assert torch.equal(reloaded[name], tensor), name


def test_export_refuses_what_it_must(fixture_dir, tmp_path):
    model = _tiny_model("llama", fixture_dir)
    checkpoint = write_dcp(model, tmp_path / "ckpt")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine.txt").write_text("the user's file")
    with pytest.raises(OutputRefused):
        export_checkpoint(checkpoint, taken)
    assert (taken / "mine.txt").read_text() == "the user's file"
    with pytest.raises(BeamError, match="no sharded checkpoint"):
        export_checkpoint(fixture_dir, tmp_path / "x")
    other = tmp_path / "other"  # a config that does not match the checkpoint
    _tiny_model("gpt_oss", fixture_dir).config.save_pretrained(str(other))
    with pytest.raises(BeamError, match="disagree"):
        export_checkpoint(checkpoint, tmp_path / "y", config=other)
    # a damaged shard file: one error naming the checkpoint, and no half-written -o left to block a retry
    (shard,) = sorted((checkpoint / FSDP_DIR).glob("*.distcp"))[:1]
    shard.write_bytes(shard.read_bytes()[:1000])
    with pytest.raises(BeamError, match="a shard of the checkpoint does not read"):
        export_checkpoint(checkpoint, tmp_path / "z", max_shard_bytes=64_000)
    assert not (tmp_path / "z").exists() and not list(tmp_path.glob(".z.*"))


def test_sizes_and_shard_plan():
    assert parse_size("5GB") == 5 * 10**9 and parse_size("200MiB") == 200 * 2**20 and parse_size("10") == 10
    for bad in ("lots", "0.5", "1" + "0" * 400 + "GB", "2000TiB"):  # 1e400GB was an OverflowError traceback
        with pytest.raises(BeamError, match="--max-shard-size"):
            parse_size(bad)
    assert plan_shards({"a": 6, "b": 5, "c": 20, "d": 1}, 10) == [["a"], ["b"], ["c"], ["d"]]
    assert plan_shards({"a": 3, "b": 3, "c": 3, "d": 3}, 7) == [["a", "b"], ["c", "d"]]


# ---------------------------------------------------------------- slow: real sharded runs

def probe_launch(accelerate_config, recipe_path, probe_out, overrides=(), *, timeout=900, extra_launch=()):
    import os
    import socket
    import subprocess
    import sys

    from .conftest import REPO_ROOT

    with socket.socket() as s:  # never the default 29500: other runs on this host may hold it
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
           str(REPO_ROOT / "configs" / "accelerate" / accelerate_config), "--main_process_port", port, *extra_launch,
           str(REPO_ROOT / "tests" / "train" / "probe_launch.py"), "--probe-out", str(probe_out),
           "--config", str(recipe_path), *overrides]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"launch failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    return result


SHARDED = {"zero3": ("cpu-zero3.yaml", "deepspeed"), "fsdp2": ("cpu-fsdp2.yaml", "fsdp")}
RUNS = [pytest.param(("llama", "zero3"), id="llama-zero3"), pytest.param(("llama", "fsdp2"), id="llama-fsdp2"),
        pytest.param(("beam", "fsdp2"), id="beam-fsdp2"), pytest.param(("beam", "zero3"), id="beam-zero3")]


@pytest.fixture(scope="module", params=RUNS)
def sharded_run(request, fixture_dir, moe_dirs, prepared_dir, tmp_path_factory):
    """A full fine-tune, 2 CPU processes, saving sharded at steps 2 and 4: the dense fixture and the
    Beam fixture (transformers' BeamForCausalLM: NoPE full and sliding layers, output gate, grouped
    sigmoid routing with correction biases, soft cap) under ZeRO-3 and FSDP2."""
    import yaml

    from .conftest import recipe_dict

    arch, strategy = request.param
    tmp = tmp_path_factory.mktemp(f"sharded-{arch}-{strategy}")
    model_dir = fixture_dir if arch == "llama" else moe_dirs[arch]
    out = tmp / "out"
    data = recipe_dict(model_dir, prepared_dir, out)
    data["sft"].update({"use_cpu": True, "max_steps": 4, "save_strategy": "steps", "save_steps": 2})
    if arch == "beam":
        data["sft"]["learning_rate"] = 3e-3
    recipe = tmp / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(data))
    probe_launch(SHARDED[strategy][0], recipe, tmp / "probe")
    return {"strategy": strategy, "arch": arch, "model": model_dir, "out": out, "probe": tmp / "probe",
            "recipe": recipe, "tmp": tmp, "format": SHARDED[strategy][1]}


@pytest.mark.slow
def test_sharded_save_and_export_match_the_trained_model(sharded_run):
    from transformers import AutoModelForCausalLM

    out = sharded_run["out"]
    meta = json.loads((out / "beam_run.json").read_text())
    assert meta["checkpoint_format"] == sharded_run["format"]
    assert not any(out.glob("*.safetensors")), "a full fine-tune under ZeRO-3/FSDP2 is not gathered on save"
    assert checkpoint_format(out / "checkpoint-2") == sharded_run["format"]

    exported = export_checkpoint(out, sharded_run["tmp"] / "exported", dtype="float32", max_shard_bytes=100_000)
    model = AutoModelForCausalLM.from_pretrained(exported)
    trained = torch.load(sharded_run["probe"] / "logits.pt")
    torch.testing.assert_close(_logits(model), trained, rtol=1e-5, atol=1e-5)
    untrained = _logits(AutoModelForCausalLM.from_pretrained(sharded_run["model"]))
    assert not torch.allclose(trained, untrained, atol=1e-3), "training changed the model"
    assert (exported / "chat_template.jinja").is_file() or "chat_template" in json.loads(
        (exported / "tokenizer_config.json").read_text())
    if sharded_run["arch"] == "beam":
        _beam_routers_kept(sharded_run, exported)


def _beam_routers_kept(sharded_run, exported) -> None:
    """Beam under ZeRO-3/FSDP2: the loss falls, no aux loss; the routers were float32 on the wrapped
    model; the export holds every e_score_correction_bias bit for bit as the base checkpoint has it,
    and router weights that trained, in float32."""
    from beam_sft.train.callbacks import read_losses

    from .moe_support import assert_beam_routers_kept

    out = sharded_run["out"]
    losses = {r["step"]: r for r in read_losses(out)}
    assert losses[4]["loss"] < losses[1]["loss"] and not [r for r in losses.values() if "aux_loss" in r]
    assert_beam_routers_kept(sharded_run["model"], exported, trained=True, run=out)



@pytest.mark.slow
def test_resume_from_the_sharded_checkpoint_gives_the_same_losses(sharded_run):
    from beam_sft.train.callbacks import read_losses

    out, resumed = sharded_run["out"], sharded_run["tmp"] / "resumed"
    probe_launch(SHARDED[sharded_run["strategy"]][0], sharded_run["recipe"], sharded_run["tmp"] / "probe-resume",
                 ["--sft.output_dir", str(resumed), "--sft.resume_from_checkpoint", str(out / "checkpoint-2")])
    whole = {r["step"]: r["loss"] for r in read_losses(out)}
    again = {r["step"]: r["loss"] for r in read_losses(resumed)}
    assert sorted(again) == [3, 4]
    for step in (3, 4):
        assert again[step] == pytest.approx(whole[step], rel=1e-5)


@pytest.mark.slow
def test_plan_matches_the_bytes_each_rank_holds(sharded_run):
    """Per-rank parameter and optimizer bytes of the real run equal the plan's within 5%."""
    from beam_sft.train.plan import PlanSetup, plan

    result = plan(sharded_run["model"], PlanSetup(gpus=2, strategy=sharded_run["strategy"], dtype="float32"))
    for rank in (0, 1):
        held = json.loads((sharded_run["probe"] / f"memory-{rank}.json").read_text())
        assert held["kind"] == sharded_run["strategy"]
        assert held["parameters"] == pytest.approx(result.per_gpu_bytes["weights"], rel=0.05), held
        assert held["optimizer"] == pytest.approx(result.per_gpu_bytes["optimizer"], rel=0.05), held


def _peak_rss_kib(args, cwd):
    """Peak RSS (KiB) of the process tree of ``beam-sft ARGS``, measured by a parent that waits for it."""
    import os
    import subprocess
    import sys

    from .conftest import REPO_ROOT

    probe = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "beam_sft", *args], cwd=cwd,
                            env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return int(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_export_memory_stays_near_one_shard(tmp_path):
    """A 1.3 GB (fp32) model exported in 64 MB shards: the peak RSS above the tooling's own baseline
    (``beam-sft plan`` on the same config: torch, transformers, the meta model) stays far below it."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=4096, num_hidden_layers=16,
                         num_attention_heads=16, num_key_value_heads=4, tie_word_embeddings=False)
    model = LlamaForCausalLM(config)
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    checkpoint = write_dcp(model, tmp_path / "ckpt")
    del model
    baseline = _peak_rss_kib(["plan", "--model", str(checkpoint)], tmp_path) * 1024
    peak = _peak_rss_kib(["export", str(checkpoint), "-o", str(tmp_path / "out"), "--dtype", "float32",
                          "--max-shard-size", "64MB"], tmp_path) * 1024
    print(f"export peak RSS {peak / 2**20:.0f} MiB, baseline {baseline / 2**20:.0f} MiB, "
          f"model {model_bytes / 2**20:.0f} MiB")
    assert peak - baseline < 0.35 * model_bytes


@pytest.mark.slow
def test_fsdp2_lora_saves_the_adapter_whole(fixture_dir, prepared_dir, tmp_path):
    """Under SHARDED_STATE_DICT a LoRA adapter is still gathered (it is small) into adapter_model.safetensors,
    and the reloaded adapter gives the trained model's logits."""
    import yaml
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from .conftest import recipe_dict

    out = tmp_path / "out"
    data = recipe_dict(fixture_dir, prepared_dir, out, lora={"r": 4, "alpha": 8, "dropout": 0.0})
    data["sft"].update({"use_cpu": True, "max_steps": 3, "learning_rate": 1e-2})
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(data))
    probe_launch("cpu-fsdp2.yaml", recipe, tmp_path / "probe")
    meta = json.loads((out / "beam_run.json").read_text())
    assert meta["checkpoint_format"] == "from_pretrained" and meta["distributed"]["type"] == "FSDP"
    weights = load_file(out / "adapter_model.safetensors")
    lora_b = [v for k, v in weights.items() if "lora_B" in k]
    assert lora_b and all(float(v.abs().max()) > 0 for v in lora_b)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(fixture_dir), str(out))
    torch.testing.assert_close(_logits(model), torch.load(tmp_path / "probe" / "logits.pt"), rtol=1e-5, atol=1e-5)
