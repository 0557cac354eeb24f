"""Build TRL's SFTTrainer from a Recipe, run the pre-flight, train, save.

Order matters: the SFTConfig is built before the model is loaded, because under DeepSpeed ZeRO-3
the config is what makes ``from_pretrained`` load the weights already partitioned.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beam_sft.train.recipe import Recipe, sft_kwargs


@dataclass
class TrainingRun:
    """Everything ``train`` needs after construction."""

    trainer: Any
    tokenizer: Any
    dataset: Any  # the prepared dataset, all columns (for the pre-flight)
    prepared_dir: Path
    recipe: Recipe


def trainer_class():
    """TRL's SFTTrainer, plus FSDP on the CPU (for the cpu-fsdp2 launcher config)."""
    from trl import SFTTrainer

    class BeamSFTTrainer(SFTTrainer):
        def create_accelerator_and_postprocess(self):
            super().create_accelerator_and_postprocess()
            from beam_sft.train.cpu_fsdp import promote_cpu_fsdp

            if promote_cpu_fsdp(self.accelerator):
                self.is_fsdp_enabled = True

    return BeamSFTTrainer


def build_sft_config(recipe: Recipe):
    from trl import SFTConfig

    args = SFTConfig(**sft_kwargs(recipe))
    check_world(args)
    return args


def check_world(args) -> None:
    """Refuse a launch whose processes would each train alone.

    ``accelerate launch`` with a multi-process config on a machine without GPUs starts the
    processes and a process group, but the trainer only joins it with ``sft.use_cpu: true``;
    otherwise every process silently trains its own copy on the whole dataset.
    """
    import torch.distributed as dist

    from beam_sft.errors import ConfigError

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1 and args.world_size == 1:
        raise ConfigError(
            "sft.use_cpu",
            f"{dist.get_world_size()} processes were launched but the trainer runs as one: without GPUs set "
            "sft.use_cpu: true (the cpu-* accelerate configs need it)",
        )


def load_model(recipe: Recipe):
    """The model, with its KV cache off (a cache makes sdpa/eager/flex ignore packing boundaries)."""
    import torch
    from transformers import AutoModelForCausalLM

    from beam_sft.train.packing import disable_cache

    dtype = recipe.model.dtype if recipe.model.dtype == "auto" else getattr(torch, recipe.model.dtype)
    model = AutoModelForCausalLM.from_pretrained(
        recipe.model.path,
        dtype=dtype,
        attn_implementation=recipe.model.attn_implementation,
        trust_remote_code=recipe.model.trust_remote_code,
    )
    disable_cache(model)
    return model


def lora_config(recipe: Recipe):
    if recipe.lora is None:
        return None
    from peft import LoraConfig

    lora = recipe.lora
    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        modules_to_save=lora.modules_to_save,
        bias=lora.bias,
        use_rslora=lora.use_rslora,
        task_type="CAUSAL_LM",
    )


def build(recipe: Recipe, *, callbacks: list | None = None) -> TrainingRun:
    """Construct the trainer on the prepared dataset (preparing it first when the recipe says so)."""
    from beam_sft.train import data
    from beam_sft.train.callbacks import LossLogCallback
    from beam_sft.train.preflight import check_generation_eos, check_tokenizer, check_vocab

    if not recipe.model.path:
        from beam_sft.errors import ConfigError

        raise ConfigError("model.path", "required (a hub id or a local checkpoint; or set BEAM_MODEL_ID)")
    args = build_sft_config(recipe)
    prepared_dir = data.resolve_prepared(recipe, args.distributed_state)
    data.load_prepared(prepared_dir)  # checks the contract's columns where the data really is
    dataset = data.load_prepared(data.dataset_view(prepared_dir, Path(args.output_dir), args.distributed_state))
    tokenizer = data.load_tokenizer(prepared_dir)
    if recipe.preflight.enabled:  # on a GPU: refuse a plan larger than the free memory, before loading
        from beam_sft.train.plan import check_plan_fits

        check_plan_fits(recipe, world_size=args.world_size)
    model = load_model(recipe)
    if recipe.preflight.enabled:
        check_tokenizer(tokenizer)
        check_generation_eos(model, tokenizer)
        check_vocab(model, tokenizer)
    trainer = trainer_class()(
        model=model,
        args=args,
        train_dataset=data.trainer_dataset(dataset, assistant_only_loss=recipe.assistant_only_loss),
        processing_class=tokenizer,
        peft_config=lora_config(recipe),
        callbacks=[LossLogCallback(args.output_dir), *(callbacks or [])],
    )
    return TrainingRun(trainer=trainer, tokenizer=tokenizer, dataset=dataset, prepared_dir=prepared_dir,
                       recipe=recipe)


def preflight(run: TrainingRun):
    """Checks on the trainer's own first batches now; the packing check at train begin."""
    from beam_sft.train.callbacks import PackingIsolationCallback
    from beam_sft.train.packing import is_packed_batch
    from beam_sft.train.preflight import run_data_checks

    report, batches = run_data_checks(run.trainer, run.dataset, run.tokenizer, run.recipe)
    packed = next((b for b in batches if is_packed_batch(b)), None)
    if packed is not None:
        run.trainer.add_callback(PackingIsolationCallback(
            packed,
            pad_token_id=run.tokenizer.pad_token_id,
            attn_implementation=run.recipe.model.attn_implementation,
            tolerance=run.recipe.preflight.packing_tolerance,
            accelerator=run.trainer.accelerator,
            report=report,
        ))
    return report


def train(recipe: Recipe, *, callbacks: list | None = None) -> Path:
    """Train per ``recipe`` and return the directory of the saved model (or LoRA adapter)."""
    from beam_sft.train.save import save_final

    run = build(recipe, callbacks=callbacks)
    report = preflight(run) if recipe.preflight.enabled else None
    resume = recipe.sft.get("resume_from_checkpoint")
    run.trainer.train(resume_from_checkpoint=resume or None)
    return save_final(run, report)
