"""Build TRL's SFTTrainer from a Recipe, run the pre-flight, train, save.

Order matters: the SFTConfig is built before the model is loaded, because under DeepSpeed ZeRO-3
the config is what makes ``from_pretrained`` load the weights already partitioned.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beam_sft.compat import trainer_loop
from beam_sft.errors import ConfigError
from beam_sft.model_support import require_support
from beam_sft.train import cpu_fsdp, data, routers
from beam_sft.train.expert_parallel import announce, check_launch, distributed_config
from beam_sft.train.lora_targets import check_names, resolve
from beam_sft.train.model_shape import load_model_config
from beam_sft.train.moe import MoeLayout, experts_to_adapt, mark_zero3_leaves, moe_layout, router_parameters
from beam_sft.train.packing import (
    builds_layer_masks,
    disable_cache,
    is_packed_batch,
    keep_packed_sequences_apart,
)
from beam_sft.train.plan import check_plan_fits
from beam_sft.train.provenance import folder_provenance
from beam_sft.train.ranks import DEFAULT_DDP_TIMEOUT, RankWatch
from beam_sft.train.recipe import Recipe, sft_kwargs
from beam_sft.train.resume import resolve_checkpoint
from beam_sft.train.save import save_final

# torch, transformers, trl, peft (and the train modules that import them at their top: callbacks,
# run_log, model_card; preflight and eval_set cost 0.2-0.3 s each) are imported inside the functions
# that use them: `beam-sft --help` imports this module, and moving them up made it take 6.6 s.

logger = logging.getLogger("beam_sft.train")


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
    model_changes: tuple[str, ...] = ()  # the MODEL_CHANGES made, in order
    truncation: dict | None = None  # data.truncation_counts: the train rows sft.max_length cuts


def trainer_class(use_cpu: bool = False):
    """TRL's SFTTrainer, promoted to FSDP on the CPU only when a CPU FSDP launch asks for it; a resume
    from a checkpoint at max_steps trains nothing (transformers trained one step more, compat/trainer_loop.py)."""
    from trl import SFTTrainer

    base = cpu_fsdp.trainer_class(SFTTrainer) if cpu_fsdp.cpu_fsdp_requested(use_cpu) else SFTTrainer
    return trainer_loop.stops_at_max_steps(base, say=say_nothing_to_train)


def say_nothing_to_train(step: int, max_steps: int) -> None:
    print(f"beam-sft train: nothing to train: the checkpoint resumed is at step {step}, the run's last "
          f"(max_steps {max_steps}); its weights are saved as the run's output", file=sys.stderr, flush=True)


def build_sft_config(recipe: Recipe):
    """The SFTConfig; its process group waits at most ``preflight.timeout`` until the pre-flight is over
    (ranks.py; ``RankWatch.end_of_preflight`` restores ``sft.ddp_timeout`` for training)."""
    from trl import SFTConfig

    kwargs = sft_kwargs(recipe)
    kwargs["ddp_timeout"] = int(min(recipe.preflight.timeout, kwargs.get("ddp_timeout", DEFAULT_DDP_TIMEOUT)))
    try:
        args = SFTConfig(**kwargs)
    except (ValueError, TypeError) as exc:  # SFTConfig's own checks (bf16 without a GPU, ...): one line, not a traceback
        raise ConfigError("sft", f"TRL's SFTConfig refused it: {str(exc).strip().splitlines()[0]}") from None
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
    """The model as training gets it: loaded (``load_weights``) with every change of ``MODEL_CHANGES``
    applied (the LoRA adapters are TRL's to add, from ``load_changed_model``'s trainer arguments)."""
    return load_changed_model(recipe).model


def load_weights(recipe: Recipe, weights_from: str | None = None):
    """The checkpoint's model, as it is (expert parallelism shards it at load: ``model.ep_size``);
    ``weights_from``: a training checkpoint to read the weights from instead (``resume_weights``)."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = recipe.model.dtype if recipe.model.dtype == "auto" else getattr(torch, recipe.model.dtype)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            weights_from or recipe.model.path,
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
    return model


# --- the changes made to the model before training: one list, applied in one place -------------------

@dataclass
class ChangeContext:
    """What a model change reads: the recipe, the model and its MoE layout (taken before PEFT wraps it)."""

    recipe: Recipe
    model: Any
    layout: Any  # beam_sft.train.moe.MoeLayout


