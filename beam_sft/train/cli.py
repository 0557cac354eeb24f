"""``beam-sft train``, ``merge``, ``plan`` and ``export``.

Launch training through accelerate, one line per recipe (the recipe's header gives it)::

    accelerate launch --config_file configs/accelerate/zero3.yaml -m beam_sft train \\
        --config recipes/beam-full-zero3.yaml --sft.learning_rate 1e-5
"""

from __future__ import annotations

import argparse
import json
import os

from beam_sft.cli_args import count, non_negative_float, positive_float
from beam_sft.paths import Outputs, writes, writes_nothing
from beam_sft.train import plan as planner
from beam_sft.train import trainer
from beam_sft.train.data import check_run_paths, run_inputs
from beam_sft.train.export import export_checkpoint, parse_size
from beam_sft.train.extensions import clear_stale_build_locks
from beam_sft.train.merge import merge_adapter
from beam_sft.train.plan import PlanSetup, format_plan
from beam_sft.train.recipe import load_recipe
from beam_sft.visible import visible


def _keep_overrides(parser: argparse.ArgumentParser):
    """Make ``parser`` keep the unknown ``--section.key value`` tokens, in order, as ``args.overrides``.

    The top-level parser calls ``parse_args``, whose sub-command step calls this parser's
    ``parse_known_args`` and would reject what is left over; the recipe overrides are claimed here
    instead (``recipe.parse_recipe_overrides`` validates them). Only this one parser object changes.
    """
    own = parser.parse_known_args

    def parse_known_args(args=None, namespace=None):
        namespace, extras = own(args, namespace)
        namespace.overrides = list(getattr(namespace, "overrides", None) or []) + list(extras)
        return namespace, []

    parser.parse_known_args = parse_known_args
    return parser


def register(subparsers) -> None:
    train = _keep_overrides(_add_train(subparsers))
    train.set_defaults(func=_train)
    writes(train, _train_outputs)

    merge = subparsers.add_parser("merge", help="merge a LoRA adapter into its base model")
    merge.add_argument("adapter", help="adapter directory written by `beam-sft train` with a lora section")
    merge.add_argument("-o", "--out", required=True, help="output directory for the merged model")
    merge.add_argument("--base", help="base model (default: the adapter's base_model_name_or_path)")
    merge.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    merge.set_defaults(func=_merge)
    writes(merge, lambda a: Outputs(inputs={"ADAPTER": a.adapter, "--base": a.base}, folders={"-o": a.out}))
    _add_plan(subparsers)
    _add_export(subparsers)


def _add_train(subparsers):
    train = subparsers.add_parser(
        "train",
        help="fine-tune on a prepared dataset (run under `accelerate launch` for several processes)",
        description="Train per a recipe. Extra --section.key value pairs override the recipe "
                    "(e.g. --sft.max_steps 10 --lora.r 8); unknown keys fail with their path.",
    )
    train.add_argument("--config", required=True, help="recipe YAML (see recipes/)")
    train.set_defaults(overrides=[])
    return train


def _recipe(args):
    overrides = list(args.overrides or [])
    recipe = load_recipe(args.config, overrides)
    if not recipe.model.path and os.environ.get("BEAM_MODEL_ID"):
        recipe = load_recipe(args.config, overrides + ["--model.path", os.environ["BEAM_MODEL_ID"]])
    return recipe


def _train_outputs(args) -> Outputs:
    """The recipe's paths; check_run_paths first, so a model path that is neither here nor a hub id is
    named as that, and the resume rule holds."""
    recipe = _recipe(args)
    check_run_paths(recipe)
    return Outputs(inputs=run_inputs(recipe), folders={"sft.output_dir": recipe.sft.get("output_dir")})


def _train(args) -> int:
    recipe = _recipe(args)
    check_run_paths(recipe)  # before accelerate or torch start: never over the model or the data
    clear_stale_build_locks()  # a killed DeepSpeed op build's lock would hang this launch for good
    out = trainer.train(recipe)
    from accelerate import PartialState

    state = PartialState()
    if state.is_main_process:
        print(f"beam-sft train: saved to {visible(out, newlines=False)}")
    _end_process_group(state)
    return 0


