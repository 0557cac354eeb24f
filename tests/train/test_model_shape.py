"""``train/model_shape.py``: a model's config loaded from each kind of source, checked before the
config class runs (one ``ConfigError`` naming the key), and built on the meta device with no storage.
(The ``plan`` command's one-line errors on the same configs are in ``tests/train/test_plan.py``.)"""

from __future__ import annotations

import json

import pytest

from beam_sft.errors import BeamError, ConfigError
from beam_sft.train.model_shape import (
    NUM_EXPERTS_KEYS,
    SIZE_KEYS,
    TOP_K_KEYS,
    check_config,
    config_int,
    load_model_config,
    meta_model,
    text_config,
)
from tests.train.test_plan import TINY_BEAM


def test_none_is_beam_itself():
    config = load_model_config(None)
    assert type(config).__name__ == "BeamConfig" and config.model_type == "beam"


def test_a_config_json_a_folder_and_a_config_object_load_the_same(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY_BEAM), encoding="utf-8")
    from_file = load_model_config(tmp_path / "config.json")
    from_folder = load_model_config(tmp_path)
    same = {k: v for k, v in from_file.to_dict().items() if k != "_name_or_path"}
    assert same == {k: v for k, v in from_folder.to_dict().items() if k != "_name_or_path"}
    assert from_file.num_experts == 8
    assert load_model_config(from_file) is from_file


def test_the_raw_mapping_is_checked_by_key_before_the_config_class():
    check_config(dict(TINY_BEAM), "config.json")  # a good one passes
    with pytest.raises(ConfigError, match="num_hidden_layers") as info:
        check_config({**TINY_BEAM, "num_hidden_layers": 0}, "config.json")
    assert "in config.json" in str(info.value)
    with pytest.raises(ConfigError, match="num_experts_per_tok"):
        check_config({**TINY_BEAM, "num_experts_per_tok": 9}, "config.json")  # more than the 8 experts


def test_every_expert_and_top_k_key_is_bounded():
    assert set(NUM_EXPERTS_KEYS + TOP_K_KEYS) <= set(SIZE_KEYS)


def test_a_folder_without_config_json_is_one_line(tmp_path):
    with pytest.raises(BeamError, match="without config.json"):
        load_model_config(tmp_path)


def test_the_meta_build_has_shapes_and_no_storage(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY_BEAM), encoding="utf-8")
    config = load_model_config(tmp_path / "config.json")
    model = meta_model(config)
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert config_int(config, NUM_EXPERTS_KEYS) == 8 and config_int(config, TOP_K_KEYS) == 2
    assert text_config(config).hidden_size == 64