@dataclass(frozen=True)
class ModelChange:
    """One change made to the model before training: ``applies`` says when, ``apply`` makes it and
    returns the trainer arguments it hands over as a dict (a change TRL makes when it wraps the model)."""

    name: str
    applies: Callable[[ChangeContext], bool]
    apply: Callable[[ChangeContext], Any]


def _zero3(_: ChangeContext) -> bool:
    from transformers.integrations import is_deepspeed_zero3_enabled

    return bool(is_deepspeed_zero3_enabled())


# In order. Every change made to a model before training is here, and only here is any of them made
# (tests/train/test_model_changes.py): a newcomer reads what training does to a model in one place.
MODEL_CHANGES: tuple[ModelChange, ...] = (
    # a KV cache makes sdpa/eager/flex ignore packing boundaries (packing.py)
    ModelChange("kv_cache_off", lambda c: True, lambda c: disable_cache(c.model)),
    # hybrid sliding/full decoders: each layer type's mask built from a packed batch's position ids
    ModelChange("packed_sequence_masks", lambda c: builds_layer_masks(c.model),
                lambda c: keep_packed_sequences_apart(c.model)),
    # fp32-strict routers run with autocast off (routers.py)
    ModelChange("routers_float32", lambda c: bool(routers.fp32_routers(c.model, c.layout)),
                lambda c: routers.route_in_fp32(c.model, c.layout)),
    # under DeepSpeed ZeRO-3 every MoE block a leaf: routing can never deadlock the ranks (moe.py)
    ModelChange("zero3_moe_leaves", lambda c: c.layout.is_moe and _zero3(c), lambda c: mark_zero3_leaves(c.model)),
    # the adapters on lora.target_modules (and the experts): TRL adds them from this config
    ModelChange("lora_adapters", lambda c: c.recipe.lora is not None,
                lambda c: {"peft_config": lora_config(c.recipe, c.model)}),
)


@dataclass
class ChangedModel:
    model: Any
    layout: Any  # the MoE layout as loaded, before PEFT wraps the experts
    applied: tuple[str, ...]  # the names of the MODEL_CHANGES made, in order
    trainer_kwargs: dict  # what the changes hand the trainer (peft_config)


def apply_model_changes(model, recipe: Recipe, changes: tuple[ModelChange, ...] = MODEL_CHANGES) -> ChangedModel:
    """Make every change of ``changes`` that applies to ``model``, in order; logs their names."""
    context = ChangeContext(recipe, model, moe_layout(model))
    applied, handed = [], {"peft_config": None}
    for change in changes:
        if change.applies(context):
            result = change.apply(context)  # the helpers' own returns (counts, flags) are not arguments
            handed.update(result if isinstance(result, dict) else {})
            applied.append(change.name)
    logger.info("model changes: %s", ", ".join(applied) or "none")
    return ChangedModel(model, context.layout, tuple(applied), handed)


def load_changed_model(recipe: Recipe, resume: str | None = None) -> ChangedModel:
    """The checkpoint's model with ``MODEL_CHANGES`` applied; resuming a full fine-tune, the weights
    are the resumed checkpoint's (``resume_weights``)."""
    return apply_model_changes(load_weights(recipe, resume_weights(recipe, resume)), recipe)


def resume_weights(recipe: Recipe, resume: str | None) -> str | None:
    """The checkpoint folder a resumed full fine-tune reads its weights from, else None.

    ``save_pretrained`` writes a mixture of experts in its checkpoint layout (Beam: one tensor per
    expert, ``mlp.experts.0.gate_proj.weight``), which ``from_pretrained`` converts into the fused
    tensors the model holds (``mlp.experts.gate_up_proj``). transformers' Trainer resumes a
    one-process or DDP run with a plain ``load_state_dict(strict=False)``: the fused tensors are
    "missing" (a log line), so the trained experts silently went back to the base model's while the
    optimizer state was restored. Loading the model from the checkpoint through ``from_pretrained``
    restores every tensor; the Trainer's own load then rewrites the tensors whose names match with
    the same values. FSDP and DeepSpeed checkpoints (their own loaders) and adapters (PEFT's) are
    restored by the Trainer as they are.
    """
    if resume is None or recipe.lora is not None:
        return None
    folder = Path(resume)
    whole = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
    if (folder / "config.json").is_file() and any((folder / name).is_file() for name in whole):
        return str(folder)
    return None