def _end_process_group(state) -> None:
    """Leave the process group together and tear it down before the interpreter exits: left to
    interpreter shutdown, a communication thread still running at exit aborts the process
    ("terminate called without an active exception", exit -6) after a run that saved cleanly."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        state.wait_for_everyone()
        dist.destroy_process_group()


def _merge(args) -> int:
    out = merge_adapter(args.adapter, args.out, base=args.base, dtype=args.dtype)
    print(f"beam-sft merge: merged model saved to {visible(out, newlines=False)}")
    return 0


def _add_plan(subparsers) -> None:
    plan = subparsers.add_parser(
        "plan", help="exact parameter counts and memory per GPU: does a run fit, on how many nodes?",
        description="Build the model on the meta device from its config (nothing is loaded), count its "
                    "parameters (total and active per token) and plan the memory each GPU holds.")
    plan.add_argument("--model", default=os.environ.get("BEAM_MODEL_ID"),
                      help="config.json, model directory or hub id (default: $BEAM_MODEL_ID; without it, "
                           "Beam itself: transformers' BeamConfig() defaults, 501B total / 23B active)")
    plan.add_argument("--gpus", type=count(1), default=8, help="GPUs in all (default 8)")
    plan.add_argument("--gpu-memory", type=positive_float, default=80.0, help="GiB per GPU (default 80)")
    plan.add_argument("--gpus-per-node", type=count(1), default=8)
    plan.add_argument("--strategy", default="zero3", choices=list(planner.STRATEGIES))
    plan.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    plan.add_argument("--lora", type=count(1), metavar="R", help="LoRA rank (default: full fine-tune)")
    plan.add_argument("--lora-experts", action="store_true", help="LoRA on the expert tensors too")
    plan.add_argument("--lora-save", nargs="+", default=(), metavar="MODULE",
                      help="with --lora: modules trained whole beside the adapters (PEFT's modules_to_save, "
                           "e.g. lm_head embed_tokens)")
    plan.add_argument("--max-length", type=count(1), default=4096)
    plan.add_argument("--micro-batch", type=count(1), default=1)
    plan.add_argument("--activation-checkpointing", action="store_true")
    plan.add_argument("--reserve", type=non_negative_float, default=3.0, help="GiB kept for CUDA context, NCCL, fragmentation")
    plan.add_argument("--ep-size", type=count(1), default=1, metavar="E",
                      help="expert parallelism (with --strategy fsdp2): each GPU gathers num_experts/E experts "
                           "of a layer instead of all (transformers' DistributedConfig(ep_size=E); default 1)")
    plan.add_argument("--trust-remote-code", action="store_true", help="let a hub config run its own code")
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    plan.set_defaults(func=_plan)
    writes_nothing(plan, "prints the plan (text or --json) on stdout")


def _plan(args) -> int:
    setup = PlanSetup(gpus=args.gpus, gpu_memory_gib=args.gpu_memory, gpus_per_node=args.gpus_per_node,
                      strategy=args.strategy, dtype=args.dtype, lora_r=args.lora, lora_experts=args.lora_experts,
                      lora_saved=tuple(args.lora_save),
                      max_length=args.max_length, micro_batch=args.micro_batch,
                      activation_checkpointing=args.activation_checkpointing, reserve_gib=args.reserve,
                      ep_size=args.ep_size)
    result = planner.plan(args.model or None, setup, trust_remote_code=args.trust_remote_code)
    print(json.dumps(result.to_dict(), indent=2) if args.json else format_plan(result))
    return 0


def _add_export(subparsers) -> None:
    export = subparsers.add_parser(
        "export", help="turn a sharded ZeRO-3/FSDP2 checkpoint into a from_pretrained folder, offline",
        description="Read a DeepSpeed ZeRO or FSDP (torch.distributed.checkpoint) checkpoint shard by shard "
                    "and write safetensors shards plus config and tokenizer; memory stays near one shard.")
    export.add_argument("checkpoint", help="a checkpoint-N folder or a sharded final output folder")
    export.add_argument("-o", "--out", required=True, help="new or empty output folder")
    export.add_argument("--config", help="folder or config.json of the model (default: the checkpoint's, "
                                         "else its parent's)")
    export.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"],
                        help="output dtype (default: the config's dtype, else float32)")
    export.add_argument("--max-shard-size", default="5GB", help="largest output shard (e.g. 5GB, 200MB)")
    export.set_defaults(func=_export)
    writes(export, lambda a: Outputs(inputs={"CHECKPOINT": a.checkpoint, "--config": a.config}, folders={"-o": a.out}))


def _export(args) -> int:
    out = export_checkpoint(args.checkpoint, args.out, config=args.config, dtype=args.dtype,
                            max_shard_bytes=parse_size(args.max_shard_size))
    print(f"beam-sft export: wrote {visible(out, newlines=False)}")
    return 0
