"""``beam-sft train`` and ``beam-sft merge``.

Launch training through accelerate, one line per recipe (the recipe's header gives it)::

    accelerate launch --config_file configs/accelerate/zero3.yaml -m beam_sft train \\
        --config recipes/beam-full-zero3.yaml --sft.learning_rate 1e-5
"""

from __future__ import annotations

import argparse
import os


class _OverridesParser(argparse.ArgumentParser):
    """Keeps the unknown ``--section.key value`` tokens, in order, as ``args.overrides``.

    The top-level parser calls ``parse_args``; argparse would reject the recipe overrides as
    unrecognized arguments, so this sub-parser claims them (parse_overrides validates them).
    """

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        namespace.overrides = list(getattr(namespace, "overrides", None) or []) + list(extras)
        return namespace, []


def register(subparsers) -> None:
    # argparse has no per-parser class argument on add_parser; swap it for this one parser only.
    default_class = subparsers._parser_class
    subparsers._parser_class = _OverridesParser
    try:
        train = _add_train(subparsers)
    finally:
        subparsers._parser_class = default_class
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
