"""Training: recipe -> TRL SFTTrainer on a prepared dataset, with a pre-flight before step 1.

Modules: ``recipe`` (typed recipe, value rules, typed overrides), ``data`` (prepared dataset),
``trainer`` (construction and ``train``), ``preflight`` and ``packing`` (checks before step 1),
``moe`` (experts, routers, ZeRO-3 leaves), ``ranks`` (bounded waits naming a silent rank),
``resume`` (checkpoint checks), ``cpu_fsdp`` (CPU FSDP launches; accelerate's private state is
in ``beam_sft.compat``),
``callbacks``, ``save``, ``merge`` (LoRA), ``cli`` (``beam-sft train``, ``beam-sft merge``).
"""

from __future__ import annotations

from pathlib import Path

from beam_sft.train.recipe import Recipe, load_recipe

__all__ = ["Recipe", "load_recipe", "train"]


def train(recipe: Recipe, **kwargs) -> Path:
    """Train per ``recipe``; returns the directory of the saved model or adapter."""
    from beam_sft.train.trainer import train as _train

    return _train(recipe, **kwargs)
