from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from beam_sft.config_utils import deep_merge, from_dict, load_json_config, parse_overrides
from beam_sft.errors import ConfigError


@dataclass(frozen=True)
class Inner:
    r: int = 8
    targets: list[str] = field(default_factory=lambda: ["q_proj"])


@dataclass(frozen=True)
class Outer:
    name: str = "x"
    lr: float = 1e-4
    policy: Literal["drop", "trim_turns"] = "drop"
    out: Path | None = None
    lora: Inner | None = None
    extra: dict = field(default_factory=dict)


def test_nested_unknown_key_names_full_path():
    with pytest.raises(ConfigError, match=r"^lora\.rank: unknown key"):
        from_dict(Outer, {"lora": {"rank": 4}})


def test_types_are_checked_with_path():
    with pytest.raises(ConfigError, match=r"lora\.r: expected an integer"):
        from_dict(Outer, {"lora": {"r": "eight"}})
    with pytest.raises(ConfigError, match=r"lora\.targets\[1\]: expected a string"):
        from_dict(Outer, {"lora": {"targets": ["a", 3]}})
    with pytest.raises(ConfigError, match=r"policy: 'cut' is not one of"):
        from_dict(Outer, {"policy": "cut"})


def test_values_are_coerced():
    cfg = from_dict(Outer, {"lr": 1, "out": "a/b", "lora": {}, "policy": "trim_turns"})
    assert cfg.lr == 1.0 and isinstance(cfg.lr, float)
    assert cfg.out == Path("a/b")
    assert cfg.lora == Inner()
    assert cfg.policy == "trim_turns"
    assert from_dict(Outer, None) == Outer()


def test_overrides_parse_and_merge():
    over = parse_overrides(["--lora.r", "16", "--lr=2e-5", "--name", "run", "--out", "null"])
    assert over == {"lora": {"r": 16}, "lr": 2e-5, "name": "run", "out": None}
    merged = deep_merge({"lora": {"r": 8, "targets": ["k"]}, "lr": 1.0}, over)
    assert merged["lora"] == {"r": 16, "targets": ["k"]}
    assert from_dict(Outer, merged).lora == Inner(r=16, targets=["k"])


def test_override_without_value_fails():
    with pytest.raises(ConfigError, match="missing value"):
        parse_overrides(["--lr"])
    with pytest.raises(ConfigError, match="expected --section.key"):
        parse_overrides(["lr", "1"])


@pytest.mark.parametrize("argv", [["--.seed", "1"], ["--sft..seed", "1"], ["--sft.", "1"], ["--sft.seed.", "1"], ["--=1"]])
def test_override_with_an_empty_key_name_fails(argv):
    """An empty part of the key path named no key: it reached the recipe as the key "" and was
    blamed on the YAML file ("r.yaml: unknown key", with no key), or as "sft." on TRL."""
    with pytest.raises(ConfigError, match="empty name in the key path"):
        parse_overrides(argv)


@dataclass(frozen=True)
class Checked:
    size: int = 1

    def __post_init__(self):
        if self.size < 1:
            raise ConfigError("size", f"must be at least 1, got {self.size}")


@dataclass(frozen=True)
class Holder:
    inner: list[Checked] = field(default_factory=list)


def test_value_errors_carry_the_full_key_path():
    with pytest.raises(ConfigError, match=r"^data\.prepare\.size: must be at least 1, got 0$") as info:
        from_dict(Checked, {"size": 0}, "data.prepare")
    assert info.value.path == "data.prepare.size"
    with pytest.raises(ConfigError, match=r"^top\.inner\[1\]\.size: must be at least 1") as info:
        from_dict(Holder, {"inner": [{"size": 2}, {"size": -1}]}, "top")
    with pytest.raises(ConfigError, match=r"^size: "):  # no prefix: the key alone
        from_dict(Checked, {"size": 0})


def test_prepare_config_value_errors_carry_the_full_key_path():
    from beam_sft.prepare.config import PrepareConfig

    with pytest.raises(ConfigError, match=r"^data\.prepare\.max_length: must be at least 1, got 0$"):
        from_dict(PrepareConfig, {"max_length": 0}, "data.prepare")
    with pytest.raises(ConfigError, match=r"^data\.prepare\.sources\[0\]\.weight: must be from 0 to 1000"):
        from_dict(PrepareConfig, {"sources": [{"path": "a", "weight": -1}]}, "data.prepare")
    with pytest.raises(ConfigError, match=r"^data\.prepare\.sources\[0\]\.format: 'jsonl' is not one of auto, "):
        from_dict(PrepareConfig, {"sources": [{"path": "a", "format": "jsonl"}]}, "data.prepare")


def test_yaml_numbers_have_one_home():
    """YAML 1.1 reads 1e-4 as a string; typed fields read it as their number, string fields keep it."""
    from beam_sft.config_utils import yaml_number
    from beam_sft.train import recipe

    assert from_dict(Outer, {"lr": "1e-4"}).lr == 1e-4
    assert from_dict(Inner, {"r": "8"}).r == 8
    assert from_dict(Outer, {"name": "1e-4"}).name == "1e-4"
    assert yaml_number("2024.10", str | None) == "2024.10"
    assert yaml_number("nan") == "nan"  # only numerals are numbers
    assert recipe._number("1e-4", float | None) == 1e-4  # the recipe uses this same function
    import inspect

    assert "yaml_number" in inspect.getsource(recipe._number)


def test_a_json_config_with_a_key_given_twice_is_refused(tmp_path):
    """json.loads keeps the last of two values for one key: a model's config.json planned with
    num_hidden_layers 4 then 52 was planned as 52, silently (YAML configs already refuse this)."""
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "beam", "layers": {"n": 4, "n": 52}}')
    with pytest.raises(ConfigError, match=r"^n: given twice in one object of .*config\.json"):
        load_json_config(path)
    path.write_text('{"model_type": "beam", "layers": {"n": 4}, "n": 52}')
    assert load_json_config(path) == {"model_type": "beam", "layers": {"n": 4}, "n": 52}
