"""``beam-sft export``: a sharded training checkpoint -> a ``from_pretrained`` folder, offline.

Full fine-tunes under ZeRO-3 and FSDP2 save sharded (each rank writes its own part; nothing is
gathered onto one process, which for Beam would be about 1 TB). This turns such a checkpoint into
safetensors shards with an index, the config, the generation config and the tokenizer, one output
shard at a time: only the tensors of the shard being written are in memory, read straight from
the checkpoint files (DeepSpeed's files are memory-mapped and re-opened per shard, so pages
already written are released; DCP reads only the requested tensors).

Two formats, told apart by their files:

- ``deepspeed``: ``latest`` + ``global_stepN/*_optim_states.pt`` (ZeRO-2/3; the fp32 master weights
  are read through DeepSpeed's own ``zero_to_fp32`` reader, :func:`_deepspeed_tensors`);
- ``fsdp``: ``pytorch_model_fsdp_0/.metadata`` (``torch.distributed.checkpoint``, as accelerate
  writes with ``SHARDED_STATE_DICT``).

The expected tensor names come from the model built on the meta device from the config, so any
architecture transformers builds (dense, ``gpt_oss``, ``deepseek_v3``) exports the same way; a
checkpoint missing a tensor, or holding one the model does not have, is refused.

The checkpoint holds the in-memory names; what is written is what ``save_pretrained`` writes (the
layout our whole-model saves, ``train/save.py`` and ``train/merge.py``, have): transformers' load
conversion reverted, so Beam and the other MoEs whose experts transformers fuses on load get the
released checkpoint's per-expert tensors (``mlp.experts.0.gate_proj.weight``, not the fused
``mlp.experts.gate_up_proj``), which serving engines read (``compat/weight_conversion.py``). Shards
are planned by the tensors written; a fused tensor is read and split once, and the experts it holds
past the shard being written wait, in memory, for the next.
"""

from __future__ import annotations

import gc
import json
import re
import shutil
from pathlib import Path

from beam_sft.compat import weight_conversion
from beam_sft.dataset_folder.staged_files import staged_folder
from beam_sft.errors import BeamError
from beam_sft.train.model_shape import load_model_config, meta_model

FSDP_DIR = "pytorch_model_fsdp_0"
# Files copied beside the weights when the checkpoint (or its parent) has them; beam_run.json carries
# the run record (recipe, and the data it trained on by digest: ``train.provenance``) to the export.
SIDE_FILES = ("generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
              "chat_template.jinja", "beam_run.json")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]?i?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


MAX_SHARD_BYTES = 1 << 50  # a shard past a PiB is a typo


def parse_size(text: str) -> int:
    """``"5GB"`` -> 5_000_000_000 (KB/MB/GB decimal, KiB/MiB/GiB binary, a bare number is bytes)."""
    match = _SIZE.match(str(text))
    if not match:
        raise BeamError(f"--max-shard-size: {text!r} is not a size like 5GB or 200MB")
    value = float(match.group(1)) * _UNITS[(match.group(2) or "").lower()]
    if not 1 <= value <= MAX_SHARD_BYTES:  # inf (1e400GB) included: int() of it is an OverflowError
        raise BeamError(f"--max-shard-size: {text!r} must be from 1 byte to {MAX_SHARD_BYTES >> 40} TiB")
    size = int(value)
    return size


def checkpoint_format(path: str | Path) -> str | None:
    """``"deepspeed"``, ``"fsdp"``, or None when ``path`` holds no sharded checkpoint."""
    path = Path(path)
    if (path / FSDP_DIR / ".metadata").is_file():
        return "fsdp"
    if (path / "latest").is_file() and any(path.glob("global_step*/*optim_states.pt")):
        return "deepspeed"
    return None


def is_sharded_checkpoint(path: str | Path) -> bool:
    return checkpoint_format(path) is not None


def _find_config(checkpoint: Path, config: str | Path | None) -> Path:
    candidates = [Path(config)] if config else [checkpoint, checkpoint.parent]
    for candidate in candidates:
        file = candidate if candidate.is_file() else candidate / "config.json"
        if file.is_file():
            return file
    raise BeamError(f"{checkpoint}: no config.json here or in its parent; pass --config (the model's folder "
                    f"or config.json)")


def _check_output(out: Path, checkpoint: Path, config) -> None:
    """A new or empty folder, apart from everything export reads (``beam_sft.paths``)."""
    from beam_sft.paths import check_new_or_empty_folder, check_paths

    check_paths({"CHECKPOINT": checkpoint, "--config": config}, {"-o": out})
    check_new_or_empty_folder(out, label="-o")


def expected_tensors(config) -> dict[str, tuple[tuple[int, ...], object]]:
    """Name -> (shape, dtype) of every tensor ``from_pretrained`` reads for ``config``; tied weights once."""
    model = meta_model(config)
    seen, out = set(), {}
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in seen:
            continue
        seen.add(id(param))
        out[name] = (tuple(param.shape), param.dtype)
    persistent = set(model.state_dict())
    for name, buffer in model.named_buffers():
        if name in persistent:
            out[name] = (tuple(buffer.shape), buffer.dtype)
    return out


