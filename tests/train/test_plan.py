"""``beam-sft plan``: exact counts from configs built on the meta device, and each fit verdict.

The expected counts come from real (tiny) instantiated models or from the published Llama-3-8B
figure, never from plan's own code path; the active count is recomputed here with the test's own
rule (parameters under ``mlp.experts``).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from beam_sft.errors import BeamError, ConfigError, PreflightError
from beam_sft.train.plan import GIB, PlanSetup, check_plan_fits, count_parameters, memory_per_gpu, plan


def llama3_8b():
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False)


def tiny_gpt_oss():
    from transformers import GptOssConfig

    return GptOssConfig(vocab_size=512, hidden_size=64, intermediate_size=48, num_hidden_layers=4,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=6,
                        num_experts_per_tok=2, sliding_window=8,
                        layer_types=["sliding_attention"] * 3 + ["full_attention"])


def tiny_deepseek_v3():
    from transformers import DeepseekV3Config

    return DeepseekV3Config(vocab_size=512, hidden_size=64, intermediate_size=96, moe_intermediate_size=24,
                            num_hidden_layers=3, first_k_dense_replace=1, n_routed_experts=8, num_experts_per_tok=2,
                            n_shared_experts=1, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=32,
                            kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8,
                            n_group=1, topk_group=1)


def _real_counts(config, num_experts, top_k):
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    total = sum(p.numel() for p in model.parameters())
    expert = sum(p.numel() for n, p in model.named_parameters() if ".mlp.experts." in n)
    return total, total - expert + expert * top_k // num_experts, expert


def test_llama3_8b_shape_counts_exactly_without_weights():
    counts = count_parameters(llama3_8b())
    assert counts.total == 8_030_261_248
    assert counts.active == counts.total and counts.expert == 0


def test_dense_fixture_count_is_its_numel_sum(fixture_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(fixture_dir)
    result = plan(fixture_dir)
    assert result.parameters["total"] == sum(p.numel() for p in model.parameters())
    assert result.parameters["active"] == result.parameters["total"]


@pytest.mark.parametrize("make, experts, top_k", [(tiny_gpt_oss, 6, 2), (tiny_deepseek_v3, 8, 2)],
                         ids=["gpt_oss", "deepseek_v3"])
def test_moe_total_and_active_counts_are_exact(make, experts, top_k, tmp_path):
    config = make()
    total, active, expert = _real_counts(config, experts, top_k)
    assert 0 < expert < total and active < total
    path = tmp_path / "config.json"
    config.to_json_file(str(path))
    for source in (config, path, tmp_path):  # a config object, a config.json, a model directory
        result = plan(source)
        assert result.parameters["total"] == total
        assert result.parameters["active"] == active
        assert result.parameters["expert"] == expert
        assert (result.parameters["num_experts"], result.parameters["top_k"]) == (experts, top_k)


def test_moe_fixtures_when_present(tmp_path):
    """The project's own MoE fixtures (once `beam-sft fixture --arch` has them) count exactly too."""
    import inspect

    from beam_sft.harmony import fixture

    if "arch" not in inspect.signature(fixture.build_fixture).parameters:
        pytest.skip("beam_sft.harmony.fixture has no --arch yet (the MoE fixtures need it)")
    from transformers import AutoModelForCausalLM

    for arch in ("beam", "gpt_oss", "deepseek_v3"):
        out = fixture.build_fixture(tmp_path / arch, arch=arch)
        model = AutoModelForCausalLM.from_pretrained(out)
        assert plan(out).parameters["total"] == sum(p.numel() for p in model.parameters())


