"""LoRA names that mean what they say on Beam (beam_sft/train/lora_targets.py): for each preset, the
exact weights (linear layers' and fused expert tensors) that get adapters on the ``beam`` fixture,
listed from its config independently of the code under test; no router ever gets one. PEFT would
rename Beam's gate_proj/up_proj/down_proj into the fused experts: shown, and avoided."""

from __future__ import annotations

import pytest

from beam_sft.errors import ConfigError
from beam_sft.train.moe import moe_layout
from beam_sft.train.recipe import recipe_from_dict
from beam_sft.train.trainer import lora_config

from .conftest import recipe_dict

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj")  # gate_proj: the sigmoid output gate
DENSE_MLP = ("gate_proj", "up_proj", "down_proj")


@pytest.fixture(scope="module")
def beam(moe_dirs):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(moe_dirs["beam"])


def _expected(config, *, mlp: bool, experts: bool) -> set[str]:
    """The weights that must get adapters, from the config alone."""
    layers = range(config.num_hidden_layers)
    weights = {f"model.layers.{i}.self_attn.{p}.weight" for i in layers for p in ATTENTION}
    if mlp:
        weights |= {f"model.layers.{i}.mlp.{p}.weight" for i in layers if config.mlp_layer_types[i] == "dense"
                    for p in DENSE_MLP}
    if experts:
        weights |= {f"model.layers.{i}.mlp.experts.{p}" for i in layers if config.mlp_layer_types[i] == "sparse"
                    for p in ("gate_up_proj", "down_proj")}
    return weights


def _weights(tuner) -> set[str]:
    """What PEFT adapted: its targeted modules' weights and its targeted parameters."""
    modules = {f"{m}.weight" for m in tuner.targeted_module_names}
    return modules | set(getattr(tuner, "targeted_parameter_names", []) or [])


def _adapted(beam, moe_dirs, tmp_path, **lora) -> tuple[set[str], list[str]]:
    import copy

    from peft import get_peft_model

    recipe = recipe_from_dict(recipe_dict(moe_dirs["beam"], tmp_path, tmp_path / "o",
                                          lora={"r": 2, "alpha": 4, "dropout": 0.0, **lora}))
    model = copy.deepcopy(beam)
    peft_model = get_peft_model(model, lora_config(recipe, model))
    trainable = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    return _weights(peft_model.base_model), trainable


@pytest.mark.parametrize(("target_modules", "mlp", "experts"), [
    ("beam-attention", False, False),
    ("beam-attention", False, True),
    ("beam-attention-mlp", False, False),  # mlp filled in below
    ("beam-attention-mlp", True, True),
    ("all-linear", True, False),
    ("all-linear", True, True),
], ids=["attention", "attention+experts", "attention-mlp", "attention-mlp+experts", "all-linear",
        "all-linear+experts"])
def test_each_preset_adapts_exactly_its_modules(target_modules, mlp, experts, beam, moe_dirs, tmp_path):
    mlp = mlp or target_modules == "beam-attention-mlp"
    adapted, trainable = _adapted(beam, moe_dirs, tmp_path, target_modules=target_modules, experts=experts)
    assert adapted == _expected(beam.config, mlp=mlp, experts=experts)
    # Only adapters train: no router (mlp.gate), no base weight, no head.
    assert trainable and all(".lora_" in n for n in trainable)
    assert not [n for n in trainable if ".mlp.gate." in n or "lm_head" in n]


def test_all_linear_never_reaches_a_router(beam, moe_dirs, tmp_path):
    adapted, _ = _adapted(beam, moe_dirs, tmp_path, target_modules="all-linear")
    routers = set(moe_layout(beam).routers)
    assert routers and not [w for w in adapted if w.rsplit(".", 1)[0] in routers or ".mlp.gate." in w]
    # Beam's two gate_proj are both there, told apart by their full names, and no expert tensor.
    assert {"model.layers.0.self_attn.gate_proj.weight", "model.layers.0.mlp.gate_proj.weight"} <= adapted
    assert not [w for w in adapted if ".experts." in w]


def test_peft_alone_renames_beams_gate_proj_into_the_experts(beam):
    """What lora_targets avoids: PEFT's v4->v5 conversion takes the attention output gate's full name
    for an expert projection (and its own all-linear adds the router's weight)."""
    import copy

    from peft import LoraConfig, get_peft_model

    with pytest.raises(ValueError, match="fused into gate_up_proj"):
        get_peft_model(copy.deepcopy(beam), LoraConfig(r=2, target_modules=["model.layers.0.self_attn.gate_proj"]))
    plain = get_peft_model(copy.deepcopy(beam), LoraConfig(r=2, target_modules="all-linear"))
    adapted = _weights(plain.base_model)
    assert "model.layers.1.mlp.gate.weight" in adapted  # the router
    assert "model.layers.0.self_attn.gate_proj.weight" not in adapted


def test_renamed_weights_need_dropout_zero(beam, moe_dirs, tmp_path):
    recipe = recipe_from_dict(recipe_dict(moe_dirs["beam"], tmp_path, tmp_path / "o",
                                          lora={"target_modules": "beam-attention", "dropout": 0.05}))
    with pytest.raises(ConfigError) as info:
        lora_config(recipe, beam)
    assert info.value.path == "lora.dropout" and "self_attn.gate_proj" in str(info.value)