def fp32_names(config) -> set[str]:
    """The tensors ``config``'s model declares ``_keep_in_fp32_modules_strict`` (routers.py): exported
    in float32 whatever ``--dtype``, so a bf16 export keeps them bit for bit."""
    from beam_sft.train.model_shape import meta_model
    from beam_sft.train.routers import strict_fp32_names

    return set(strict_fp32_names(meta_model(config)))


def plan_shards(sizes: dict[str, int], max_shard_bytes: int) -> list[list[str]]:
    """Group names, in order, into shards of at most ``max_shard_bytes`` (a bigger tensor goes alone)."""
    shards, current, used = [], [], 0
    for name, size in sizes.items():
        if current and used + size > max_shard_bytes:
            shards.append(current)
            current, used = [], 0
        current.append(name)
        used += size
    if current:
        shards.append(current)
    return shards


# ---------------------------------------------------------------- readers, one per format

def _deepspeed_tensors(checkpoint: Path, names: list[str]) -> dict:
    """The fp32 tensors ``names`` from a ZeRO checkpoint, through DeepSpeed's lazy reader (the one
    adapter onto ``deepspeed.utils.zero_to_fp32``); everything it mapped is dropped on return."""
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    lazy = get_fp32_state_dict_from_zero_checkpoint(str(checkpoint), lazy_mode=True)
    missing = [n for n in names if n not in lazy]
    if missing:
        raise BeamError(f"{checkpoint}: the DeepSpeed checkpoint lacks {missing[:5]}")
    out = {name: lazy[name].contiguous() for name in names}  # a fresh tensor, not a view of the mmap
    del lazy
    gc.collect()
    return out


def _deepspeed_names(checkpoint: Path) -> set[str]:
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    names = set(get_fp32_state_dict_from_zero_checkpoint(str(checkpoint), lazy_mode=True))
    gc.collect()
    return names


def _fsdp_metadata(checkpoint: Path) -> dict[str, tuple[int, ...]]:
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    metadata = FileSystemReader(str(checkpoint / FSDP_DIR)).read_metadata()
    return {key.removeprefix("model."): tuple(meta.size) for key, meta in metadata.state_dict_metadata.items()
            if key.startswith("model.") and isinstance(meta, TensorStorageMetadata)}


def _fsdp_tensors(checkpoint: Path, names: list[str], shapes: dict, dtypes: dict) -> dict:
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner

    wanted = {name: torch.empty(shapes[name], dtype=dtypes[name]) for name in names}
    state = {"model": wanted}
    dcp.load(state, storage_reader=dcp.FileSystemReader(str(checkpoint / FSDP_DIR)),
             planner=DefaultLoadPlanner(allow_partial_load=True), no_dist=True)
    return state["model"]


# ---------------------------------------------------------------- export

