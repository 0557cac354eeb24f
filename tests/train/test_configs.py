"""Every shipped recipe, accelerate config and DeepSpeed JSON loads and validates (found recursively)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from beam_sft.train.recipe import load_recipe

REPO = Path(__file__).resolve().parents[2]
RECIPES = sorted((REPO / "recipes").rglob("*.yaml"))
ACCELERATE = sorted((REPO / "configs" / "accelerate").rglob("*.yaml"))
DEEPSPEED = sorted((REPO / "configs" / "deepspeed").rglob("*.json"))
# "auto" values the Trainer fills in from the SFTConfig; a test value stands in for each.
AUTO_STAND_INS = {
    "enabled": False, "train_batch_size": 2, "train_micro_batch_size_per_gpu": 1,
    "gradient_accumulation_steps": 2, "gradient_clipping": 1.0, "reduce_bucket_size": 1000,
    "stage3_prefetch_bucket_size": 1000, "stage3_param_persistence_threshold": 1000,
}


def _ids(paths):
    return [str(p.relative_to(REPO)) for p in paths]


def test_every_kind_is_shipped():
    names = {p.name for p in RECIPES}
    assert {"tiny-cpu.yaml", "tiny-cpu-lora.yaml", "beam-full-zero3.yaml", "beam-lora.yaml",
            "tiny-cpu-beam.yaml", "tiny-cpu-beam-lora.yaml", "tiny-cpu-moe.yaml"} <= names
    names = {p.stem for p in ACCELERATE}
    for kind in ("ddp", "zero2", "zero3", "fsdp2"):
        assert {kind, f"cpu-{kind}"} <= names
    assert {"zero2.json", "zero3.json"} <= {p.name for p in DEEPSPEED}


@pytest.mark.parametrize("path", RECIPES, ids=_ids(RECIPES))
def test_recipe_loads_and_opens_with_its_purpose_hardware_and_launch_line(path):
    recipe = load_recipe(path, ["--model.path", "some/model"])
    assert recipe.sft["output_dir"]
    header = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    text = "\n".join(header)
    assert "Purpose:" in text and "Hardware:" in text
    launch = [line for line in header if "accelerate launch --config_file configs/accelerate/" in line]
    assert launch, f"{path.name}: no launch line in the header"
    config = launch[0].split("--config_file ")[1].split()[0]
    assert (REPO / config).is_file(), f"{path.name}: launch line names a missing {config}"
    assert f"--config recipes/{path.name}" in launch[0]
    if path.stem.startswith("tiny-cpu-beam"):  # Beam's own architecture: the fixture it expects, how to build it
        assert yaml.safe_load(path.read_text(encoding="utf-8"))["model"]["path"] == "out/fixture-beam"
        assert "beam-sft fixture --arch beam --out out/fixture-beam" in text
        assert config.endswith("cpu-fsdp2.yaml" if recipe.lora is None else "cpu-zero3.yaml")
        assert not recipe.sft.get("router_aux_loss_coef") and "logged as aux_loss" not in text
        assert recipe.format_health.steps > 0 and recipe.data.eval is not None
        if recipe.lora is not None:
            assert recipe.lora.experts and not recipe.lora.train_routers
            assert recipe.lora.target_modules == "beam-attention-mlp"
    if "moe" in path.stem:  # gpt_oss: sinks (eager only) and a softmax router with its aux loss
        assert yaml.safe_load(path.read_text(encoding="utf-8"))["model"]["path"] == "out/fixture-moe"
        assert "beam-sft fixture --arch gpt_oss --out out/fixture-moe" in text
        assert recipe.model.attn_implementation == "eager" and recipe.lora is None
        assert config.endswith("cpu-fsdp2.yaml") and recipe.sft["router_aux_loss_coef"] > 0


def test_moe_recipes_train_what_they_say(tmp_path):
    """The Beam recipes build against the fixture they name: the LoRA one adapts exactly attention, the
    output gate, the dense MLP and the experts with the routers frozen; the full one takes no aux loss;
    the gpt_oss one validates its aux loss."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from beam_sft.harmony.fixture import build_fixture
    from beam_sft.train.routers import check_aux_loss
    from beam_sft.train.trainer import lora_config

    model_dir = build_fixture(tmp_path / "fixture-beam", arch="beam")
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    recipe = load_recipe(REPO / "recipes" / "tiny-cpu-beam-lora.yaml", ["--model.path", str(model_dir)])
    config = lora_config(recipe, model)
    layers, dense = model.config.num_hidden_layers, model.config.mlp_layer_types.count("dense")
    assert set(config.target_modules) == {f"model.layers.{i}.self_attn.{p}" for i in range(layers)
                                          for p in ("q_proj", "k_proj", "v_proj", "o_proj")}
    parameters = set(config.target_parameters)
    assert {"mlp.experts.gate_up_proj", "mlp.experts.down_proj"} <= parameters
    assert len([p for p in parameters if p.endswith("self_attn.gate_proj.weight")]) == layers
    assert len([p for p in parameters if ".mlp." in p and p.endswith(".weight")]) == 3 * dense
    assert set(config.exclude_modules) == {f"model.layers.{i}.mlp.gate" for i in range(dense, layers)}
    for name in ("tiny-cpu-beam.yaml", "tiny-cpu-beam-lora.yaml"):
        check_aux_loss(AutoConfig.from_pretrained(model_dir), load_recipe(REPO / "recipes" / name).sft)
    gpt = build_fixture(tmp_path / "fixture-moe", arch="gpt_oss")
    check_aux_loss(AutoConfig.from_pretrained(gpt), load_recipe(REPO / "recipes" / "tiny-cpu-moe.yaml").sft)


