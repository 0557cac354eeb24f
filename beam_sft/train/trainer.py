"""Build TRL's SFTTrainer from a Recipe, run the pre-flight, train, save.

Order matters: the SFTConfig is built before the model is loaded, because under DeepSpeed ZeRO-3
the config is what makes ``from_pretrained`` load the weights already partitioned.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beam_sft.errors import ConfigError
from beam_sft.model_support import require_support
from beam_sft.train.plan import check_plan_fits
from beam_sft.train.recipe import Recipe, sft_kwargs


@dataclass
class TrainingRun:
    """Everything ``train`` needs after construction."""

    trainer: Any
    tokenizer: Any
    dataset: Any  # the prepared dataset, all columns (for the pre-flight)
    prepared_dir: Path
    recipe: Recipe
    prepared_data: Any = None  # provenance.folder_provenance(prepared_dir), taken once at the start
    eval: Any = None  # beam_sft.train.eval_set.EvalData, or None without data.eval
    watch: Any = None  # RankWatch: bounded waits for the other processes in the pre-flight
    resume: str | None = None  # the checked checkpoint folder to resume from
    layout: Any = None  # beam_sft.train.moe.MoeLayout of the model as loaded
    biases: Any = None  # routers.BiasSnapshot: the correction biases as loaded, compared at the save
    router_check: Any = None  # callbacks.RouterCallback: the routers on the wrapped model, before step 1


def trainer_class(use_cpu: bool = False):
    """TRL's SFTTrainer; promoted to FSDP on the CPU only when a CPU FSDP launch asks for it."""
    from trl import SFTTrainer

    from beam_sft.train import cpu_fsdp

    return cpu_fsdp.trainer_class(SFTTrainer) if cpu_fsdp.cpu_fsdp_requested(use_cpu) else SFTTrainer


def build_sft_config(recipe: Recipe):
    """The SFTConfig; its process group waits at most ``preflight.timeout`` until the pre-flight is over
    (ranks.py; ``RankWatch.end_of_preflight`` restores ``sft.ddp_timeout`` for training)."""
    from trl import SFTConfig

    from beam_sft.train.ranks import DEFAULT_DDP_TIMEOUT

    kwargs = sft_kwargs(recipe)
    kwargs["ddp_timeout"] = int(min(recipe.preflight.timeout, kwargs.get("ddp_timeout", DEFAULT_DDP_TIMEOUT)))
    args = SFTConfig(**kwargs)
    check_world(args)
    return args


def check_world(args) -> None:
    """Refuse a launch whose processes would each train alone.

    ``accelerate launch`` with a multi-process config on a machine without GPUs starts the
    processes and a process group, but the trainer only joins it with ``sft.use_cpu: true``;
    otherwise every process silently trains its own copy on the whole dataset.
    """
    import torch.distributed as dist


    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1 and args.world_size == 1:
        raise ConfigError(
            "sft.use_cpu",
            f"{dist.get_world_size()} processes were launched but the trainer runs as one: without GPUs set "
            "sft.use_cpu: true (the cpu-* accelerate configs need it)",
        )


def load_model(recipe: Recipe):
    """The model, with its KV cache off (a cache makes sdpa/eager/flex ignore packing boundaries) and,
    on hybrid sliding/full decoders, packed-sequence masks built per layer type (packing.py)."""
    import torch
    from transformers import AutoModelForCausalLM

    from beam_sft.train.expert_parallel import announce, distributed_config
    from beam_sft.train.packing import disable_cache, keep_packed_sequences_apart

    dtype = recipe.model.dtype if recipe.model.dtype == "auto" else getattr(torch, recipe.model.dtype)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            recipe.model.path,
            dtype=dtype,
            attn_implementation=recipe.model.attn_implementation,
            trust_remote_code=recipe.model.trust_remote_code,
            **distributed_config(recipe),  # model.ep_size > 1: sharded at load, not by the launcher
        )
    except ValueError as exc:
        if "attention implementation" in str(exc) or "attn_implementation" in str(exc):
            raise ConfigError("model.attn_implementation", f"{recipe.model.attn_implementation!r} cannot run "
                                                           f"{recipe.model.path}: {exc}") from exc
        raise
    announce(model, recipe)
    disable_cache(model)
    keep_packed_sequences_apart(model)
    return model


