from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from beam_sft.config_utils import deep_merge, from_dict, parse_overrides
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
