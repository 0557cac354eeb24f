"""``sft.resume_from_checkpoint``: find and check the checkpoint before anything heavy runs.

``true`` means the last ``checkpoint-N`` folder in ``sft.output_dir``; a string is a checkpoint folder.
Either must hold a readable ``trainer_state.json`` and weights (a full model, an adapter, an FSDP
``pytorch_model_fsdp*`` state or a DeepSpeed ``global_step*`` folder) whose safetensors headers read; otherwise a ConfigError names
the folder or file, before the pre-flight and before the model's weights are loaded. A checkpoint
past ``sft.max_steps`` is refused there too; one at it trains nothing (``compat/trainer_loop.py``:
transformers trained one step more) and its weights are saved as the run's output.
"""

from __future__ import annotations

import json
from pathlib import Path

from beam_sft.errors import ConfigError

KEY = "sft.resume_from_checkpoint"
WEIGHT_FILES = ("model.safetensors", "adapter_model.safetensors", "pytorch_model.bin", "adapter_model.bin",
                "model.safetensors.index.json")


def resolve_checkpoint(value, output_dir: str | Path, *, adapter: bool | None = None,
                       max_steps: int | None = None) -> str | None:
    """The checked checkpoint folder to resume from, or None when the recipe does not resume;
    ``adapter``: whether the recipe trains a LoRA adapter (None: not checked); ``max_steps``: the
    recipe's ``sft.max_steps`` (a checkpoint past it is refused; one at it trains nothing)."""
    if value is None or value is False:
        return None
    if value is True:
        from transformers.trainer_utils import get_last_checkpoint

        out = Path(output_dir)
        last = get_last_checkpoint(str(out)) if out.is_dir() else None
        if last is None:
            raise ConfigError(KEY, f"true, but {out} holds no checkpoint-N folder to resume from "
                                   "(train without it first, or give a checkpoint folder)")
        folder = Path(last)
    else:
        folder = Path(value)
        if not folder.is_dir():
            raise ConfigError(KEY, f"{folder} is not a checkpoint folder (it does not exist or is a file)")
    step = check_checkpoint(folder)
    if max_steps is not None and 0 < max_steps < step:
        raise ConfigError(KEY, f"{folder} is at step {step}, past sft.max_steps {max_steps}: nothing is left to "
                               f"train, and its weights are not step {max_steps}'s (resume from an earlier "
                               "checkpoint, or raise sft.max_steps)")
    if adapter is not None:
        check_kind(folder, adapter)
    return str(folder)


ADAPTER_FILES = ("adapter_model.safetensors", "adapter_model.bin")
MODEL_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


def check_kind(folder: Path, adapter: bool) -> None:
    """A LoRA run resumes from an adapter's checkpoint and a full fine-tune from a whole model's: the
    other kind failed only after the model loaded (the Trainer's "can't find a checkpoint index", or
    an optimizer state of another size). FSDP and DeepSpeed states are not told apart here."""
    has_adapter = any((folder / name).is_file() for name in ADAPTER_FILES)
    has_model = any((folder / name).is_file() for name in MODEL_FILES)
    if adapter and has_model and not has_adapter:
        raise ConfigError(KEY, f"{folder} is a full fine-tune's checkpoint (a whole model); this recipe trains a "
                               "LoRA adapter (lora:), which resumes only from an adapter's checkpoint")
    if not adapter and has_adapter and not has_model:
        raise ConfigError(KEY, f"{folder} is a LoRA adapter's checkpoint; this recipe is a full fine-tune (no "
                               "lora:), which resumes only from a whole model's checkpoint")


def check_checkpoint(folder: Path) -> int:
    """The checkpoint's global step; ConfigError naming what is missing or unreadable in ``folder``."""
    state = folder / "trainer_state.json"
    try:
        data = json.loads(state.read_text(encoding="utf-8"))
        step = int(data["global_step"])
    except FileNotFoundError:
        raise ConfigError(KEY, f"{folder}: no trainer_state.json (not a checkpoint written by training)") from None
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise ConfigError(KEY, f"{state}: corrupt ({type(exc).__name__}: {exc})") from None
    weights = [folder / name for name in WEIGHT_FILES if (folder / name).is_file()]
    weights += list(folder.glob("pytorch_model_fsdp*")) + list(folder.glob("model-*.safetensors"))
    deepspeed = [p for p in folder.glob("global_step*") if p.is_dir()]
    if not weights and not deepspeed:
        raise ConfigError(KEY, f"{folder}: no weights ({', '.join(WEIGHT_FILES)}, an FSDP pytorch_model_fsdp* "
                               "or a DeepSpeed global_step* folder)")
    for path in sorted(folder.glob("*.safetensors")):
        _check_safetensors(path)
    for shard in deepspeed:
        if not any(shard.iterdir()):
            raise ConfigError(KEY, f"{shard}: empty DeepSpeed checkpoint folder")
    return step


def _check_safetensors(path: Path) -> None:
    """Read the header and check that the data the header promises is really in the file."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            names = list(handle.keys())
        header_len = int.from_bytes(path.open("rb").read(8), "little")
        header = json.loads(path.open("rb").read(8 + header_len)[8:])
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    except Exception as exc:  # safetensors raises its own error types for every kind of damage
        raise ConfigError(KEY, f"{path}: unreadable safetensors file ({type(exc).__name__}: {exc})") from None
    if names and path.stat().st_size < 8 + header_len + end:
        raise ConfigError(KEY, f"{path}: truncated ({path.stat().st_size} bytes, the header needs {8 + header_len + end})")