def lora_config(recipe: Recipe, model=None):
    """PEFT's LoraConfig: adapters on ``lora.target_modules`` (presets resolved, lora_targets.py) and, with
    ``lora.experts``, on the fused expert tensors of ``model``; routers excluded unless
    ``lora.train_routers`` (then trained in full)."""
    if recipe.lora is None:
        return None
    from peft import LoraConfig

    from beam_sft.train.moe import moe_layout

    lora = recipe.lora
    layout = moe_layout(model) if model is not None else None
    target_parameters = list(lora.target_parameters) if lora.target_parameters else None
    if lora.experts and target_parameters is None:
        if layout is None or not layout.expert_parameters:
            raise ConfigError("lora.experts", f"{recipe.model.path} has no fused expert tensors to adapt "
                                              "(not a mixture of experts, or its experts are linear modules)")
        target_parameters = list(layout.expert_parameters)
    routers = list(layout.routers) if layout is not None else []
    target_modules = lora.target_modules
    if model is not None:  # presets and all-linear as full module names, PEFT's renames avoided (lora_targets.py)
        from beam_sft.train.lora_targets import resolve

        target_modules, as_parameters = resolve(target_modules, model, layout)
        if as_parameters and lora.dropout:
            raise ConfigError("lora.dropout", f"must be 0 here: {as_parameters[0].rsplit('.', 1)[0]} and the like "
                                              "get their adapters as parameters (PEFT would rename them into the "
                                              "fused experts), and PEFT applies no dropout to those")
        target_parameters = (target_parameters or []) + [p for p in as_parameters
                                                          if p not in (target_parameters or [])] or None
        target_modules = target_modules or None
    modules_to_save = list(lora.modules_to_save or [])
    if lora.train_routers:
        modules_to_save += [r.rsplit(".", 1)[-1] for r in routers if r.rsplit(".", 1)[-1] not in modules_to_save]
    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=target_modules,
        target_parameters=target_parameters,
        exclude_modules=routers or None,
        modules_to_save=modules_to_save or None,
        bias=lora.bias,
        use_rslora=lora.use_rslora,
        task_type="CAUSAL_LM",
    )


def check_routers(trainer, recipe: Recipe, layout=None) -> None:
    """Under LoRA, no router parameter may train unless ``lora.train_routers`` (raise naming them)."""
    from beam_sft.train.moe import router_parameters

    if recipe.lora is None or layout is None or not layout.is_moe:
        return
    trained = router_parameters(trainer.model, layout)
    if trained and not recipe.lora.train_routers:
        raise ConfigError("lora.train_routers", f"false, but router parameters would train: {trained[:4]} "
                                                "(remove them from lora.modules_to_save / target_modules)")
    blocks = tuple(f"{b}.experts." for b in layout.blocks)
    on_experts = [n for n, p in trainer.model.named_parameters()
                  if p.requires_grad and "lora_" in n and any(b in n for b in blocks)]
    if on_experts and not recipe.lora.on_experts:
        # peft 0.21 maps the names gate_proj/up_proj/down_proj onto the fused experts of some models
        # (its transformers-v4 compatibility), so targeting a dense MLP adapts the experts too.
        raise ConfigError("lora.target_modules", f"adapts the fused experts ({on_experts[0]}, ...) although "
                                                 "lora.experts is false: set lora.experts: true, or list "
                                                 "target_modules without gate_proj/up_proj/down_proj")
    if recipe.lora.on_experts and not on_experts:
        raise ConfigError("lora.experts", "true, but no expert tensor got an adapter")


def prepare_moe(model) -> None:
    """Under DeepSpeed ZeRO-3, every MoE block a leaf (moe.py: routing can never deadlock the ranks)."""
    from transformers.integrations import is_deepspeed_zero3_enabled

    if is_deepspeed_zero3_enabled():
        from beam_sft.train.moe import mark_zero3_leaves

        mark_zero3_leaves(model)


def build(recipe: Recipe, *, callbacks: list | None = None) -> TrainingRun:
    """Construct the trainer on the prepared dataset (preparing it first when the recipe says so)."""
    from beam_sft.train.ranks import DEFAULT_DDP_TIMEOUT, RankWatch
    from beam_sft.train.resume import resolve_checkpoint

    if not recipe.model.path:

        raise ConfigError("model.path", "required (a hub id or a local checkpoint; or set BEAM_MODEL_ID)")
    # Before anything heavy: the checkpoint to resume from exists and reads.
    resume = resolve_checkpoint(recipe.sft.get("resume_from_checkpoint"), recipe.sft["output_dir"])
    args = build_sft_config(recipe)
    watch = RankWatch(recipe.preflight.timeout, recipe.sft.get("ddp_timeout", DEFAULT_DDP_TIMEOUT))
    with watch.naming_silent_ranks("the set-up before the pre-flight"):
        return _build(recipe, args, watch, resume, callbacks)


