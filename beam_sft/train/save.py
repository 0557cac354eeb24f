"""Save the trained model (or LoRA adapter) with everything needed to use it.

The output directory holds the weights (gathered from ZeRO-3/FSDP shards by ``Trainer.save_model``),
the tokenizer with its chat template (``chat_template.jinja``) and response template
(``tokenizer_config.json``), the generation config, and ``beam_run.json``: the recipe, the
prepared dataset it read, and the pre-flight results.
"""

from __future__ import annotations

import json
from pathlib import Path

from beam_sft.errors import BeamError

RUN_FILE = "beam_run.json"


def save_final(run, report=None) -> Path:
    """Save on every process (ZeRO-3 and FSDP gather collectively); write the extras on the main one."""
    trainer = run.trainer
    out = Path(trainer.args.output_dir)
    _restore_cache(trainer.model)
    trainer.save_model(str(out))
    if trainer.accelerator.is_main_process:
        run.tokenizer.save_pretrained(str(out))
        _save_generation_config(trainer.model, out)
        meta = {
            "recipe": run.recipe.to_dict(),
            "prepared": str(run.prepared_dir),
            "lora": run.recipe.lora is not None,
            "distributed": distributed_info(trainer),
            "preflight": report.to_dict() if report is not None else None,
            "global_step": trainer.state.global_step,
            "log_history": [e for e in trainer.state.log_history if "loss" in e or "train_loss" in e],
        }
        (out / RUN_FILE).write_text(json.dumps(meta, indent=2, default=str) + "\n", encoding="utf-8")
        check_saved(out, tokenizer=run.tokenizer)
    trainer.accelerator.wait_for_everyone()
    return out


def distributed_info(trainer) -> dict:
    """How the run was actually distributed (a launcher config can silently fall back to plain DDP)."""
    accelerator = trainer.accelerator
    info = {"type": str(accelerator.distributed_type).split(".")[-1], "num_processes": accelerator.num_processes}
    plugin = getattr(accelerator.state, "deepspeed_plugin", None)
    if plugin is not None:
        info["zero_stage"] = plugin.zero_stage
    fsdp = getattr(accelerator.state, "fsdp_plugin", None)
    if fsdp is not None:
        info["fsdp_version"] = getattr(fsdp, "fsdp_version", None)
        # FSDP2 turns parameters into DTensors: proof the model really was sharded.
        info["sharded_parameters"] = any(type(p).__name__ == "DTensor" for p in trainer.model.parameters())
    return info


def _restore_cache(model) -> None:
    # Training turns the KV cache off (packing isolation); the saved model should generate with it.
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(base, "config", None)
    if config is not None:
        config.use_cache = True
        if hasattr(config, "get_text_config"):
            config.get_text_config().use_cache = True


def _save_generation_config(model, out: Path) -> None:
    # An adapter directory gets none from PEFT; merge and generation read the eos ids from it.
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    generation_config = getattr(base, "generation_config", None)
    if generation_config is not None and not (out / "generation_config.json").is_file():
        generation_config.save_pretrained(str(out))


def check_saved(out: Path, *, tokenizer=None) -> None:
    """The directory has weights or an adapter, a tokenizer, the chat template and (when the
    tokenizer has one) the response template; raise BeamError naming what is missing."""
    missing = []
    has_weights = any(out.glob("*.safetensors")) or any(out.glob("*.bin"))
    if not has_weights:
        missing.append("weights (*.safetensors)")
    if not (out / "tokenizer_config.json").is_file():
        missing.append("tokenizer_config.json")
    config = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8")) \
        if (out / "tokenizer_config.json").is_file() else {}
    if not ((out / "chat_template.jinja").is_file() or config.get("chat_template")):
        missing.append("chat template")
    if tokenizer is not None and getattr(tokenizer, "response_template", None) is not None \
            and "response_template" not in config:
        missing.append("response_template in tokenizer_config.json")
    if missing:
        raise BeamError(f"{out}: saved output lacks {', '.join(missing)}")
