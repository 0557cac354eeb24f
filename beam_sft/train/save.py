"""Save the trained model (or LoRA adapter) with everything needed to use it.

The output directory holds the weights, the tokenizer with its chat template (``chat_template.jinja``) and response template
(``tokenizer_config.json``), the generation config, and ``beam_run.json``: the recipe, the
prepared dataset it read, and the pre-flight results.

Weights: a LoRA adapter is always gathered (it is small). A full fine-tune under ZeRO-3
(``stage3_gather_16bit_weights_on_model_save: false``) or FSDP2 (``SHARDED_STATE_DICT``) is saved
sharded, each rank writing its own part, because gathering a 501B model onto one process needs
about 1 TB there; ``beam-sft export`` turns it into a ``from_pretrained`` folder offline, and
``beam_run.json`` records which (``checkpoint_format``). Anything else is a ``from_pretrained`` folder.
"""

from __future__ import annotations

import json
from pathlib import Path

from beam_sft.errors import BeamError
from beam_sft.train import launch

RUN_FILE = "beam_run.json"


def save_final(run, report=None) -> Path:
    """Save on every process (ZeRO-3 and FSDP gather collectively); write the extras on the main one."""
    trainer = run.trainer
    out = Path(trainer.args.output_dir)
    biases = getattr(run, "biases", None)
    if biases is not None:  # routers.py: training must leave the correction biases as loaded
        biases.require_unchanged(trainer.model, "in training")
    _restore_cache(trainer.model)
    save_weights(trainer, out, lora=run.recipe.lora is not None)
    trainer.accelerator.wait_for_everyone()
    if trainer.accelerator.is_main_process:
        from beam_sft.train.export import checkpoint_format
        sharded = checkpoint_format(out)
        run.tokenizer.save_pretrained(str(out))
        _save_generation_config(trainer.model, out)
        meta = {
            "recipe": run.recipe.to_record(),
            "prepared": str(run.prepared_dir),
            "prepared_data": run.prepared_data,  # by digest, as taken at the start: the path may hold other data now
            "lora": run.recipe.lora is not None,
            "truncation": run.truncation,  # the rows sft.max_length cut and dropped (data.truncation_counts)
            "checkpoint_format": sharded or "from_pretrained",
            "distributed": distributed_info(trainer),
            "routers": router_info(run),
            "preflight": report.to_dict() if report is not None else None,
            "global_step": trainer.state.global_step,
            "log_history": [e for e in trainer.state.log_history if "loss" in e or "train_loss" in e],
        }
        (out / RUN_FILE).write_text(json.dumps(meta, indent=2, default=str) + "\n", encoding="utf-8")
        check_saved(out, tokenizer=run.tokenizer, sharded=sharded is not None)
    trainer.accelerator.wait_for_everyone()
    return out


def save_weights(trainer, out: Path, *, lora: bool) -> None:
    """Save the weights on every process (the collective saves need all of them)."""
    accelerator = trainer.accelerator
    fsdp = getattr(accelerator.state, "fsdp_plugin", None)
    if trainer.is_fsdp_enabled and fsdp is not None and "SHARDED_STATE_DICT" in str(fsdp.state_dict_type):
        # Trainer.save_model writes nothing for a sharded FSDP state dict: save it ourselves.
        if lora:
            _save_fsdp_adapter(trainer, out)
            return
        from accelerate.utils import save_fsdp_model

        save_fsdp_model(fsdp, accelerator, trainer.model, str(out))
        if accelerator.is_main_process:
            accelerator.unwrap_model(trainer.model).config.save_pretrained(str(out))
        return
    # ZeRO-3 without the 16-bit gather: Trainer.save_model writes DeepSpeed's sharded checkpoint.
    trainer.save_model(str(out))


def _save_fsdp_adapter(trainer, out: Path) -> None:
    # Only the trainable (adapter) tensors are gathered, one at a time, on every rank.
    state = {}
    for name, param in trainer.model.named_parameters():
        if param.requires_grad:
            full = param.full_tensor() if hasattr(param, "full_tensor") else param
            state[name] = full.detach().cpu()
    if trainer.accelerator.is_main_process:
        trainer.accelerator.unwrap_model(trainer.model).save_pretrained(str(out), state_dict=state)


def distributed_info(trainer) -> dict:
    """How the run was actually distributed (a launcher config can silently fall back to plain DDP)."""
    accelerator = trainer.accelerator
    info = {"type": launch.distributed_type(accelerator), "num_processes": accelerator.num_processes}
    plugin = getattr(accelerator.state, "deepspeed_plugin", None)
    if plugin is not None:
        info["zero_stage"] = plugin.zero_stage
    fsdp = getattr(accelerator.state, "fsdp_plugin", None)
    if fsdp is not None:
        info["fsdp_version"] = getattr(fsdp, "fsdp_version", None)
        # FSDP2 turns parameters into DTensors: proof the model really was sharded.
        info["sharded_parameters"] = any(type(p).__name__ == "DTensor" for p in trainer.model.parameters())
    return info


def router_info(run) -> dict | None:
    """What the run kept of its MoE routers: how many, their correction biases checked unchanged, and
    the dtypes their tensors held once the launcher had wrapped the model."""
    layout = getattr(run, "layout", None)
    if layout is None or not layout.is_moe:
        return None
    biases, check = getattr(run, "biases", None), getattr(run, "router_check", None)
    return {"routers": len(layout.routers), "correction_biases_unchanged": len(biases) if biases is not None else 0,
            "dtypes_after_wrapping": check.dtypes if check is not None else []}


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


def check_saved(out: Path, *, tokenizer=None, sharded: bool = False) -> None:
    """The directory has weights (or an adapter, or a sharded checkpoint with its config), a tokenizer,
    the chat template and (when the tokenizer has one) the response template; raise BeamError
    naming what is missing."""
    missing = []
    if sharded:
        if not (out / "config.json").is_file():
            missing.append("config.json (export needs it)")
    elif not (any(out.glob("*.safetensors")) or any(out.glob("*.bin"))):
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