def test_sharded_components_divide_by_the_gpus():
    config = llama3_8b()
    counts = count_parameters(config)
    for strategy, per_param in (("zero3", (2, 2, 12)), ("fsdp2", (4, 4, 8)), ("ddp", (2, 2, 4))):
        gpus = 16
        mem = memory_per_gpu(counts, config, PlanSetup(gpus=gpus, strategy=strategy))
        shards = 1 if strategy == "ddp" else gpus
        assert (mem["weights"], mem["gradients"], mem["optimizer"]) == tuple(
            -(-counts.total * b // shards) for b in per_param)


def test_lora_counts_match_peft():
    """LoRA r=16 on all linear layers of a Llama-3-8B shape: PEFT's published 41,943,040."""
    result = plan(llama3_8b(), PlanSetup(lora_r=16, strategy="ddp"))
    assert result.parameters["lora"] == 41_943_040
    assert result.per_gpu_bytes["gradients"] == 0 and result.per_gpu_bytes["optimizer"] == 0
    assert result.per_gpu_bytes["lora"] == 41_943_040 * 16


def test_verdict_fits():
    result = plan(llama3_8b(), PlanSetup(gpus=8, gpu_memory_gib=80, strategy="zero3", max_length=4096,
                                         activation_checkpointing=True))
    assert result.fits is True and result.total_bytes <= 80 * GIB
    assert result.nodes_needed == 1 and result.gpus_needed == 8


def test_verdict_does_not_fit_and_no_node_count_helps_ddp():
    result = plan(llama3_8b(), PlanSetup(gpus=8, gpu_memory_gib=24, strategy="ddp"))
    assert result.fits is False and result.total_bytes > 24 * GIB
    assert result.nodes_needed is None


def test_verdict_nodes_needed_is_the_fewest():
    config = llama3_8b()
    setup = PlanSetup(gpus=8, gpu_memory_gib=10, strategy="zero3", max_length=1024, activation_checkpointing=True)
    result = plan(config, setup)
    assert result.fits is False
    nodes = result.nodes_needed
    assert nodes is not None and nodes > 1
    at = plan(config, dataclasses.replace(setup, gpus=nodes * 8))
    below = plan(config, dataclasses.replace(setup, gpus=(nodes - 1) * 8))
    assert at.fits and not below.fits


def test_cli_json(tmp_path, capsys):
    from beam_sft.cli import main

    path = tmp_path / "config.json"
    tiny_gpt_oss().to_json_file(str(path))
    assert main(["plan", "--model", str(path), "--gpus", "2", "--gpu-memory", "1", "--reserve", "0", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fits"] is True and data["parameters"]["total"] == plan(path).parameters["total"]
    assert set(data["per_gpu_bytes"]) == {"weights", "gradients", "optimizer", "lora", "activations",
                                          "buffers", "reserve"}
    assert main(["plan", "--model", str(path), "--gpus", "2", "--gpu-memory", "0.001", "--reserve", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fits"] is False
    assert main(["plan", "--model", str(path), "--gpu-memory", "8"]) == 0
    assert "fits: yes" in capsys.readouterr().out


def test_bad_inputs_are_named(tmp_path):
    with pytest.raises(ConfigError, match="strategy"):
        PlanSetup(strategy="zero9")
    with pytest.raises(ConfigError, match="gpus"):
        PlanSetup(gpus=0)
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"model_type": "no_such_model"}))
    with pytest.raises(BeamError, match="no_such_model"):
        plan(bad)
    with pytest.raises(BeamError, match="no model config"):
        plan(tmp_path / "missing")


def test_check_plan_fits_refuses_before_loading(fixture_dir):
    from beam_sft.train.recipe import recipe_from_dict

    recipe = recipe_from_dict({"model": {"path": str(fixture_dir), "dtype": "float32"},
                               "data": {"prepared": "unused"}, "sft": {"max_length": 256}})
    with pytest.raises(PreflightError, match="GiB per GPU"):
        check_plan_fits(recipe, world_size=2, free_bytes=1024)
    assert check_plan_fits(recipe, world_size=2, free_bytes=64 * GIB).fits
    import torch

    if not torch.cuda.is_available():  # no GPU: the hook does nothing
        assert check_plan_fits(recipe, world_size=2) is None


def test_lora_experts_on_a_model_without_fused_experts_is_refused_by_plan_as_by_train(fixture_dir, capsys):
    """plan planned --lora-experts on the dense fixture (adapters on no expert) where train refused the
    recipe at launch; both ask one rule now (moe.experts_to_adapt), each naming its own key."""
    from transformers import AutoModelForCausalLM

    from beam_sft.cli import main
    from beam_sft.train.recipe import recipe_from_dict
    from beam_sft.train.trainer import lora_config

    assert main(["plan", "--model", str(fixture_dir), "--lora", "8", "--lora-experts"]) == 2
    said = capsys.readouterr().err.strip()
    assert "\n" not in said and "--lora-experts: LlamaForCausalLM (llama) has no fused expert tensors" in said
    recipe = recipe_from_dict({"model": {"path": str(fixture_dir), "dtype": "float32"}, "data": {"prepared": "unused"},
                               "sft": {"max_length": 256}, "lora": {"r": 8, "dropout": 0.0, "experts": True}})
    with pytest.raises(ConfigError) as planned:  # the GPU pre-flight's plan of a recipe names its key
        check_plan_fits(recipe, world_size=1, free_bytes=64 * GIB)
    with pytest.raises(ConfigError) as trained:
        lora_config(recipe, AutoModelForCausalLM.from_pretrained(fixture_dir))
    assert planned.value.path == trained.value.path == "lora.experts"
    rule = "has no fused expert tensors to adapt"
    assert planned.value.message.split(rule)[1] == trained.value.message.split(rule)[1] == said.split(rule)[1]


def test_a_recipes_modules_to_save_is_refused_by_the_preflights_plan_at_its_key(fixture_dir):
    """The GPU pre-flight's plan refused a recipe's bad modules_to_save as the flag --lora-save."""
    from beam_sft.train.recipe import recipe_from_dict

    recipe = recipe_from_dict({"model": {"path": str(fixture_dir), "dtype": "float32"}, "data": {"prepared": "unused"},
                               "sft": {"max_length": 256}, "lora": {"r": 8, "modules_to_save": ["lm_haed"]}})
    with pytest.raises(ConfigError) as info:
        check_plan_fits(recipe, world_size=1, free_bytes=64 * GIB)
    assert info.value.path == "lora.modules_to_save"
    assert "'lm_haed' names no module of this model (did you mean lm_head?" in info.value.message


def test_a_lora_recipe_is_planned_as_it_trains(fixture_dir):
    """The pre-flight's plan of a LoRA recipe counts what the trainer trains: adapters on the experts
    when ``lora.experts``, and every module PEFT trains whole beside them (``modules_to_save``, the
    routers under ``lora.train_routers``), each at 16 bytes a parameter; a head in modules_to_save
    gets its weight gradient in the activations."""
    from transformers import BeamConfig

    from beam_sft.train.plan import activation_bytes, recipe_setup
    from beam_sft.train.recipe import recipe_from_dict

    def setup(lora: dict) -> PlanSetup:
        recipe = recipe_from_dict({"model": {"path": str(fixture_dir), "dtype": "bfloat16"},
                                   "data": {"prepared": "unused"}, "sft": {"max_length": 256},
                                   "lora": {"r": 8, "dropout": 0.0, **lora}})
        return recipe_setup(recipe, world_size=2, gpu_memory_gib=80.0, strategy="zero3")

    plain, experts = setup({}), setup({"experts": True})
    assert (plain.lora_experts, experts.lora_experts) == (False, True) and plain.lora_saved == ()
    saved = setup({"modules_to_save": ["lm_head"], "train_routers": True})
    assert saved.lora_saved == ("lm_head", "router", "gate")

    config = BeamConfig()
    head = 151_936 * 5120
    with_head = dataclasses.replace(plain, lora_saved=("lm_head",))
    assert count_parameters(config, lora_r=8, lora_saved=("lm_head",)).lora_saved == head
    assert count_parameters(config, lora_r=8, lora_saved=("lm_head", "embed_tokens")).lora_saved == 2 * head
    base = count_parameters(config, lora_r=8)
    counted = count_parameters(config, lora_r=8, lora_saved=("lm_head",))
    lora_bytes = memory_per_gpu(counted, config, with_head)["lora"] - memory_per_gpu(base, config, plain)["lora"]
    assert abs(lora_bytes - head * 16 / 2) <= 1  # 16 bytes a parameter, over the 2 GPUs
    assert activation_bytes(config, with_head) - activation_bytes(config, plain) == head * (4 + 2)
    with pytest.raises(ConfigError, match="--lora-save.*needs --lora"):
        PlanSetup(lora_saved=("lm_head",))
    with pytest.raises(ConfigError, match="--lora-experts.*needs --lora"):  # was silently ignored
        PlanSetup(lora_experts=True)


# ---------------------------------------------------------------- the Beam recipes' headers

REPO = __import__("pathlib").Path(__file__).resolve().parents[2]
# What an H100 80 GB and an H200 141 GB report (81559 and 143771 MiB), in GiB.
GPUS = {"H100 80 GB": "79.6", "H200 141 GB": "140.4"}


def _header(path):
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# ").rstrip())
    return lines


@pytest.mark.parametrize("name", ["beam-full-zero3.yaml", "beam-lora.yaml"])
def test_beam_recipe_header_figures_are_what_plan_says(name, capsys, monkeypatch):
    """Recompute the nodes and GPUs each Beam recipe's header states, with the header's own plan line
    (no --model: Beam's real config), and check that line describes the recipe (length, micro-batch,
    LoRA rank, checkpointing)."""
    import re
    import shlex

    from beam_sft.cli import main
    from beam_sft.train.recipe import load_recipe

    monkeypatch.delenv("BEAM_MODEL_ID", raising=False)
    path = REPO / "recipes" / name
    header = _header(path)
    text = "\n".join(header)
    plan_line = next(line for line in header if line.startswith("plan: beam-sft plan "))
    argv = shlex.split(plan_line.removeprefix("plan: beam-sft "))
    gpu_at = argv.index("--gpu-memory")
    argv = argv[:gpu_at] + argv[gpu_at + 2:]
    assert "--model" not in argv and "approximation" not in text and "beam-approx" not in text

    recipe = load_recipe(path, ["--model.path", "m"])
    opts = dict(zip(argv, [*argv[1:], None], strict=True))
    assert int(opts["--max-length"]) == recipe.sft["max_length"]
    assert int(opts["--micro-batch"]) == recipe.sft["per_device_train_batch_size"]
    assert ("--activation-checkpointing" in argv) == bool(recipe.sft["activation_checkpointing"])
    assert (int(opts["--lora"]) if "--lora" in opts else None) == (recipe.lora.r if recipe.lora else None)

    stated = {}
    for gpu in GPUS:
        match = re.search(rf"{gpu}: (\d+) nodes x 8 GPUs \((\d+) GPUs\)", text)
        assert match, f"{name}: no figure for {gpu}"
        stated[gpu] = (int(match.group(1)), int(match.group(2)))
        assert main([*argv, "--gpu-memory", GPUS[gpu], "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["parameters"]["total"] == BEAM_TOTAL and result["model_type"] == "beam"
        assert (result["nodes_needed"], result["gpus_needed"]) == stated[gpu], gpu
    sbatch = re.search(r"sbatch --nodes=(\d+) scripts/slurm/train.sbatch recipes/" + re.escape(name), text)
    assert sbatch and int(sbatch.group(1)) == stated["H200 141 GB"][0]
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith(f"| `recipes/{name}`"))
    for gpu, (nodes, gpus) in stated.items():  # the README's recipe table says the same
        assert f"{nodes} nodes ({gpus} GPUs)" in row, (gpu, row)


# Beam-1.0-501B-A23B as transformers' BeamConfig() builds it (the published 501.3B / 23.4B).
BEAM_TOTAL, BEAM_ACTIVE = 501_267_599_808, 23_431_516_608


def test_plan_without_a_model_is_beam_itself(capsys, monkeypatch):
    """No --model, no BEAM_MODEL_ID: BeamConfig() defaults, counted exactly on the meta device; the
    active count recomputed here by hand from the shape (3 dense layers, 49 sparse of 256 experts top-8)."""
    from transformers import BeamConfig

    from beam_sft.cli import main

    c = BeamConfig()
    h, q, kv = c.hidden_size, c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    attention = 2 * h * q + 2 * h * kv + h * q + c.num_attention_heads + 2 * c.head_dim  # q, o, k, v, gate, norms
    dense = 3 * h * c.intermediate_size
    expert = 3 * h * c.moe_intermediate_size  # gate, up, down of one routed expert
    router = c.num_experts * h
    norms = 4 * h
    dense_layers = c.mlp_layer_types.count("dense")
    sparse_layers = c.num_hidden_layers - dense_layers
    shared = 2 * c.vocab_size * h + h + c.num_hidden_layers * (attention + norms) + dense_layers * dense \
        + sparse_layers * router
    assert shared + sparse_layers * c.num_experts * expert == BEAM_TOTAL
    assert shared + sparse_layers * c.num_experts_per_tok * expert == BEAM_ACTIVE

    monkeypatch.delenv("BEAM_MODEL_ID", raising=False)
    assert main(["plan"]) == 0
    out = capsys.readouterr().out
    assert "total 501,267,599,808  active per token 23,431,516,608" in out
    assert "256 routed, top-8" in out and "(beam)" in out
    assert main(["plan", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["parameters"]["total"], data["parameters"]["active"]) == (BEAM_TOTAL, BEAM_ACTIVE)
    assert data["parameters"]["expert"] == sparse_layers * c.num_experts * expert


def test_beam_layer_floor_and_lm_head_are_counted():
    """A sparse layer is 256 x 3 x 5120 x 2560 = 10.07B expert parameters (20 GB in bf16): ZeRO-3's
    two gathered layers; the LM head as TRL's fused head holds it (a tile, the hidden states and
    their fp32 gradient, the head's fp32 weight gradient and its bf16 copy), not the whole logits;
    expert parallelism divides the gathered experts."""
    from transformers import BeamConfig

    from beam_sft.train.plan import activation_bytes, head_bytes, shape_of

    config = BeamConfig()
    counts = count_parameters(config)
    assert counts.largest_layer_expert == 256 * 3 * 5120 * 2560 == 10_066_329_600
    setup = PlanSetup(gpus=96, strategy="zero3", max_length=8192, activation_checkpointing=True)
    mem = memory_per_gpu(counts, config, setup)
    assert mem["buffers"] == counts.buffers_bytes + 2 * 2 * counts.largest_layer
    head = 4096 * 32768 * 2 + 8192 * 5120 * (2 + 4) + 151_936 * 5120 * (4 + 2) + 8192 * 32
    assert head_bytes(shape_of(config), 2, 8192, head_trains=True) == head
    whole_logits = 8192 * 151_936 * (2 + 16)  # what the plan counted before TRL's fused head
    assert head < activation_bytes(config, setup) < whole_logits
    # The kernel applies the soft cap per tile: no memory of its own. A frozen head (LoRA) has no gradient.
    assert activation_bytes(BeamConfig(final_logit_softcapping=None), setup) == activation_bytes(config, setup)
    lora = dataclasses.replace(setup, lora_r=64)
    assert activation_bytes(config, setup) - activation_bytes(config, lora) == 151_936 * 5120 * (4 + 2)
    # Longer sequences cost more; checkpointing keeps far less.
    assert activation_bytes(config, dataclasses.replace(setup, activation_checkpointing=False)) > 10 * mem["activations"]
    ep = dataclasses.replace(setup, strategy="fsdp2", ep_size=8)
    ep_buffers = memory_per_gpu(counts, config, ep)["buffers"]
    non_expert = counts.largest_layer - counts.largest_layer_expert
    dispatch = 2 * 8192 * 8 * 5120 * 2
    assert ep_buffers == counts.buffers_bytes + 2 * 2 * (non_expert + counts.largest_layer_expert // 8) + dispatch
    assert ep_buffers < mem["buffers"] / 5


def test_the_head_tiles_are_trls_own():
    """The plan's tile sizes are trl's private constants, read here (the one place that touches them)
    so a trl release that changes them fails this test instead of the plan going quietly wrong."""
    import inspect

    from trl.kernels import chunked_logprob
    from trl.trainer import sft_trainer, utils

    from beam_sft.train.plan import HEAD_TOKEN_TILE, HEAD_VOCAB_TILE

    assert HEAD_TOKEN_TILE == chunked_logprob.TOKEN_CHUNK_SIZE
    assert HEAD_VOCAB_TILE == utils._CHUNKED_LOGPROB_CHUNK_SIZE
    # SFTTrainer adds the fused head, and the loss beam-sft train uses (no compute_loss_func, no
    # label smoothing) goes through it.
    source = inspect.getsource(sft_trainer.SFTTrainer)
    assert "add_fused_lm_head(" in source and "model(**inputs, fused_lm_head=True)" in source


def test_one_process_has_no_ddp_buckets():
    from transformers import BeamConfig

    config = BeamConfig(num_hidden_layers=4, hidden_size=256, intermediate_size=512, moe_intermediate_size=64,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=64)
    counts = count_parameters(config)
    one = memory_per_gpu(counts, config, PlanSetup(gpus=1, gpus_per_node=1, strategy="ddp", max_length=512))
    two = memory_per_gpu(counts, config, PlanSetup(gpus=2, gpus_per_node=2, strategy="ddp", max_length=512))
    assert one["buffers"] == counts.buffers_bytes
    assert two["buffers"] == counts.buffers_bytes + counts.total * 2  # DDP's gradient buckets, bf16


def test_expert_parallelism_lowers_the_node_count_and_is_checked():
    from transformers import BeamConfig

    config = BeamConfig()
    base = PlanSetup(gpus=8, gpu_memory_gib=79.6, strategy="fsdp2", max_length=8192, activation_checkpointing=True)
    without = plan(config, base)
    with_ep = plan(config, dataclasses.replace(base, ep_size=8))
    assert with_ep.nodes_needed < without.nodes_needed
    with pytest.raises(ConfigError, match="--ep-size.*--strategy fsdp2"):
        PlanSetup(strategy="zero3", ep_size=8)
    with pytest.raises(ConfigError, match="--ep-size: 3 must divide --gpus 8"):
        PlanSetup(strategy="fsdp2", ep_size=3)
    with pytest.raises(ConfigError, match="--ep-size: 16 must divide the model's routed experts"):
        plan(tiny_gpt_oss(), PlanSetup(strategy="fsdp2", gpus=16, ep_size=16))
    with pytest.raises(ConfigError, match="--ep-size.*not a mixture of experts"):
        plan(llama3_8b(), PlanSetup(strategy="fsdp2", ep_size=2))


def test_strategy_from_the_launcher_environment():
    from beam_sft.train.plan import strategy_from_environment

    zero2, zero3 = REPO / "configs" / "deepspeed" / "zero2.json", REPO / "configs" / "deepspeed" / "zero3.json"
    assert strategy_from_environment({"ACCELERATE_USE_DEEPSPEED": "true",
                                      "ACCELERATE_DEEPSPEED_CONFIG_FILE": str(zero3)}) == "zero3"
    assert strategy_from_environment({"ACCELERATE_USE_DEEPSPEED": "true",
                                      "ACCELERATE_DEEPSPEED_CONFIG_FILE": str(zero2)}) == "zero2"
    assert strategy_from_environment({"ACCELERATE_USE_DEEPSPEED": "true",
                                      "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3"}) == "zero3"
    assert strategy_from_environment({"ACCELERATE_USE_FSDP": "true"}) == "fsdp2"
    assert strategy_from_environment({}) == "ddp"


def test_zero2_shards_gradients_and_optimizer_but_not_weights():
    config = llama3_8b()
    counts = count_parameters(config)
    mem = memory_per_gpu(counts, config, PlanSetup(gpus=8, strategy="zero2"))
    assert mem["weights"] == counts.total * 2
    assert mem["gradients"] == -(-counts.total * 2 // 8) and mem["optimizer"] == -(-counts.total * 12 // 8)


def _refusal_worker(rank, port, model_dir, results):
    import os

    import torch.distributed as dist

    from beam_sft.train.recipe import recipe_from_dict

    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    dist.init_process_group("gloo", rank=rank, world_size=2)
    recipe = recipe_from_dict({"model": {"path": model_dir, "dtype": "float32"}, "data": {"prepared": "unused"},
                               "sft": {"max_length": 256}})
    try:  # only rank 0 is short of memory: both must refuse, or rank 1 would wait in a collective
        check_plan_fits(recipe, world_size=2, free_bytes=1024 if rank == 0 else 64 * GIB)
        results[rank] = "started"
    except PreflightError as exc:
        results[rank] = str(exc)
    dist.destroy_process_group()


@pytest.mark.slow
def test_check_plan_fits_stops_every_process_together(fixture_dir):
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    results = mp.Manager().dict()
    mp.spawn(_refusal_worker, args=(port, str(fixture_dir), results), nprocs=2, join=True)
    assert "pre-flight failed" in results[0] and "pre-flight failed" in results[1]
    assert "another process has too little free memory" in results[1]
    assert "another process" not in results[0]


# ---------------------------------------------------------------- bad flags: one line, exit 2, never a traceback -------

TINY_BEAM = {"model_type": "beam", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
             "moe_intermediate_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
             "head_dim": 16, "num_experts": 8, "num_experts_per_tok": 2, "n_group": 2, "topk_group": 1,
             "sliding_window": 4}


def _plan_cli(argv, capsys):
    from beam_sft.cli import main

    try:
        code = main(["plan", *argv])
    except SystemExit as exc:  # a flag refused by its argparse type (beam_sft.cli_args), one line too
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_tiny_beam_config_plans(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY_BEAM))
    code, out, err = _plan_cli(["--model", str(path), "--gpu-memory", "1"], capsys)
    assert code == 0 and "(beam)" in out and "8 routed, top-2" in out, err


@pytest.mark.parametrize("change, key", [
    ({"num_experts": 10**12}, "num_experts"),
    ({"hidden_size": -64}, "hidden_size"),
    ({"num_attention_heads": 0}, "num_attention_heads"),
    ({"num_experts": 128, "num_experts_per_tok": 500, "n_group": 1, "topk_group": 1}, "num_experts_per_tok"),
    ({"num_experts_per_tok": 8, "topk_group": 1}, "num_experts_per_tok"),  # 8 of the 4 in one chosen group
    ({"num_key_value_heads": 3}, "num_key_value_heads"),
    ({"n_group": 3}, "n_group"),
    ({"num_hidden_layers": True}, "num_hidden_layers"),
    ({"vocab_size": 2.5}, "vocab_size"),
    ({"head_dim": None, "hidden_size": "64"}, "hidden_size"),
    ({"layer_types": ["full_attention"]}, "layer_types"),
    ({"model_type": "no_such_model"}, "model_type"),
    ({"model_type": None}, "model_type"),
], ids=["1e12-experts", "negative-hidden", "zero-heads", "top-k-500-of-128", "top-k-past-chosen-groups",
        "kv-heads-not-dividing", "groups-not-dividing", "bool-layers", "float-vocab", "string-hidden",
        "layer-types-length", "unknown-model-type", "missing-model-type"])
def test_bad_config_is_one_line_naming_the_key(change, key, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY_BEAM, **change}))
    code, out, err = _plan_cli(["--model", str(path)], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("beam-sft plan: error: ") and "Traceback" not in err
    assert key in err, err


@pytest.mark.parametrize("write, expected", [
    (lambda p: p.write_text(json.dumps([TINY_BEAM])), "JSON object of keys, not a list"),
    (lambda p: p.write_text("null"), "not a NoneType"),
    (lambda p: p.write_text("{"), "not a JSON config"),
    (lambda p: p.write_bytes(b"\xff\xfe\x00{"), "not a JSON config"),
    (lambda p: p.write_text("[" * 100_000), "not a JSON config"),
], ids=["json-list", "json-null", "truncated", "binary", "deep"])
def test_config_file_that_is_not_an_object(write, expected, tmp_path, capsys):
    path = tmp_path / "config.json"
    write(path)
    code, out, err = _plan_cli(["--model", str(path)], capsys)
    assert code == 2 and err.count("\n") == 1 and expected in err, err


def test_folder_without_config_json(tmp_path, capsys):
    (tmp_path / "weights").mkdir()
    code, out, err = _plan_cli(["--model", str(tmp_path / "weights")], capsys)
    assert code == 2 and err.count("\n") == 1 and "without config.json" in err, err


@pytest.mark.parametrize("argv, key", [
    (["--gpu-memory", "nan"], "--gpu-memory"), (["--gpu-memory", "inf"], "--gpu-memory"),
    (["--gpu-memory", "-80"], "--gpu-memory"), (["--gpu-memory", "0"], "--gpu-memory"),
    (["--gpu-memory", "1e308"], "--gpu-memory"), (["--reserve", "1e300"], "--reserve"),  # int(x * GIB) overflowed
    (["--reserve", "nan"], "--reserve"), (["--reserve", "-1"], "--reserve"),
    (["--gpus", "0"], "--gpus"), (["--gpus", "-8"], "--gpus"), (["--max-length", "0"], "--max-length"),
    (["--micro-batch", str(10**12)], "--micro-batch"), (["--lora", "0"], "--lora"),
    (["--ep-size", "0"], "--ep-size"), (["--ep-size", "2"], "--ep-size"),  # zero3 default: no EP
    (["--strategy", "fsdp2", "--ep-size", "3"], "--ep-size"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_bad_setup_is_one_line_naming_the_flag(argv, key, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY_BEAM))
    code, out, err = _plan_cli(["--model", str(path), *argv], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert f"error: {key}:" in err or f"error: argument {key}:" in err, err


def test_readme_plan_output_is_a_real_run(capsys, monkeypatch):
    """The plan pasted in the README's "Fine-tuning Beam" is what its command prints now."""
    import re
    import shlex

    from beam_sft.cli import main

    monkeypatch.delenv("BEAM_MODEL_ID", raising=False)
    section = (REPO / "README.md").read_text(encoding="utf-8").split("## Fine-tuning Beam", 1)[1]
    command, output = re.search(r"```bash\n(beam-sft plan .*?)\n```\n```\n(.*?)\n```", section, re.S).groups()
    argv = shlex.split(command.replace("\\\n", " "))[1:]
    assert "--model" not in argv
    assert main(argv) == 0
    assert capsys.readouterr().out.rstrip("\n") == output


@pytest.mark.parametrize("as_folder", [False, True], ids=["config.json", "folder"])
def test_zero_layers_named_before_the_config_class_runs(as_folder, tmp_path, capsys):
    """Found by the fuzz tier: BeamConfig's own __post_init__ fails on 0 layers ("list assignment
    index out of range") before any check of ours; the raw config is checked first."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY_BEAM, "num_hidden_layers": 0}))
    code, out, err = _plan_cli(["--model", str(tmp_path if as_folder else path)], capsys)
    assert code == 2 and err.count("\n") == 1 and "num_hidden_layers: must be an integer from 1" in err, err


def test_zero2_lora_keeps_the_adapter_weights_whole_on_every_gpu():
    """ZeRO-2 shards gradients and optimizer state, never weights: an adapter's fp32 weight (4 bytes)
    is on every GPU, only its gradient and AdamW moments (12 bytes) are divided. The plan divided all 16."""
    config = llama3_8b()
    counts = count_parameters(config, lora_r=16)
    assert counts.lora == 41_943_040
    mem = memory_per_gpu(counts, config, PlanSetup(gpus=8, strategy="zero2", lora_r=16))
    assert mem["weights"] == counts.total * 2
    assert mem["lora"] == counts.lora * 4 + -(-counts.lora * 12 // 8)
    zero3 = memory_per_gpu(counts, config, PlanSetup(gpus=8, strategy="zero3", lora_r=16))
    assert zero3["lora"] == -(-counts.lora * 16 // 8)


def test_lora_save_matches_modules_as_peft_does_and_refuses_a_name_that_matches_none():
    """PEFT's modules_to_save matches a module whose full name ends with the name as a plain string
    (``norm``: every ``*norm`` module); the plan matched only whole leaf names (``norm``: the final
    norm alone), and a name matching nothing (a typo) was planned as nothing, silently."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    config = tiny_gpt_oss()
    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_config(config),
                           LoraConfig(r=4, target_modules=["q_proj"], modules_to_save=["norm"]))
    saved = sum(p.numel() for n, p in model.named_parameters() if p.requires_grad and "modules_to_save" in n)
    assert saved == count_parameters(config, lora_r=4, lora_saved=("norm",)).lora_saved
    assert saved > config.hidden_size  # every layer's norms, not only the final one
    with pytest.raises(ConfigError, match="--lora-save.*'lm_haed' names no module"):
        count_parameters(config, lora_r=4, lora_saved=("lm_haed",))


@pytest.mark.parametrize("sft, expected", [
    ({}, True),  # TRL's SFTConfig checkpoints by default: the run did, the pre-flight planned it without
    ({"gradient_checkpointing": False}, False),
    ({"activation_checkpointing": True}, True),
    ({"activation_checkpointing": False, "gradient_checkpointing": True}, False),  # the new name wins
])
def test_the_preflight_plans_activation_checkpointing_as_the_run_resolves_it(sft, expected, tmp_path):
    from trl import SFTConfig

    from beam_sft.train.plan import recipe_setup
    from beam_sft.train.recipe import recipe_from_dict

    recipe = recipe_from_dict({"model": {"path": "unused"}, "data": {"prepared": "unused"}, "sft": sft})
    setup = recipe_setup(recipe, world_size=2, gpu_memory_gib=80.0, strategy="zero3")
    assert setup.activation_checkpointing is expected
    assert SFTConfig(output_dir=str(tmp_path), use_cpu=True, **sft).activation_checkpointing is expected


@pytest.mark.parametrize("sft, expected", [
    ({}, "bfloat16"),  # TRL's SFTConfig: bf16 = not fp16 when unset; the pre-flight planned float32
    ({"fp16": True}, "float16"),
    ({"bf16": False}, "float32"),
    ({"bf16": True}, "bfloat16"),
])
def test_the_preflight_plans_an_auto_dtype_in_the_runs_mixed_precision(sft, expected):
    from trl import SFTConfig

    from beam_sft.train.plan import recipe_setup
    from beam_sft.train.recipe import recipe_from_dict

    recipe = recipe_from_dict({"model": {"path": "unused"}, "data": {"prepared": "unused"}, "sft": sft})
    assert recipe_setup(recipe, world_size=2, gpu_memory_gib=80.0, strategy="zero3").dtype == expected
    args = SFTConfig(output_dir="unused", use_cpu=True, **sft)
    assert {(True, False): "bfloat16", (False, True): "float16", (False, False): "float32"}[(args.bf16, args.fp16)] \
        == expected
