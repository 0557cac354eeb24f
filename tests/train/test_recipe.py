"""The typed recipe: defaults, overrides, and unknown or forbidden keys failing with their path."""

from __future__ import annotations

import pytest

from beam_sft.errors import ConfigError
from beam_sft.train.recipe import load_recipe, recipe_from_dict, sft_kwargs

BASE = {"model": {"path": "m"}, "data": {"prepared": "p"}}


def _recipe(**sections):
    return recipe_from_dict({**BASE, **sections})


def test_defaults():
    recipe = _recipe()
    assert recipe.assistant_only_loss is True
    assert recipe.lora is None
    assert recipe.model.attn_implementation == "sdpa"
    assert recipe.sft["output_dir"] == "out/train"
    # TRL's own flag stays off: the masks reach it as labels, and its flag wants a conversational dataset.
    assert sft_kwargs(recipe)["assistant_only_loss"] is False


@pytest.mark.parametrize(
    ("sections", "path"),
    [
        ({"sft": {"learning_rat": 1e-4}}, "sft.learning_rat"),
        ({"model": {"path": "m", "pth": "x"}}, "model.pth"),
        ({"lora": {"rank": 8}}, "lora.rank"),
        ({"preflight": {"batchez": 2}}, "preflight.batchez"),
        ({"trainer": {}}, "trainer"),
    ],
)
def test_unknown_key_fails_with_its_path(sections, path):
    with pytest.raises(ConfigError) as info:
        recipe_from_dict({**BASE, **sections})
    assert info.value.path == path
    assert str(info.value).startswith(f"{path}: unknown")


def test_unknown_sft_key_suggests_the_closest():
    with pytest.raises(ConfigError, match="did you mean learning_rate"):
        _recipe(sft={"learning_rat": 1e-4})


@pytest.mark.parametrize("key", ["dataset_text_field", "chat_template_path", "dataset_kwargs", "completion_only_loss"])
def test_keys_that_would_undo_the_contract_are_refused(key):
    with pytest.raises(ConfigError) as info:
        _recipe(sft={key: "x"})
    assert info.value.path == f"sft.{key}"


def test_sft_values_are_typed():
    with pytest.raises(ConfigError) as info:
        _recipe(sft={"max_steps": "many"})
    assert info.value.path == "sft.max_steps"
    # YAML 1.1 reads 1e-4 as a string; the field's type decides.
    assert _recipe(sft={"learning_rate": "1e-4"}).sft["learning_rate"] == pytest.approx(1e-4)