def lora_config(recipe: Recipe, model=None):
    """PEFT's LoraConfig: adapters on ``lora.target_modules`` (presets resolved, lora_targets.py) and, with
    ``lora.experts``, on the fused expert tensors of ``model``; routers excluded unless
    ``lora.train_routers`` (then trained in full)."""
    if recipe.lora is None:
        return None
    from peft import LoraConfig

    lora = recipe.lora
    layout = moe_layout(model) if model is not None else None
    target_parameters = list(lora.target_parameters) if lora.target_parameters else None
    if lora.experts and target_parameters is None:  # plan --lora-experts asks the same rule
        target_parameters = list(experts_to_adapt(layout or MoeLayout((), (), ()), key="lora.experts",
                                                  model=recipe.model.path))
    routers = list(layout.routers) if layout is not None else []
    target_modules = lora.target_modules
    if model is not None:  # presets and all-linear as full module names, PEFT's renames avoided (lora_targets.py)
        check_names(lora, model)  # every listed name matches the model as PEFT matches it, before training
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


def build(recipe: Recipe, *, callbacks: list | None = None) -> TrainingRun:
    """Construct the trainer on the prepared dataset (preparing it first when the recipe says so)."""
    if not recipe.model.path:
        raise ConfigError("model.path", "required (a hub id or a local checkpoint; or set BEAM_MODEL_ID)")
    # Before anything heavy: the checkpoint to resume from exists and reads.
    resume = resolve_checkpoint(recipe.sft.get("resume_from_checkpoint"), recipe.sft["output_dir"],
                                adapter=recipe.lora is not None, max_steps=recipe.sft.get("max_steps"))
    args = build_sft_config(recipe)
    watch = RankWatch(recipe.preflight.timeout, recipe.sft.get("ddp_timeout", DEFAULT_DDP_TIMEOUT))
    with watch.naming_silent_ranks("the set-up before the pre-flight"):
        return _build(recipe, args, watch, resume, callbacks)


def _build(recipe: Recipe, args, watch, resume, callbacks) -> TrainingRun:
    """The recipe, step by step: each step a function below saying why it is where it is."""
    from beam_sft.train import run_log  # imports transformers at its top (see the note on the imports)

    training = training_data(recipe, args)
    check_before_the_weights(recipe, args)
    changed = load_changed_model(recipe, resume)
    check_the_model(recipe, changed.model, training.tokenizer)
    biases = routers.BiasSnapshot(changed.model)  # the correction biases as loaded, compared at the save
    trainer = make_trainer(recipe, args, changed, training, callbacks)
    router_check = check_the_trainer(trainer, recipe, changed.layout, biases, watch)
    run_log.attach(trainer, recipe, training.eval, training.prepared_dir, prepared_data=training.prepared_data,
                   truncation=training.truncation)
    return TrainingRun(trainer=trainer, tokenizer=training.tokenizer, dataset=training.dataset,
                       prepared_dir=training.prepared_dir, recipe=recipe, prepared_data=training.prepared_data,
                       eval=training.eval, watch=watch, resume=resume, layout=changed.layout, biases=biases,
                       router_check=router_check, model_changes=changed.applied, truncation=training.truncation)


@dataclass
class TrainingData:
    prepared_dir: Path
    prepared_data: Any  # provenance.folder_provenance(prepared_dir)
    dataset: Any
    tokenizer: Any
    eval: Any  # eval_set.EvalData, or None
    truncation: dict | None = None  # data.truncation_counts of the train rows: what sft.max_length cuts


def training_data(recipe: Recipe, args) -> TrainingData:
    """The prepared folder (prepared first when the recipe says so), its tokenizer checked before the
    weights load (a mismatch costs no load), and the eval split."""
    from beam_sft.train import eval_set  # imports prepare (0.3 s): kept off `beam-sft --help`
    from beam_sft.train.preflight import check_model_tokenizer, check_tokenizer  # 0.2 s: likewise

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
    eval_data = eval_set.resolve_eval(recipe, dataset, prepared_dir, Path(args.output_dir), args.distributed_state)
    truncation = None
    if not args.packing or args.packing_strategy == "bfd":  # (bfd_split and wrapped split rows, cut none)
        truncation = data.truncation_counts(eval_data.train if eval_data else dataset, args.max_length,
                                            args.truncation_mode)
        if args.process_index == 0:
            data.say_truncation(truncation)
    return TrainingData(prepared_dir, prepared_data, dataset, tokenizer, eval_data, truncation)


