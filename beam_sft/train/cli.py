"""``beam-sft train`` and ``beam-sft merge``.

Launch training through accelerate, one line per recipe (the recipe's header gives it)::

    accelerate launch --config_file configs/accelerate/zero3.yaml -m beam_sft train \\
        --config recipes/beam-full-zero3.yaml --sft.learning_rate 1e-5
"""

from __future__ import annotations

import argparse
import os


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

    merge = subparsers.add_parser("merge", help="merge a LoRA adapter into its base model")
    merge.add_argument("adapter", help="adapter directory written by `beam-sft train` with a lora section")
    merge.add_argument("-o", "--out", required=True, help="output directory for the merged model")
    merge.add_argument("--base", help="base model (default: the adapter's base_model_name_or_path)")
    merge.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    merge.set_defaults(func=_merge)


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


def _train(args) -> int:
    from beam_sft.train.recipe import load_recipe
    from beam_sft.train.trainer import train

    overrides = list(args.overrides or [])
    recipe = load_recipe(args.config, overrides)
    if not recipe.model.path and os.environ.get("BEAM_MODEL_ID"):
        recipe = load_recipe(args.config, overrides + ["--model.path", os.environ["BEAM_MODEL_ID"]])
    out = train(recipe)
    from accelerate import PartialState

    if PartialState().is_main_process:
        print(f"beam-sft train: saved to {out}")
    return 0


def _merge(args) -> int:
    from beam_sft.train.merge import merge_adapter

    out = merge_adapter(args.adapter, args.out, base=args.base, dtype=args.dtype)
    print(f"beam-sft merge: merged model saved to {out}")
    return 0