def test_overrides_on_top_of_yaml(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("model: {path: m}\ndata: {prepared: p}\nsft: {learning_rate: 1.0e-3, max_steps: 5}\n")
    recipe = load_recipe(path, ["--sft.learning_rate", "1e-4", "--lora.r=8", "--sft.packing", "true"])
    assert recipe.sft["learning_rate"] == pytest.approx(1e-4)
    assert recipe.sft["max_steps"] == 5
    assert recipe.lora is not None and recipe.lora.r == 8 and recipe.lora.alpha == 32
    assert recipe.sft["packing"] is True
    with pytest.raises(ConfigError) as info:
        load_recipe(path, ["--sft.learnig_rate", "1"])
    assert info.value.path == "sft.learnig_rate"


def test_data_needs_exactly_one_source():
    with pytest.raises(ConfigError, match="exactly one"):
        recipe_from_dict({"model": {"path": "m"}, "data": {}})
    with pytest.raises(ConfigError, match="exactly one"):
        recipe_from_dict({"model": {"path": "m"}, "data": {"prepared": "p", "prepare": {"sources": []}}})


def test_prepare_spec_is_checked_as_a_prepare_config():
    with pytest.raises(ConfigError) as info:
        recipe_from_dict({"model": {"path": "m"}, "data": {"prepare": {"sources": [], "max_lenght": 8}}})
    assert info.value.path == "data.prepare.max_lenght"


@pytest.mark.parametrize("strategy", ["wrapped", "bfd_split"])
def test_packing_strategies_that_break_sequences_are_refused(strategy):
    with pytest.raises(ConfigError) as info:
        _recipe(sft={"packing": True, "packing_strategy": strategy})
    assert info.value.path == "sft.packing_strategy"
    assert _recipe(sft={"packing": True, "packing_strategy": "bfd"}).sft["packing"] is True


def test_attention_implementation_is_one_we_know():
    with pytest.raises(ConfigError) as info:
        _recipe(model={"path": "m", "attn_implementation": "paged"})
    assert info.value.path == "model.attn_implementation"


def test_resume_accepts_true_or_a_path():
    assert _recipe(sft={"resume_from_checkpoint": True}).sft["resume_from_checkpoint"] is True
    assert "resume_from_checkpoint" not in sft_kwargs(_recipe(sft={"resume_from_checkpoint": "ckpt"}))
    with pytest.raises(ConfigError):
        _recipe(sft={"resume_from_checkpoint": 3})


def test_to_dict_round_trips():
    recipe = _recipe(lora={"r": 4}, sft={"max_steps": 3})
    assert recipe_from_dict(recipe.to_dict()) == recipe


def test_the_recorded_recipe_holds_no_secret():
    """beam_run.json (and so the merged or exported folder a user publishes) gets ``to_record``: the
    teacher URL's credentials and a hub token masked; what is not a secret kept as it is."""
    from beam_sft.train.run_log import run_record

    url = "http://alice:pw-SECRETPASS@127.0.0.1:1/v1?api-key=QUERYSECRET1&api-version=2"
    recipe = recipe_from_dict({"model": {"path": "m"}, "sft": {"hub_token": "hf_HUBSECRET123", "hub_model_id": "me/m"},
                               "data": {"prepare": {"tokenizer": "t", "output": "o", "sources": [{"path": "a.jsonl"}],
                                                    "reasoning": {"base_url": url, "model": "teacher"}}}})
    text = str(run_record(recipe, "p", None, prepared_data={}))
    for secret in ("pw-SECRETPASS", "QUERYSECRET1", "hf_HUBSECRET123"):
        assert secret not in text
    record = run_record(recipe, "p", None, prepared_data={})["recipe"]
    assert record["sft"]["hub_model_id"] == "me/m" and record["sft"]["hub_token"] == "***"
    assert record["data"]["prepare"]["reasoning"]["base_url"] == "http://***@127.0.0.1:1/v1?api-key=***&api-version=2"
    assert recipe.to_dict()["sft"]["hub_token"] == "hf_HUBSECRET123"  # the run itself still has it


# --- every value checked before any heavy work, with its full key path ---------------------------


@pytest.mark.parametrize(
    ("sections", "path"),
    [
        ({"sft": {"learning_rate": -1}}, "sft.learning_rate"),
        ({"sft": {"per_device_train_batch_size": 0}}, "sft.per_device_train_batch_size"),
        ({"sft": {"per_device_train_batch_size": -2}}, "sft.per_device_train_batch_size"),
        ({"sft": {"seed": -1}}, "sft.seed"),
        ({"sft": {"warmup_steps": -5}}, "sft.warmup_steps"),
        ({"sft": {"gradient_accumulation_steps": 0}}, "sft.gradient_accumulation_steps"),
        ({"sft": {"max_length": 0}}, "sft.max_length"),
        ({"sft": {"max_steps": -3}}, "sft.max_steps"),
        ({"sft": {"max_steps": 0}}, "sft.max_steps"),
        ({"sft": {"num_train_epochs": 0}}, "sft.num_train_epochs"),
        ({"sft": {"router_aux_loss_coef": -0.1}}, "sft.router_aux_loss_coef"),
        ({"sft": {"learning_rate": float("nan")}}, "sft.learning_rate"),
        # values TRL, transformers or numpy refused only after the model loaded, with a traceback
        ({"sft": {"seed": 99999999999}}, "sft.seed"),
        ({"sft": {"data_seed": 2**32}}, "sft.data_seed"),
        ({"sft": {"logging_steps": 2.5}}, "sft.logging_steps"),
        ({"sft": {"label_smoothing_factor": 2}}, "sft.label_smoothing_factor"),
        ({"sft": {"neftune_noise_alpha": -1}}, "sft.neftune_noise_alpha"),
        ({"sft": {"eval_accumulation_steps": 0}}, "sft.eval_accumulation_steps"),
        ({"sft": {"dataloader_prefetch_factor": 0}}, "sft.dataloader_prefetch_factor"),
        ({"sft": {"loss_type": "foo"}}, "sft.loss_type"),
        ({"sft": {"report_to": "wandbx"}}, "sft.report_to"),
        ({"sft": {"report_to": ["tensorboard", "nope"]}}, "sft.report_to"),
        ({"lora": {"r": -8}}, "lora.r"),
        ({"lora": {"r": 0}}, "lora.r"),
        ({"lora": {"dropout": 2.0}}, "lora.dropout"),
        ({"lora": {"dropout": -0.1}}, "lora.dropout"),
        ({"lora": {"alpha": 0}}, "lora.alpha"),
        ({"lora": {"experts": True, "dropout": 0.05}}, "lora.dropout"),
        ({"lora": {"target_parameters": [], "dropout": 0.0}}, "lora.target_parameters"),
        ({"preflight": {"packing_tolerance": -1}}, "preflight.packing_tolerance"),
        ({"preflight": {"packing_tolerance": 1e9}}, "preflight.packing_tolerance"),
        ({"preflight": {"packing_tolerance": 0}}, "preflight.packing_tolerance"),
        ({"preflight": {"timeout": 0}}, "preflight.timeout"),
        ({"preflight": {"timeout": -5}}, "preflight.timeout"),
        # a process group's timeout is a timedelta: these overflowed with a traceback at launch
        ({"preflight": {"timeout": 1e300}}, "preflight.timeout"),
        ({"sft": {"ddp_timeout": 10**30}}, "sft.ddp_timeout"),
    ],
)
def test_out_of_range_values_fail_with_their_path(sections, path):
    with pytest.raises(ConfigError) as info:
        recipe_from_dict({**BASE, **sections})
    assert info.value.path == path
    assert str(info.value).startswith(f"{path}: ")


@pytest.mark.parametrize(
    "sections",
    [
        {"sft": {"max_steps": -1}},  # TRL's "unset": train num_train_epochs
        {"sft": {"warmup_steps": 0.03, "seed": 0, "max_length": None}},
        {"sft": {"logging_steps": 0.1, "seed": 2**32 - 1, "loss_type": "dft", "report_to": ["tensorboard"],
                 "label_smoothing_factor": 0.1, "neftune_noise_alpha": 5}},
        {"lora": {"r": 1, "dropout": 0.0, "experts": True}},
        {"preflight": {"packing_tolerance": 1e-3, "timeout": 30}},
    ],
)
def test_values_in_range_pass(sections):
    recipe_from_dict({**BASE, **sections})


def test_string_fields_keep_the_raw_text_of_an_override(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("model: {path: m}\ndata: {prepared: p}\n")
    recipe = load_recipe(path, ["--sft.run_name", "2024.10", "--sft.output_dir=1e3", "--model.path", "007",
                                "--sft.learning_rate", "2e-5", "--sft.max_steps", "7", "--sft.resume_from_checkpoint",
                                "true", "--lora.target_modules", "[q_proj, v_proj]"])
    assert recipe.sft["run_name"] == "2024.10"
    assert recipe.sft["output_dir"] == "1e3"
    assert recipe.model.path == "007"
    assert recipe.sft["learning_rate"] == pytest.approx(2e-5) and recipe.sft["max_steps"] == 7
    assert recipe.sft["resume_from_checkpoint"] is True
    assert recipe.lora.target_modules == ["q_proj", "v_proj"]


def test_missing_model_path_fails_before_any_work(tmp_path):
    from beam_sft.train.trainer import build

    recipe = recipe_from_dict({"data": {"prepared": str(tmp_path / "never-read")}})
    with pytest.raises(ConfigError) as info:
        build(recipe)
    assert info.value.path == "model.path"


@pytest.mark.parametrize("value", ["", "   ", None, 3])
def test_an_empty_or_missing_output_dir_is_refused_at_load(value):
    """An empty output_dir is the working folder: the model card would replace ./README.md there."""
    with pytest.raises(ConfigError) as info:
        _recipe(sft={"output_dir": value})
    assert info.value.path == "sft.output_dir"


@pytest.mark.parametrize(("key", "value", "hint"), [
    ("lr_scheduler_type", "cosinee", "cosine"),
    ("optim", "adamw_torchh", "adamw_torch"),
    ("save_strategy", "stepz", "steps"),
    ("logging_strategy", "epochs", "epoch"),
])
def test_an_enum_value_that_is_not_one_fails_at_load_with_its_path(key, value, hint):
    with pytest.raises(ConfigError) as info:
        _recipe(sft={key: value})
    assert info.value.path == f"sft.{key}" and f"did you mean {hint}?" in str(info.value)
    assert _recipe(sft={key: hint}).sft[key] == hint


def test_sftconfigs_own_refusal_is_one_config_line_not_a_traceback():
    from beam_sft.train.trainer import build_sft_config

    recipe = _recipe(sft={"bf16": True, "use_cpu": False, "output_dir": "o"})
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU supports bf16: SFTConfig accepts it")
    with pytest.raises(ConfigError) as info:
        build_sft_config(recipe)
    assert info.value.path == "sft" and "SFTConfig refused it" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("targets", [[], "", "  "])
def test_an_empty_lora_target_list_is_refused_at_load(targets):
    with pytest.raises(ConfigError) as info:
        _recipe(lora={"target_modules": targets})
    assert info.value.path == "lora.target_modules"


def test_a_prepare_section_that_is_not_a_mapping_says_so():
    with pytest.raises(ConfigError) as info:
        recipe_from_dict({"model": {"path": "m"}, "data": {"prepare": [{"path": "a.jsonl"}]}})
    assert info.value.path == "data.prepare" and "expected a mapping" in str(info.value)