def test_presets_are_checked(beam, moe_dirs, tmp_path):
    from transformers import AutoModelForCausalLM

    with pytest.raises(ConfigError) as info:
        recipe_from_dict(recipe_dict(moe_dirs["beam"], tmp_path, tmp_path / "o",
                                     lora={"target_modules": "beam-attn", "dropout": 0.0}))
    assert info.value.path == "lora.target_modules" and "beam-attention-mlp" in str(info.value)
    recipe = recipe_from_dict(recipe_dict(moe_dirs["gpt_oss"], tmp_path, tmp_path / "o",
                                          lora={"target_modules": "beam-attention", "dropout": 0.0}))
    with pytest.raises(ConfigError, match="a preset for Beam"):
        lora_config(recipe, AutoModelForCausalLM.from_pretrained(moe_dirs["gpt_oss"]))


def test_a_listed_module_that_names_nothing_is_refused_with_its_key(beam, moe_dirs, tmp_path):
    """PEFT refused it only when the trainer wrapped the model, with a traceback."""
    recipe = recipe_from_dict(recipe_dict(moe_dirs["beam"], tmp_path, tmp_path / "o",
                                          lora={"target_modules": ["q_proj", "q_prj"], "dropout": 0.0}))
    with pytest.raises(ConfigError) as info:
        lora_config(recipe, beam)
    assert info.value.path == "lora.target_modules" and "'q_prj' names no module" in str(info.value)
    assert "did you mean q_proj?" in str(info.value)
    fine = recipe_from_dict(recipe_dict(moe_dirs["beam"], tmp_path, tmp_path / "o",
                                        lora={"target_modules": ["q_proj", "self_attn.o_proj"], "dropout": 0.0}))
    lora_config(fine, beam)


@pytest.mark.parametrize(("lora", "said"), [
    ({"modules_to_save": ["lm_head", "lm_haed"]},
     "lora.modules_to_save: 'lm_haed' names no module of this model (did you mean lm_head? its modules: "),
    ({"target_parameters": ["mlp.experts.gate_up_prj"]},
     "lora.target_parameters: 'mlp.experts.gate_up_prj' names no parameter of this model (did you mean "
     "mlp.experts.gate_up_proj?"),
    ({"target_modules": r".*\.q_prj"}, "lora.target_modules: '.*\\\\.q_prj' matches no module of this model"),
    ({"target_modules": "q_proj(["}, "lora.target_modules: 'q_proj([': PEFT reads a string as a regular expression"),
], ids=["modules_to_save", "target_parameters", "pattern", "bad-pattern"])
def test_a_listed_name_that_matches_nothing_is_refused_with_its_key(beam, moe_dirs, tmp_path, lora, said):
    """PEFT trains nothing for a modules_to_save or target_parameters name that matches nothing, without a
    word (the GPU pre-flight's plan caught modules_to_save alone, a CPU run nothing), and refuses a pattern
    that matches nothing only once the trainer wraps the model, with a traceback."""
    recipe = recipe_from_dict(recipe_dict(moe_dirs["beam"], tmp_path, tmp_path / "o", lora={"dropout": 0.0, **lora}))
    with pytest.raises(ConfigError) as info:
        lora_config(recipe, beam)
    assert str(info.value).startswith(said)


def test_names_match_as_peft_matches_them(beam, moe_dirs, tmp_path):
    """modules_to_save by a plain suffix (``norm``: every ``*norm``), listed targets by dotted parts,
    a string target as a regular expression over full names."""
    for lora in ({"modules_to_save": ["norm", "embed_tokens"]}, {"target_parameters": ["experts.down_proj"]},
                 {"target_modules": r".*\.self_attn\.q_proj"}):
        lora_config(recipe_from_dict(recipe_dict(moe_dirs["beam"], tmp_path, tmp_path / "o",
                                                 lora={"dropout": 0.0, **lora})), beam)


def test_a_cpu_run_refuses_a_bad_modules_to_save_before_training(fixture_dir, prepared_dir, tmp_path):
    from beam_sft.train.trainer import build

    recipe = recipe_from_dict(recipe_dict(fixture_dir, prepared_dir, tmp_path / "o",
                                          lora={"r": 4, "dropout": 0.0, "modules_to_save": ["lm_haed"]}))
    with pytest.raises(ConfigError) as info:
        build(recipe)
    assert info.value.path == "lora.modules_to_save" and "'lm_haed'" in str(info.value)


def test_the_trainer_builds_the_preset_with_frozen_routers(moe_dirs, prepared_dir, tmp_path):
    from beam_sft.train.trainer import build

    recipe = recipe_from_dict(recipe_dict(moe_dirs["beam"], prepared_dir, tmp_path / "o",
                                          lora={"r": 2, "alpha": 4, "dropout": 0.0, "experts": True,
                                                "target_modules": "beam-attention-mlp"},
                                          preflight={"enabled": False}))
    model = build(recipe).trainer.model
    assert _weights(model.base_model) == _expected(model.get_base_model().config, mlp=True, experts=True)
    assert not [n for n, p in model.named_parameters() if p.requires_grad and ".mlp.gate." in n]
