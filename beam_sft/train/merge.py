"""Merge a LoRA adapter into its base model and save a standalone checkpoint.

The result is loadable with ``AutoModelForCausalLM.from_pretrained`` and carries the adapter
directory's tokenizer (chat template, response template), the generation config and the run
record (``beam_run.json``: the data it trained on, by digest).
"""

from __future__ import annotations

import json
from pathlib import Path

from beam_sft.dataset_folder.staged_files import staged_folder
from beam_sft.errors import BeamError


def merge_adapter(adapter_dir: str | Path, out_dir: str | Path, *, base: str | None = None,
                  dtype: str = "auto") -> Path:
    """Load ``base`` (default: the adapter's ``base_model_name_or_path``), apply the adapter, merge, save.

    Written into a staging folder beside ``out_dir`` and renamed into place once complete: a failure
    (a tokenizer that does not load, a full disk) leaves no half-written ``-o`` to block a retry.
    """
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    adapter_dir, out = Path(adapter_dir), Path(out_dir)
    config_path = adapter_dir / "adapter_config.json"
    if not config_path.is_file():
        raise BeamError(f"{adapter_dir}: no adapter_config.json (not a LoRA adapter directory)")
    try:
        adapter_config = json.loads(config_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BeamError(f"{config_path}: not JSON ({exc})") from None
    recorded = adapter_config.get("base_model_name_or_path") if isinstance(adapter_config, dict) else None
    base = base or recorded
    if not base:
        raise BeamError(f"{config_path}: no base_model_name_or_path; pass --base")
    from beam_sft.paths import check_new_or_empty_folder, check_paths

    # before the base loads: never over the base model, the adapter or a folder of the user's
    check_paths({"ADAPTER": adapter_dir, "--base": base}, {"-o": out})
    check_new_or_empty_folder(out, label="-o")
    try:  # before the weights load: a folder without a tokenizer fails here, not after the save
        tokenizer = AutoTokenizer.from_pretrained(str(adapter_dir))
    except Exception as exc:  # noqa: BLE001 (transformers raises many kinds for a missing or broken tokenizer)
        raise BeamError(f"{adapter_dir}: its tokenizer does not load ({type(exc).__name__}: {exc})") from None
    torch_dtype = dtype if dtype == "auto" else getattr(torch, dtype)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch_dtype)
    try:
        peft_model = PeftModel.from_pretrained(model, str(adapter_dir))
    except (RuntimeError, ValueError, KeyError) as exc:  # shapes of another size: load_state_dict's error
        first = str(exc).strip().splitlines()[-1].strip()[:300]
        raise BeamError(f"{adapter_dir}: the adapter does not fit {base} ({first}); nothing was written") from None
    check_adapter_fits(peft_model, adapter_dir, base)
    model = peft_model.merge_and_unload()
    if (adapter_dir / "generation_config.json").is_file():
        model.generation_config = GenerationConfig.from_pretrained(str(adapter_dir))
    model.config.use_cache = True
    with staged_folder(out, "merging") as staging:
        model.save_pretrained(str(staging))
        tokenizer.save_pretrained(str(staging))
        _carry_run_record(adapter_dir, staging, base)
        if (adapter_dir / "beam_run.json").is_file():  # the run's card, saying the folder was merged
            from beam_sft.train.model_card import write_model_card

            write_model_card(staging, run_folder=adapter_dir, derived="merged")
    return out


def check_adapter_fits(peft_model, adapter_dir: Path, base: str) -> None:
    """Every tensor of the adapter file found its module in ``base``. PEFT loads an adapter into a
    model of another architecture with a warning only (a Beam adapter into a Llama: the attention
    names match, the output gate's and the experts' do not), and the merge would then be a model
    that is neither."""
    from safetensors import safe_open

    path = adapter_dir / "adapter_model.safetensors"
    if not path.is_file():
        return
    with safe_open(str(path), framework="pt") as handle:
        saved = [k for k in handle.keys() if "lora_" in k]
    loaded = sum(1 for name, _ in peft_model.named_parameters() if "lora_" in name)
    if loaded < len(saved):
        raise BeamError(f"{adapter_dir}: the adapter does not fit {base}: {len(saved) - loaded} of its {len(saved)} "
                        "tensors found no module there (another architecture or size than the one it was trained "
                        "on?); nothing was written")


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
