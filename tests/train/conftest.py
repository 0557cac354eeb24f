"""Prepared datasets for the training tests, built here (not by ``beam-sft prepare``), in the form
``prepare`` writes (``beam_sft.dataset_folder``: int32 ids, int8 masks, a report with the files' digests
and a verify section); ``tests/test_prepare_to_train.py`` trains on real ``prepare`` output.

Rows are short (about 80-250 fixture tokens) and their answers follow from their questions, so a
tiny model's loss falls within a few steps. Each row is encoded with
``apply_chat_template(..., return_assistant_tokens_mask=True)`` and its weight-0 turns zeroed: the
k-th run of mask ones is the k-th assistant message (the template wraps each in one generation block).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .moe_support import moe_dirs  # noqa: F401  (the MoE fixture checkpoints, a session fixture)

REPO_ROOT = Path(__file__).resolve().parents[2]

ADD = {"type": "function", "function": {
    "name": "add", "description": "Add two integers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]}}}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CITIES = ["Paris", "London", "Tokyo", "Lima", "Oslo", "Cairo"]
SKIES = ["sunny", "cloudy", "rainy", "windy"]


def _qa(rng: random.Random) -> list[dict]:
    a, b = rng.randint(1, 20), rng.randint(1, 20)
    return [{"role": "user", "content": f"What is {a} + {b}?"},
            {"role": "assistant", "reasoning_content": f"Add {a} and {b}.", "content": f"{a + b}"}]


def _tool_turn(rng: random.Random, index: int) -> tuple[list[dict], list[dict]]:
    city, sky, temp = rng.choice(CITIES), rng.choice(SKIES), rng.randint(-5, 35)
    call = {"id": f"call_{index}", "type": "function", "function": {"name": "get_weather", "arguments": {"city": city}}}
    return [
        {"role": "user", "content": f"Weather in {city}?"},
        {"role": "assistant", "reasoning_content": "I should call the tool.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{index}", "content": f"{temp} C, {sky}"},
        {"role": "assistant", "reasoning_content": "Report it.", "content": f"{temp} C and {sky} in {city}."},
    ], [WEATHER]


def train_rows(n: int, seed: int = 0) -> list[dict]:
    """``n`` short BeamRows: answers, multi-turn, tool calls with results, a system prompt, weight 0."""
    rng = random.Random(seed)
    rows = []
    for index in range(n):
        kind = index % 4
        tools = None
        kwargs = None
        if kind == 0:
            messages = _qa(rng)
        elif kind == 1:
            messages = [{"role": "system", "content": "Be brief."}, *_qa(rng), *_qa(rng)]
            messages[2]["weight"] = 0  # first answer stays in context, out of the loss
        elif kind == 2:
            messages, tools = _tool_turn(rng, index)
        else:
            messages = _qa(rng)
            kwargs = {"reasoning_effort": rng.choice(["low", "high", 64])}
        row = {"messages": messages, "meta": {"source": f"kind{kind}.jsonl", "row": index}}
        if tools:
            row["tools"] = tools
        if kwargs:
            row["chat_template_kwargs"] = kwargs
        rows.append(row)
    return rows


def encode(row: dict, tokenizer) -> tuple[list[int], list[int]]:
    out = tokenizer.apply_chat_template(
        row["messages"], tools=row.get("tools"), return_dict=True, return_assistant_tokens_mask=True,
        **(row.get("chat_template_kwargs") or {}),
    )
    ids, mask = list(out["input_ids"]), list(out["assistant_masks"])
    weights = [m.get("weight", 1) for m in row["messages"] if m["role"] == "assistant"]
    runs, start = [], None
    for i, bit in enumerate([*mask, 0]):
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            runs.append((start, i))
            start = None
    assert len(runs) == len(weights), "test data: one trained run per assistant message"
    for (s, e), w in zip(runs, weights, strict=True):
        if not w:
            mask[s:e] = [0] * (e - s)
    return ids, mask


def write_prepared(out_dir: Path, rows: list[dict], tokenizer, *, mutate=None) -> Path:
    """A prepared directory per the contract; ``mutate(record)`` may corrupt a record first.

    Its report says it verified cleanly (as if verify had missed a corruption), so that the
    pre-flight, not ``check_trainable``, is what the mutated datasets test.
    """
    from datasets import Dataset

    from beam_sft.dataset_folder import features, write_report
    from tests.handmade_reports import complete_report, passed_verification, sources_of

    records = []
    for i, row in enumerate(rows):
        ids, mask = encode(row, tokenizer)
        record = {"input_ids": ids, "assistant_masks": mask, "row": json.dumps(row), "source": row["meta"]["source"],
                  "row_index": i, "num_tokens": len(ids), "num_trained": sum(mask)}
        if mutate is not None:
            record = mutate(record) or record
        records.append(record)
    out_dir.mkdir(parents=True, exist_ok=True)
    Dataset.from_list(records, features=features()).save_to_disk(str(out_dir))
    tokenizer.save_pretrained(str(out_dir / "tokenizer"))
    (out_dir / "rejects.jsonl").write_text("", encoding="utf-8")
    report = complete_report({"fingerprint": "test", "sources": sources_of(records), "mix": {"seed": 0},
                              "length_policy": {"max_length": None}}, records, out_dir)
    report["verify"] = passed_verification(report, "written by tests/train/conftest.py")
    write_report(out_dir, report)
    return out_dir


@pytest.fixture(scope="session")
def prepared_dir(tmp_path_factory, tokenizer) -> Path:
    return write_prepared(tmp_path_factory.mktemp("prepared"), train_rows(48), tokenizer)


def recipe_dict(model_dir: Path, prepared: Path, output_dir: Path, **sections) -> dict:
    """A tiny, fast recipe; ``sections`` deep-update it (e.g. ``sft={"max_steps": 2}``)."""
    base = {
        "model": {"path": str(model_dir), "dtype": "float32", "attn_implementation": "sdpa"},
        "data": {"prepared": str(prepared)},
        "sft": {
            "output_dir": str(output_dir), "max_steps": 4, "per_device_train_batch_size": 2,
            "learning_rate": 1e-3, "lr_scheduler_type": "constant", "warmup_steps": 0,
            "logging_steps": 1, "save_strategy": "no", "bf16": False, "activation_checkpointing": False,
            "max_length": 256, "seed": 0, "report_to": "none", "disable_tqdm": True,
            "dataloader_num_workers": 0, "dataloader_pin_memory": False,
        },
    }
    for name, values in sections.items():
        if values is None or name not in base:
            base[name] = values
        else:
            base[name] = {**base[name], **values}
    return base


def launch(accelerate_config: str, recipe_path: Path, overrides: list[str], *, timeout: int = 600):
    """``accelerate launch --config_file configs/accelerate/<cfg> -m beam_sft train ...`` from the repo root."""
    import socket

    with socket.socket() as sock:  # a free port: two launches on the configs' default 29500 join each other
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
           str(REPO_ROOT / "configs" / "accelerate" / accelerate_config), "--main_process_port", str(port),
           "-m", "beam_sft", "train", "--config", str(recipe_path), *overrides]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    # Its own session, so that a timeout kills the whole group (accelerate's ranks too), not the launcher alone.
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