@pytest.mark.parametrize("path", RECIPES, ids=_ids(RECIPES))
def test_recipe_data_spec_is_a_valid_prepare_config(path):
    from beam_sft.config_utils import from_dict
    from beam_sft.prepare.config import PrepareConfig

    spec = load_recipe(path, ["--model.path", "m"]).data.prepare
    if spec is not None:
        from_dict(PrepareConfig, spec, "data.prepare")


@pytest.mark.parametrize("path", ACCELERATE, ids=_ids(ACCELERATE))
def test_accelerate_config_is_valid(path):
    from accelerate.commands.config.config_args import ClusterConfig
    from accelerate.commands.launch import launch_command_parser

    config = ClusterConfig.from_yaml_file(str(path))  # unknown top-level keys raise
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    # accelerate copies the nested keys onto its launch arguments and ignores unknown ones: check them.
    known = {action.dest for action in launch_command_parser()._actions}
    for section in ("fsdp_config", "deepspeed_config"):
        for key in raw.get(section) or {}:
            assert key in known, f"{path.name}: {section}.{key} is not an accelerate launch option"
    kind = str(config.distributed_type).split(".")[-1]
    assert kind in {"MULTI_GPU", "DEEPSPEED", "FSDP"}
    if path.stem.startswith("cpu-"):
        assert config.use_cpu is True and config.num_processes == 2
    if kind == "DEEPSPEED":
        ds_file = REPO / raw["deepspeed_config"]["deepspeed_config_file"]
        assert ds_file.is_file()
        assert "mixed_precision" not in raw, "with a DeepSpeed JSON, precision comes from its bf16 'auto'"
        if "zero3" in path.stem:
            assert json.loads(ds_file.read_text())["zero_optimization"]["stage"] == 3
    if kind == "FSDP":
        assert raw["fsdp_config"]["fsdp_version"] == 2
        # Sharded saves: a full state dict would gather the whole model onto one process.
        assert raw["fsdp_config"]["fsdp_state_dict_type"] == "SHARDED_STATE_DICT"


def _stand_in(value, key=None):
    if isinstance(value, dict):
        return {k: _stand_in(v, k) for k, v in value.items()}
    return AUTO_STAND_INS[key] if value == "auto" else value


@pytest.mark.parametrize("path", DEEPSPEED, ids=_ids(DEEPSPEED))
def test_deepspeed_config_is_valid(path):
    import deepspeed.runtime.constants as constants
    from deepspeed.runtime.config import DeepSpeedConfig
    from deepspeed.runtime.zero.config import ZERO_OPTIMIZATION

    raw = json.loads(path.read_text(encoding="utf-8"))
    known = {v for k, v in vars(constants).items() if k.isupper() and isinstance(v, str)} | {ZERO_OPTIMIZATION}
    unknown = sorted(set(raw) - known)
    assert not unknown, f"{path.name}: unknown DeepSpeed keys {unknown}"
    # The Trainer fills these from the SFTConfig, so the JSON must leave them to it.
    for key in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "gradient_clipping"):
        assert raw[key] == "auto", f"{path.name}: {key} must be 'auto'"
    assert raw["bf16"]["enabled"] == "auto", "TRL's bf16 default fails DeepSpeed's check unless 'auto'"
    config = DeepSpeedConfig(_stand_in(raw))  # the zero section is a strict pydantic model
    if config.zero_optimization_stage == 3:
        assert config.zero_config.gather_16bit_weights_on_model_save is False  # sharded saves
