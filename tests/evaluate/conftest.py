"""Prepared folders and models for the eval tests, built here (the folders in the form ``prepare`` writes,
by ``tests/train/conftest.py``'s ``write_prepared``).

``memorized_model``: the fixture Llama trained (``beam-sft train``, CPU, about 30 s of steps) until it
writes the three rows of ``MEMORIZED_ROWS`` back exactly: valid tool calls and answers, so the served
and local runs are compared on real tool calls, not on noise. Slow tier only.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.train.conftest import WEATHER, recipe_dict, train_rows, write_prepared

REPO_ROOT = Path(__file__).resolve().parents[2]


def _tool_row(i: int, city: str, temp: int, sky: str) -> dict:
    call = {"id": f"call_{i}", "type": "function", "function": {"name": "get_weather", "arguments": {"city": city}}}
    return {"messages": [
        {"role": "user", "content": f"Weather in {city}?"},
        {"role": "assistant", "reasoning_content": "Call the tool.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": f"{temp} C, {sky}"},
        {"role": "assistant", "reasoning_content": "Report it.", "content": f"{temp} C and {sky} in {city}."}],
        "tools": [WEATHER], "meta": {"source": "tool.jsonl", "row": i}}


MEMORIZED_ROWS = [
    _tool_row(0, "Paris", 21, "sunny"),
    {"messages": [{"role": "user", "content": "What is 2 + 3?"},
                  {"role": "assistant", "reasoning_content": "Add 2 and 3.", "content": "5"}],
     "meta": {"source": "qa.jsonl", "row": 1}},
    _tool_row(2, "Oslo", 3, "rainy"),
]


@pytest.fixture(scope="session")
def eval_prepared(tmp_path_factory, tokenizer) -> Path:
    """Eight rows of every kind the training tests use (answers, multi-turn with weight 0, tool calls)."""
    return write_prepared(tmp_path_factory.mktemp("eval_prepared"), train_rows(8), tokenizer)


@pytest.fixture(scope="session")
def memorized_prepared(tmp_path_factory, tokenizer) -> Path:
    return write_prepared(tmp_path_factory.mktemp("memorized_prepared"), MEMORIZED_ROWS, tokenizer)


@pytest.fixture(scope="session")
def memorized_model(tmp_path_factory, fixture_dir, memorized_prepared) -> Path:
    work = tmp_path_factory.mktemp("memorized")
    recipe = recipe_dict(fixture_dir, memorized_prepared, work / "model",
                         sft={"max_steps": 60, "learning_rate": 1e-2, "per_device_train_batch_size": 3,
                              "use_cpu": True, "logging_steps": 20})
    (work / "recipe.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "2", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-m", "beam_sft", "train", "--config", str(work / "recipe.yaml")],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return work / "model"