def check_before_the_weights(recipe: Recipe, args) -> None:
    """What the model's config alone refuses, before the weights load: a plan larger than the free
    GPU memory, a model this transformers cannot train, a softmax aux loss on a bias-balanced router
    (routers.py), expert-parallel sizes and launcher (``model.ep_size``)."""
    if recipe.preflight.enabled:
        check_plan_fits(recipe, world_size=args.world_size)
    require_support(recipe.model.path)  # with the pre-flight off too: which transformers the model needs
    # one line for a folder without a model config (a tokenizer only), not AutoConfig's traceback
    model_config = load_model_config(recipe.model.path, trust_remote_code=recipe.model.trust_remote_code)
    routers.check_aux_loss(model_config, recipe.sft)
    check_launch(recipe, model_config, world_size=args.world_size)


def check_the_model(recipe: Recipe, model, tokenizer) -> None:
    """The loaded model against the tokenizer: ``<|return|>`` ends generation, every id has a row;
    no ``load_best_model_at_end`` on a full fine-tune of fused experts (``resume_weights``: the
    Trainer reloads the best checkpoint with ``load_state_dict(strict=False)``, which would leave the
    last step's experts beside the best step's other weights)."""
    from beam_sft.train.preflight import check_generation_eos, check_vocab

    if recipe.sft.get("load_best_model_at_end") and recipe.lora is None and moe_layout(model).expert_parameters:
        raise ConfigError("sft.load_best_model_at_end", "true, but the Trainer reloads the best checkpoint of a "
                          "full fine-tune without converting its fused experts: the saved model would mix two "
                          "steps' weights. Keep every checkpoint (save_total_limit) and pick the best one by its "
                          "eval loss instead")
    if recipe.preflight.enabled:
        check_generation_eos(model, tokenizer)
        check_vocab(model, tokenizer)


def make_trainer(recipe: Recipe, args, changed: ChangedModel, training: TrainingData, callbacks):
    """TRL's SFTTrainer on the changed model (it adds the adapters the changes handed it) and the
    train/eval rows as the collator reads them."""
    from beam_sft.train.callbacks import LossLogCallback  # imports transformers at its top

    split = training.eval
    return trainer_class(bool(recipe.sft.get("use_cpu")))(
        model=changed.model,
        args=args,
        train_dataset=data.trainer_dataset(split.train if split else training.dataset,
                                           assistant_only_loss=recipe.assistant_only_loss),
        eval_dataset=data.trainer_dataset(split.eval, assistant_only_loss=recipe.assistant_only_loss)
        if split else None,
        processing_class=training.tokenizer,
        callbacks=[LossLogCallback(args.output_dir), *(callbacks or [])],
        **changed.trainer_kwargs,
    )


def check_the_trainer(trainer, recipe: Recipe, layout, biases, watch):
    """The wrapped model: no router trains unless asked, routers in the precision they need; on a MoE
    a callback that checks the routers after the launcher wrapped the model, before step 1."""
    check_routers(trainer, recipe, layout)
    routers.check_precision(trainer, trainer.model, layout)
    if not layout.is_moe:
        return None
    from beam_sft.train.callbacks import RouterCallback  # imports transformers at its top

    router_check = RouterCallback(layout, biases, trainer.accelerator, watch)
    trainer.add_callback(router_check)
    return router_check


def preflight(run: TrainingRun):
    """Checks on the trainer's own first batches now; the packing check at train begin."""
    from beam_sft.train.callbacks import PackingIsolationCallback  # imports transformers at its top
    from beam_sft.train.preflight import run_data_checks  # 0.2 s: kept off `beam-sft --help`

    report, batches = run_data_checks(run.trainer, run.dataset, run.tokenizer, run.recipe, run.watch)
    if run.eval is not None:  # the eval batches too (kept in the report, so in beam_run.json)
        from beam_sft.train.eval_set import check_eval_batches  # 0.3 s: kept off `beam-sft --help`

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
    from beam_sft.train.callbacks import EndOfPreflightCallback  # imports transformers at its top

    run = build(recipe, callbacks=callbacks)
    with run.watch.naming_silent_ranks("the pre-flight"):
        report = preflight(run) if recipe.preflight.enabled else None
    run.trainer.add_callback(EndOfPreflightCallback(run.watch))  # after the packing check's callback
    with run.watch.naming_silent_ranks("training"):
        run.trainer.train(resume_from_checkpoint=run.resume)
    out = save_final(run, report)
    if run.trainer.accelerator.is_main_process:  # our card replaces TRL's README.md
        from beam_sft.train.model_card import launcher_of, write_model_card  # imports transformers at its top

        write_model_card(out, launcher=launcher_of())
    return out
