"""train/launch.py is the one table of launchers and the one module that asks accelerate how a run
was launched: every configs/accelerate/*.yaml starts exactly one of its launchers, its strategies are
the planner's and ``plan --strategy``'s, and no other module reads the distributed type or the
launch environment itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from beam_sft.train import launch, plan

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "configs" / "accelerate").glob("*.yaml"))
_LAUNCH_ENV = ("ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED", "ACCELERATE_DEEPSPEED", "ACCELERATE_USE_CPU")


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_each_accelerate_config_is_exactly_one_launcher_named_by_its_file(path):
    found = launch.launcher_of_config(yaml.safe_load(path.read_text(encoding="utf-8")), ROOT)
    assert path.stem.removeprefix("cpu-").removeprefix("multinode-") == found.strategy


def test_every_launcher_has_a_config_and_a_cpu_twin():
    stems = {p.stem for p in CONFIGS}
    for x in launch.LAUNCHERS:
        assert x.strategy in stems and f"cpu-{x.strategy}" in stems, x.strategy
    assert len({(x.distributed_type, x.zero_stage) for x in launch.LAUNCHERS}) == len(launch.LAUNCHERS)


def test_planner_and_cli_take_the_table():
    from beam_sft.cli import build_parser

    assert plan.STRATEGIES is launch.STRATEGIES and plan.strategy_from_environment is launch.strategy_from_environment
    sub = next(a for a in build_parser()._actions if a.dest == "command")  # argparse: no public lookup
    strategy = next(a for a in sub.choices["plan"]._actions if a.dest == "strategy")
    assert tuple(strategy.choices) == launch.STRATEGIES and strategy.default == launch.STRATEGIES[0]


def test_no_other_module_inspects_the_distributed_type_or_the_launch_environment():
    package = ROOT / "beam_sft"
    offenders = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel == "train/launch.py" or rel.startswith("compat/"):  # compat/ holds accelerate's internals
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr == "distributed_type"
                    and getattr(node.value, "id", "") != "launch"):  # launch.distributed_type(...) asks the table
                offenders.append(f"{rel}:{node.lineno} .distributed_type")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(_LAUNCH_ENV):
                offenders.append(f"{rel}:{node.lineno} {node.value}")
    assert not offenders