def _build(recipe: Recipe, args, watch, resume, callbacks) -> TrainingRun:
    from beam_sft.train import data
    from beam_sft.train.callbacks import LossLogCallback
    from beam_sft.train.preflight import (
        check_generation_eos,
        check_model_tokenizer,
        check_tokenizer,
        check_vocab,
    )
    from beam_sft.train.provenance import folder_provenance

    prepared_dir = data.resolve_prepared(recipe, args.distributed_state)
    # What the run trains on, by digest, taken once right after the checks passed; the run record
    # and the final save name this, even if a later prepare replaces the folder meanwhile.
    prepared_data = folder_provenance(prepared_dir)
    data.load_prepared(prepared_dir)  # checks the contract's columns where the data really is
    dataset = data.load_prepared(data.dataset_view(prepared_dir, Path(args.output_dir), args.distributed_state))
    tokenizer = data.load_tokenizer(prepared_dir)
    if recipe.preflight.enabled:  # before the weights load
        check_tokenizer(tokenizer)
        check_model_tokenizer(recipe.model.path, tokenizer, trust_remote_code=recipe.model.trust_remote_code)
    from beam_sft.train import eval_set, run_log  # data.eval, format health, TensorBoard record

    eval_data = eval_set.resolve_eval(recipe, dataset, prepared_dir, Path(args.output_dir), args.distributed_state)
    if recipe.preflight.enabled:  # on a GPU: refuse a plan larger than the free memory, before loading

        check_plan_fits(recipe, world_size=args.world_size)
    from transformers import AutoConfig

    from beam_sft.train import routers

    require_support(recipe.model.path)  # with the pre-flight off too: which transformers the model needs
    # Before the weights load: no softmax aux loss on a bias-balanced router (routers.py).
    model_config = AutoConfig.from_pretrained(recipe.model.path, trust_remote_code=recipe.model.trust_remote_code)
    routers.check_aux_loss(model_config, recipe.sft)
    from beam_sft.train.expert_parallel import check_launch

    check_launch(recipe, model_config, world_size=args.world_size)  # model.ep_size: sizes and launcher
    model = load_model(recipe)
    if recipe.preflight.enabled:
        check_generation_eos(model, tokenizer)
        check_vocab(model, tokenizer)
    from beam_sft.train.moe import moe_layout

    layout = moe_layout(model)  # before PEFT wraps the experts
    routers.route_in_fp32(model, layout)
    biases = routers.BiasSnapshot(model)
    prepare_moe(model)
    trainer = trainer_class(bool(recipe.sft.get("use_cpu")))(
        model=model,
        args=args,
        train_dataset=data.trainer_dataset(eval_data.train if eval_data else dataset,
                                           assistant_only_loss=recipe.assistant_only_loss),
        eval_dataset=data.trainer_dataset(eval_data.eval, assistant_only_loss=recipe.assistant_only_loss)
        if eval_data else None,
        processing_class=tokenizer,
        peft_config=lora_config(recipe, model),
        callbacks=[LossLogCallback(args.output_dir), *(callbacks or [])],
    )
    check_routers(trainer, recipe, layout)
    routers.check_precision(trainer, trainer.model, layout)
    router_check = None
    if layout.is_moe:  # after the launcher wraps the model, before step 1
        from beam_sft.train.callbacks import RouterCallback

        router_check = RouterCallback(layout, biases, trainer.accelerator, watch)
        trainer.add_callback(router_check)
    run_log.attach(trainer, recipe, eval_data, prepared_dir, prepared_data=prepared_data)
    return TrainingRun(trainer=trainer, tokenizer=tokenizer, dataset=dataset, prepared_dir=prepared_dir,
                       recipe=recipe, prepared_data=prepared_data, eval=eval_data, watch=watch, resume=resume, layout=layout, biases=biases,
                       router_check=router_check)


def preflight(run: TrainingRun):
    """Checks on the trainer's own first batches now; the packing check at train begin."""
    from beam_sft.train.callbacks import PackingIsolationCallback
    from beam_sft.train.packing import is_packed_batch
    from beam_sft.train.preflight import run_data_checks

    report, batches = run_data_checks(run.trainer, run.dataset, run.tokenizer, run.recipe, run.watch)
    if run.eval is not None:  # the eval batches too (kept in the report, so in beam_run.json)
        from beam_sft.train.eval_set import check_eval_batches

        report.eval = {**check_eval_batches(run.trainer, run.eval, run.tokenizer, run.recipe), **run.eval.summary}
    packed = next((b for b in batches if is_packed_batch(b)), None)
    if packed is not None:
        run.trainer.add_callback(PackingIsolationCallback(
            packed,
            pad_token_id=run.tokenizer.pad_token_id,
            attn_implementation=run.recipe.model.attn_implementation,
            tolerance=run.recipe.preflight.packing_tolerance,
            accelerator=run.trainer.accelerator,
            report=report,
            watch=run.watch,
        ))
    return report


def train(recipe: Recipe, *, callbacks: list | None = None) -> Path:
    """Train per ``recipe`` and return the directory of the saved model (or LoRA adapter)."""
    from beam_sft.train.callbacks import EndOfPreflightCallback
    from beam_sft.train.save import save_final

    run = build(recipe, callbacks=callbacks)
    with run.watch.naming_silent_ranks("the pre-flight"):
        report = preflight(run) if recipe.preflight.enabled else None
    run.trainer.add_callback(EndOfPreflightCallback(run.watch))  # after the packing check's callback
    with run.watch.naming_silent_ranks("training"):
        run.trainer.train(resume_from_checkpoint=run.resume)
    out = save_final(run, report)
    if run.trainer.accelerator.is_main_process:  # our card replaces TRL's README.md
        from beam_sft.train.model_card import launcher_of, write_model_card

        write_model_card(out, launcher=launcher_of())
    return out