def export_checkpoint(checkpoint: str | Path, out: str | Path, *, config: str | Path | None = None,
                      dtype: str = "auto", max_shard_bytes: int = 5 * 10**9) -> Path:
    """Write a ``from_pretrained`` folder at ``out`` from the sharded checkpoint at ``checkpoint``."""
    import torch
    from safetensors.torch import save_file


    checkpoint, out = Path(checkpoint), Path(out)
    kind = checkpoint_format(checkpoint)
    if kind is None:
        hint = " (it already is a from_pretrained folder)" if any(checkpoint.glob("*.safetensors")) else ""
        raise BeamError(f"{checkpoint}: no sharded checkpoint (DeepSpeed `latest` + global_step*/, or "
                        f"{FSDP_DIR}/.metadata){hint}")
    _check_output(out, checkpoint, config)
    config_file = _find_config(checkpoint, config)
    model_config = load_model_config(config_file)
    expected = expected_tensors(model_config)
    if dtype == "auto":
        configured = getattr(model_config, "dtype", None) or getattr(model_config, "torch_dtype", None)
        dtype = str(configured).removeprefix("torch.") if configured else "float32"
    target = getattr(torch, dtype)

    if kind == "fsdp":
        shapes = _fsdp_metadata(checkpoint)
        available = set(shapes)
    else:
        shapes = {name: shape for name, (shape, _) in expected.items()}
        available = _deepspeed_names(checkpoint)
    missing = sorted(set(expected) - available)
    unknown = sorted(available - set(expected) - _ignorable(available, expected))
    if missing or unknown:
        raise BeamError(f"{checkpoint}: checkpoint and {config_file} disagree: missing {missing[:5]}, "
                        f"not in the model {unknown[:5]}")
    for name, (shape, _) in expected.items():
        if tuple(shapes.get(name, shape)) != tuple(shape):
            raise BeamError(f"{checkpoint}: {name} has shape {tuple(shapes[name])}, the config says {shape}")

    keep = fp32_names(model_config)

    def out_dtype(name):
        # The tensors the model keeps float32 (Beam's routers and correction biases) stay as trained.
        if not expected[name][1].is_floating_point:
            return expected[name][1]
        return torch.float32 if name in keep else target

    meta = {name: torch.empty(shape, dtype=out_dtype(name), device="meta") for name, (shape, _) in expected.items()}
    model = meta_model(model_config)
    groups = saved_layout(model, meta, checkpoint)
    # Planned by the tensors written, so --max-shard-size holds for them; what a group writes past the
    # shard being written waits in `pending` for the next (a group is read once).
    group_of = {name: index for index, (_, written) in enumerate(groups) for name in written}
    sizes = {name: t.numel() * t.element_size() for _, written in groups for name, t in written.items()}
    shards = plan_shards(sizes, max_shard_bytes)
    with staged_folder(out, "exporting") as staging:  # a shard that does not read leaves no half folder
        weight_map, total, pending, read = {}, 0, {}, 0
        for index, names in enumerate(shards, start=1):
            file = "model.safetensors" if len(shards) == 1 else f"model-{index:05d}-of-{len(shards):05d}.safetensors"
            upto = max(group_of[name] for name in names) + 1
            if upto > read:
                wanted = [name for members, _ in groups[read:upto] for name in members]
                tensors = _read_tensors(kind, checkpoint, wanted, shapes, expected)
                tensors = {n: t.to(out_dtype(n)) for n, t in tensors.items()}
                pending.update(weight_conversion.revert(model, tensors))
                read = upto
            tensors = {name: pending.pop(name).contiguous() for name in names}
            save_file(tensors, str(staging / file), metadata={"format": "pt"})
            for name in tensors:
                weight_map[name] = file
            total += _nbytes(tensors)
            del tensors
            gc.collect()
        if len(shards) > 1:
            # (total_parameters as save_pretrained writes it: the model's own count, tied weights once)
            index = {"metadata": {"total_parameters": model.num_parameters(), "total_size": total},
                     "weight_map": weight_map}
            (staging / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
        model_config.dtype = dtype
        model_config.save_pretrained(str(staging))
        _copy_side_files(checkpoint, staging)
        if any((folder / "beam_run.json").is_file() for folder in (checkpoint, checkpoint.parent)):
            # The run's card, saying the folder was exported.
            from beam_sft.train.model_card import write_model_card

            write_model_card(staging, run_folder=checkpoint, derived="exported")
    return out


def _read_tensors(kind: str, checkpoint: Path, names: list[str], shapes: dict, expected: dict) -> dict:
    """One output shard's tensors from the sharded checkpoint; a damaged file is one error naming the
    checkpoint (torch's readers raise RuntimeError, OSError, ValueError or pickle's errors)."""
    import pickle

    import torch
    from torch.distributed.checkpoint.api import (
        CheckpointException,  # (a BaseException: dcp's per-rank errors)
    )

    try:
        if kind == "fsdp":
            dtypes = {n: expected[n][1] if not expected[n][1].is_floating_point else torch.float32 for n in names}
            return _fsdp_tensors(checkpoint, names, shapes, dtypes)
        return _deepspeed_tensors(checkpoint, names)
    except (RuntimeError, OSError, ValueError, EOFError, KeyError, pickle.UnpicklingError, CheckpointException) as exc:
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
        first = (lines[-1] if isinstance(exc, CheckpointException) and lines else
                 lines[0] if lines else type(exc).__name__)[:300]
        raise BeamError(f"{checkpoint}: a shard of the checkpoint does not read ({type(exc).__name__}: {first}); "
                        "nothing was written") from None


def saved_layout(model, meta: dict, checkpoint: Path) -> list[tuple[list[str], dict]]:
    """The in-memory tensors ``meta`` (name -> meta tensor in its export dtype) in the groups that are
    written together, each with the tensors ``save_pretrained`` writes for it (their names and shapes):
    a MoE whose experts transformers fuses on load (Beam, qwen3_moe, deepseek_v3 ...) is written in the
    released per-expert layout (``mlp.experts.0.gate_proj.weight``) that serving engines read. A group
    is read and reverted whole (a fused tensor: one layer's experts); a layout transformers cannot
    revert group by group is refused before anything is read."""
    try:
        return weight_conversion.saved_groups(model, meta)
    except weight_conversion.ConversionMismatch as exc:
        raise BeamError(f"{checkpoint}: transformers' save layout for {model.config.model_type} cannot be "
                        f"written shard by shard ({exc}); nothing was written") from None


def _nbytes(tensors: dict) -> int:
    return sum(t.numel() * t.element_size() for t in tensors.values())


def _ignorable(available: set[str], expected: dict) -> set[str]:
    # Tied weights saved under both names (the checkpoint keeps what the module held).
    return {name for name in available if name.endswith("lm_head.weight") and name not in expected}


def _copy_side_files(checkpoint: Path, out: Path) -> None:
    # A checkpoint-N folder may lack them; the run's output folder above it has the final ones.
    for name in SIDE_FILES:
        for folder in (checkpoint, checkpoint.parent):
            if (folder / name).is_file():
                shutil.copy2(folder / name, out / name)
                break
