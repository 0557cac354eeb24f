"""Merge a LoRA adapter into its base model and save a standalone checkpoint.

The result is loadable with ``AutoModelForCausalLM.from_pretrained`` and carries the adapter
directory's tokenizer (chat template, response template), the generation config and the run
record (``beam_run.json``: the data it trained on, by digest).
"""

from __future__ import annotations

import json
from pathlib import Path

from beam_sft.errors import BeamError


def merge_adapter(adapter_dir: str | Path, out_dir: str | Path, *, base: str | None = None,
                  dtype: str = "auto") -> Path:
    """Load ``base`` (default: the adapter's ``base_model_name_or_path``), apply the adapter, merge, save."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    adapter_dir, out = Path(adapter_dir), Path(out_dir)
    config_path = adapter_dir / "adapter_config.json"
    if not config_path.is_file():
        raise BeamError(f"{adapter_dir}: no adapter_config.json (not a LoRA adapter directory)")
    base = base or json.loads(config_path.read_text(encoding="utf-8")).get("base_model_name_or_path")
    if not base:
        raise BeamError(f"{config_path}: no base_model_name_or_path; pass --base")
    from beam_sft.paths import check_new_or_empty_folder, check_paths

    # before the base loads: never over the base model, the adapter or a folder of the user's
    check_paths({"ADAPTER": adapter_dir, "--base": base}, {"-o": out})
    check_new_or_empty_folder(out, label="-o")
    torch_dtype = dtype if dtype == "auto" else getattr(torch, dtype)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch_dtype)
    model = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    if (adapter_dir / "generation_config.json").is_file():
        model.generation_config = GenerationConfig.from_pretrained(str(adapter_dir))
    model.config.use_cache = True
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    AutoTokenizer.from_pretrained(str(adapter_dir)).save_pretrained(str(out))
    _carry_run_record(adapter_dir, out, base)
    if (adapter_dir / "beam_run.json").is_file():  # the run's card, saying the folder was merged
        from beam_sft.train.model_card import write_model_card

        write_model_card(out, run_folder=adapter_dir, derived="merged")
    return out


def _carry_run_record(adapter_dir: Path, out: Path, base: str) -> None:
    """The adapter's beam_run.json (the recipe, and the data it trained on by digest) beside the
    merged weights, with what was merged into what."""
    record_path = adapter_dir / "beam_run.json"
    if not record_path.is_file():
        return
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except ValueError:
        raise BeamError(f"{record_path}: not JSON; the merged model was saved to {out} without it") from None
    if isinstance(record, dict):
        record["merged"] = {"adapter": str(adapter_dir.resolve()), "base": str(base)}
    (out / "beam_run.json").write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
