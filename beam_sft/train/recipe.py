"""The training recipe: one typed source of truth, from YAML plus ``--section.key value`` overrides.

A recipe has six sections::

    model:     path, dtype, attn_implementation           (ModelSection)
    data:      prepared: DIR  |  prepare: {PrepareConfig}  (DataSection), eval: {...} (EvalConfig)
    sft:       SFTConfig keys, checked against TRL's SFTConfig (unknown keys fail with their path)
    lora:      optional PEFT LoRA options                   (LoraSection; absent or null = full fine-tune)
    preflight: checks before step 1                         (PreflightSection)
    format_health: valid-turn rate + task metrics in training (FormatHealthSection)

``sft.assistant_only_loss`` keeps TRL's name but is ours: true (the default) trains exactly the
tokens whose ``assistant_masks`` bit is 1; false trains every token. The prepared dataset reaches
TRL as tokens, so TRL never renders a row again.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from beam_sft.config_utils import (
    _coerce,
    deep_merge,
    from_dict,
    load_yaml,
    parse_overrides,
    parse_yaml,
    require_path,
    set_by_overrides,
    shown,
)
from beam_sft.errors import ConfigError
from beam_sft.redact import redact_record

Dtype = Literal["auto", "float32", "bfloat16", "float16"]
AttnImplementation = Literal["sdpa", "eager", "flex_attention", "flash_attention_2", "flash_attention_3"]

# SFTConfig keys a recipe may not set: each would undo the prepared-dataset contract.
FORBIDDEN_SFT_KEYS: dict[str, str] = {
    "dataset_text_field": "the prepared dataset is already tokenized",
    "dataset_kwargs": "skip_prepare_dataset would drop the labels built from assistant_masks",
    "chat_template_path": "the chat template is the prepared tokenizer's; re-prepare to change it",
    "eos_token": "the eos token is the prepared tokenizer's (<|return|>)",
    "pad_token": "the pad token is the prepared tokenizer's",
    "completion_only_loss": "the loss follows assistant_masks; use sft.assistant_only_loss",
    "model_init_kwargs": "use the model section (dtype, attn_implementation)",
    "formatting_func": "the prepared dataset is already tokenized",
}
# Our defaults where they differ from TRL's.
SFT_DEFAULTS: dict[str, Any] = {
    "output_dir": "out/train",
    "assistant_only_loss": True,
    "report_to": "none",
}


@dataclass(frozen=True)
class ModelSection:
    path: str = ""  # hub id or local checkpoint; the CLI falls back to $BEAM_MODEL_ID
    dtype: Dtype = "auto"
    attn_implementation: AttnImplementation = "sdpa"
    trust_remote_code: bool = False
    # Expert parallelism: the routed experts sharded over groups of ep_size processes at load
    # (transformers' DistributedConfig(ep_size, fsdp_size=world size); train/expert_parallel.py).
    ep_size: int = 1


@dataclass(frozen=True)
class EvalConfig:
    """``data.eval``: the eval set. Exactly one of:

    - ``prepared``: a prepared directory of its own;
    - ``prepare``: its own sources (a PrepareConfig), prepared, cached and verified like the training set;
    - ``eval_fraction``: that fraction of the training rows, held out after conversion by row
      fingerprint with ``seed`` (``beam_sft.data.split``), so no conversation is in both sets.

    ``train`` evaluates on it at ``sft.eval_strategy``/``sft.eval_steps`` (default: every
    ``logging_steps``) and logs ``eval_loss``; the pre-flight checks its first batches too.
    """

    prepared: Path | None = None
    prepare: dict[str, Any] | None = None
    eval_fraction: float | None = None
    seed: int = 0


@dataclass(frozen=True)
class FormatHealthSection:
    """``format_health``: every ``steps`` optimizer steps (0: off) generate greedily from ``prompts``
    fixed eval prompts (with and without tools) and log the fraction of valid Beam turns, and every task
    metric of the scorer against the eval rows' own turns (``train/format_health.py``). The key keeps its
    name: recipes written before the task metrics run as they did, and log more."""

    steps: int = 0
    prompts: int = 4
    max_new_tokens: int = 256


@dataclass(frozen=True)
class DataSection:
    prepared: Path | None = None  # a `beam-sft prepare` directory
    prepare: dict[str, Any] | None = None  # a PrepareConfig, run on the main process first (cached)
    eval: EvalConfig | None = None  # the eval set (absent: no evaluation)
    # Train on a folder that did not verify cleanly or whose files changed since (logged loudly).
    allow_unverified: bool = False


@dataclass(frozen=True)
class LoraSection:
    """Which weights get adapters: ``target_modules`` (linear layers: attention, dense and shared-expert
    MLPs; PEFT's names, ``all-linear``, or on Beam the presets ``beam-attention`` / ``beam-attention-mlp``
    of ``lora_targets.py``), and on a mixture of experts ``experts: true`` for the fused
    expert tensors (PEFT ``target_parameters``, found in the model; ``target_parameters`` names them
    explicitly instead). Routers never get adapters unless ``train_routers`` (then trained in full)."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: list[str] | str = "all-linear"
    experts: bool = False
    target_parameters: list[str] | None = None
    train_routers: bool = False
    modules_to_save: list[str] | None = None
    bias: Literal["none", "all", "lora_only"] = "none"
    use_rslora: bool = False

    @property
    def on_experts(self) -> bool:
        return self.experts or bool(self.target_parameters)


# A leak moves a tiny model's logits by 0.1-1 (measured); float noise is 1e-7 in fp32, ~0.1 in bf16 on
# large logits. A tolerance outside this range either reports noise as a leak or hides a leak. It
# bounds both proofs (packing.isolation_diff); the counterfactual's differences are exactly 0 without
# a leak, even for a bf16 MoE on a GPU, where packed against alone reaches 2 and does not decide.
PACKING_TOLERANCE_RANGE = (1e-6, 1.0)
# The longest a collective may wait (preflight.timeout, sft.ddp_timeout): far above any real wait, and a
# process group's timeout is a timedelta (past ~1e14 s, and 1e300, it overflows with a traceback at launch).
MAX_TIMEOUT_S = 30 * 24 * 3600


@dataclass(frozen=True)
class PreflightSection:
    enabled: bool = True
    batches: int = 2  # first batches of the trainer's own dataloader whose labels are checked
    max_rows: int = 64  # rows behind those batches that are re-encoded from their BeamRow
    packing_tolerance: float | None = None  # max logit difference; None: by dtype and logit scale (packing.py)
    # Seconds a collective may wait for the other processes before the run fails naming the silent
    # rank (the process group's timeout; torch's default is 30 minutes). Covers the pre-flight and
    # the first steps; raise it for slow first steps (weight loading, compilation) on large models.
    timeout: float = 600.0


@dataclass(frozen=True)
class Recipe:
    model: ModelSection = field(default_factory=ModelSection)
    data: DataSection = field(default_factory=DataSection)
    sft: dict[str, Any] = field(default_factory=dict)
    lora: LoraSection | None = None
    preflight: PreflightSection = field(default_factory=PreflightSection)
    format_health: FormatHealthSection = field(default_factory=FormatHealthSection)

    @property
    def assistant_only_loss(self) -> bool:
        return bool(self.sft.get("assistant_only_loss", True))

    @property
    def output_dir(self) -> Path:
        return Path(self.sft["output_dir"])

    def to_dict(self) -> dict[str, Any]:
        return _plain(dataclasses.asdict(self))

    def to_record(self) -> dict[str, Any]:
        """``to_dict`` as it may be written where others read it (``beam_run.json``, which merge and export
        copy into the folder a user publishes): URL credentials and secret-named values masked."""
        return redact_record(self.to_dict())


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def load_recipe(path: str | Path | None = None, overrides: list[str] | dict[str, Any] | None = None) -> Recipe:
    """Read a recipe YAML, apply overrides (``["--sft.learning_rate", "1e-4"]`` or a nested dict), validate."""
    data = load_yaml(path) if path is not None else {}
    extra: dict[str, Any] = {}
    if overrides:
        extra = parse_recipe_overrides(list(overrides)) if isinstance(overrides, list) else overrides
        data = deep_merge(data, extra)
    try:
        return recipe_from_dict(data)
    except ConfigError as exc:  # which file, then which key; a key a flag set is the flag's, not the file's
        raise (exc if set_by_overrides(exc.path, extra) else exc.in_file(path)) from None


def parse_recipe_overrides(pairs: list[str]) -> dict[str, Any]:
    """``["--sft.run_name", "2024.10", "--lora.r=8"]`` -> a nested dict, each value read for its field's type.

    A field that takes a string keeps the raw text (``2024.10`` stays ``"2024.10"``, not 2024.1); other
    values are read as YAML (numbers, true/false, null, lists).

    >>> parse_recipe_overrides(["--sft.run_name", "2024.10", "--sft.learning_rate", "1e-4", "--lora.r=8"])
    {'sft': {'run_name': '2024.10', 'learning_rate': 0.0001}, 'lora': {'r': 8}}
    """
    return parse_overrides(pairs, value=_override_value)


def _override_value(parts: list[str], raw: str) -> Any:
    tp = _field_type(parts)
    value = parse_yaml(raw, "--" + ".".join(parts)) if raw.strip() else raw  # bounded like a config file
    if _takes_string(tp):
        if value is None and type(None) in (typing.get_args(tp) or ()):
            return None
        arms = typing.get_args(tp) or (tp,)
        structured = [a for a in arms if a is bool or typing.get_origin(a) in (list, dict, tuple)]
        if not structured or not isinstance(value, (list, dict, bool)):
            return raw  # the text as typed: "2024.10" is a name, not a number
    if isinstance(value, str):  # YAML 1.1 reads 1e-4 as a string: a number is what is meant
        for kind in (int, float):
            try:
                return kind(value)
            except ValueError:
                continue
    return value


def _field_type(parts: list[str]) -> Any:
    """The declared type of the recipe key ``parts`` (Any when unknown: the validation names it)."""
    if parts[0] == "sft" and len(parts) == 2:
        if parts[1] == "resume_from_checkpoint":
            return bool | str | None
        try:
            return sft_fields().get(parts[1], Any)
        except Exception:  # TRL missing: recipe validation will say so
            return Any
    tp: Any = Recipe
    for part in parts:
        if not dataclasses.is_dataclass(tp):
            return Any
        hints = typing.get_type_hints(tp)
        if part not in hints:
            return Any
        tp = hints[part]
        arms = [a for a in (typing.get_args(tp) or ()) if a is not type(None)]
        if len(arms) == 1 and dataclasses.is_dataclass(arms[0]):
            tp = arms[0]
    return tp


def _takes_string(tp: Any) -> bool:
    if tp is str:
        return True
    args = typing.get_args(tp)
    return str in args or any(isinstance(a, type) and issubclass(a, str) for a in args)


def recipe_from_dict(data: dict[str, Any]) -> Recipe:
    """Build and validate a Recipe; every problem is a ConfigError naming its key path."""
    recipe = from_dict(Recipe, data)
    sft = {**SFT_DEFAULTS, **validate_sft(recipe.sft)}
    recipe = dataclasses.replace(recipe, sft=sft)
    _check_data(recipe.data)
    from beam_sft.train.expert_parallel import check_recipe as check_expert_parallel

    check_expert_parallel(recipe)
    _check_preflight(recipe.preflight)
    if recipe.lora is not None:
        _check_lora(recipe.lora)
    check_sft_values(sft)
    recipe = _check_eval(recipe)
    from beam_sft.train.packing import check_packing_options

    check_packing_options(recipe.sft, recipe.model.attn_implementation)
    return recipe


def _check_data(data: DataSection) -> None:
    if (data.prepared is None) == (data.prepare is None):
        raise ConfigError("data", "set exactly one of data.prepared (a prepared directory) or data.prepare (a spec)")
    if data.prepare is not None:
        config_cls = _prepare_config_class()
        if config_cls is not None:
            from_dict(config_cls, data.prepare, "data.prepare")


def _check_eval(recipe: Recipe) -> Recipe:
    """``data.eval`` and ``format_health`` agree with each other and with ``sft.eval_strategy``;
    with an eval set and no ``sft.eval_strategy``, evaluate every ``eval_steps`` (or logging_steps)."""
    ev, health, sft = recipe.data.eval, recipe.format_health, dict(recipe.sft)
    strategy = str(sft.get("eval_strategy", "no")).split(".")[-1].lower()
    if ev is None:
        if strategy != "no":
            raise ConfigError("sft.eval_strategy", f"{shown(strategy)} needs an eval set: set data.eval")
        if health.steps:
            raise ConfigError("format_health.steps", "format health takes its prompts from the eval set: set data.eval")
    else:
        chosen = [k for k in ("prepared", "prepare", "eval_fraction") if getattr(ev, k) is not None]
        if len(chosen) != 1:
            raise ConfigError("data.eval", "set exactly one of prepared, prepare or eval_fraction"
                              + (f" (got {', '.join(chosen)})" if chosen else ""))
        if ev.eval_fraction is not None and not 0.0 < ev.eval_fraction < 1.0:
            raise ConfigError("data.eval.eval_fraction", f"must be between 0 and 1 (exclusive), got {ev.eval_fraction}")
        if ev.prepare is not None:
            config_cls = _prepare_config_class()
            if config_cls is not None:
                from_dict(config_cls, ev.prepare, "data.eval.prepare")
        if "eval_strategy" not in sft:
            sft["eval_strategy"] = "steps"
    for key, least in (("steps", 0), ("prompts", 1), ("max_new_tokens", 1)):
        if getattr(health, key) < least:
            raise ConfigError(f"format_health.{key}", f"must be at least {least}, got {getattr(health, key)}")
    return dataclasses.replace(recipe, sft=sft)


def _check_preflight(preflight: PreflightSection) -> None:
    if preflight.batches < 1:
        raise ConfigError("preflight.batches", "must be at least 1")
    if preflight.max_rows < 1:
        raise ConfigError("preflight.max_rows", "must be at least 1")
    low, high = PACKING_TOLERANCE_RANGE
    tolerance = preflight.packing_tolerance
    if tolerance is not None and not (low <= tolerance <= high):
        raise ConfigError(
            "preflight.packing_tolerance",
            f"{shown(tolerance)} is outside [{low:g}, {high:g}]: below it float noise reads as a leak, above it a "
            "real leak passes (null: chosen by dtype and logit scale)",
        )
    if not (0 < preflight.timeout <= MAX_TIMEOUT_S):
        raise ConfigError("preflight.timeout", f"must be a positive number of seconds up to {MAX_TIMEOUT_S:,} "
                                               f"(30 days), got {shown(preflight.timeout)}")


def _check_lora(lora: LoraSection) -> None:
    if lora.r < 1:
        raise ConfigError("lora.r", f"must be at least 1, got {lora.r}")
    if lora.alpha <= 0:
        raise ConfigError("lora.alpha", f"must be positive, got {lora.alpha}")
    if not 0 <= lora.dropout < 1:
        raise ConfigError("lora.dropout", f"must be in [0, 1), got {lora.dropout}")
    if lora.on_experts and lora.dropout:
        raise ConfigError("lora.dropout", "must be 0 with lora.experts / lora.target_parameters: PEFT cannot "
                                          "apply dropout to fused expert tensors")
    from beam_sft.train.lora_targets import check_preset_name

    check_preset_name(lora.target_modules)
    if isinstance(lora.target_modules, (list, str)) and not (lora.target_modules if isinstance(lora.target_modules, list)
                                                             else lora.target_modules.strip()):
        raise ConfigError("lora.target_modules", "an empty list or name adapts nothing: leave it out (the preset) or "
                                                 "name modules")
    if lora.target_parameters is not None and not lora.target_parameters:
        raise ConfigError("lora.target_parameters", "an empty list adapts nothing: leave it out or name tensors")


# Value rules for SFTConfig keys TRL and transformers would take silently or fail on late:
# key -> (check, what it must be). ``max_steps`` -1 is TRL's "unset": train num_train_epochs.
def _at_least(n):
    return lambda v: v >= n


def _steps(value) -> bool:
    return 0 < value < 1 or (value >= 1 and float(value).is_integer())


SFT_VALUE_RULES: dict[str, tuple[Any, str]] = {
    "learning_rate": (lambda v: v > 0, "a positive number"),
    "per_device_train_batch_size": (_at_least(1), "at least 1"),
    "per_device_eval_batch_size": (_at_least(1), "at least 1"),
    "gradient_accumulation_steps": (_at_least(1), "at least 1"),
    "seed": (lambda v: 0 <= v < 2**32, "from 0 to 2**32 - 1 (numpy's seed range)"),
    "data_seed": (lambda v: 0 <= v < 2**32, "from 0 to 2**32 - 1 (numpy's seed range)"),
    "warmup_steps": (_at_least(0), "0 or more (a float below 1 is a fraction of the steps)"),
    "warmup_ratio": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "max_length": (_at_least(1), "at least 1 (or null: no truncation)"),
    "max_steps": (lambda v: v == -1 or v >= 1, "-1 (unset: train num_train_epochs) or at least 1"),
    "num_train_epochs": (lambda v: v > 0, "a positive number"),
    "weight_decay": (_at_least(0), "0 or more"),
    "max_grad_norm": (_at_least(0), "0 or more"),
    "adam_beta1": (lambda v: 0 <= v < 1, "in [0, 1)"),
    "adam_beta2": (lambda v: 0 <= v < 1, "in [0, 1)"),
    "adam_epsilon": (lambda v: v > 0, "a positive number"),
    # transformers: a float below 1 is a fraction of the training steps, 1 or more a whole number of steps
    "logging_steps": (_steps, "a whole number of steps, or a fraction of the run below 1"),
    "save_steps": (_steps, "a whole number of steps, or a fraction of the run below 1"),
    "eval_steps": (_steps, "a whole number of steps, or a fraction of the run below 1"),
    "eval_accumulation_steps": (_at_least(1), "at least 1 (or null: keep every eval batch on the device)"),
    "dataloader_prefetch_factor": (_at_least(1), "at least 1 (or null: the DataLoader's default)"),
    "label_smoothing_factor": (lambda v: 0 <= v < 1, "in [0, 1)"),
    "neftune_noise_alpha": (lambda v: v > 0, "a positive number (or null: off)"),
    "save_total_limit": (_at_least(1), "at least 1 (or null: keep all)"),
    "dataloader_num_workers": (_at_least(0), "0 or more"),
    "router_aux_loss_coef": (_at_least(0), "0 or more (0 turns the MoE aux loss off; null: the model's own)"),
    "ddp_timeout": (lambda v: 0 < v <= MAX_TIMEOUT_S, f"a positive number of seconds up to {MAX_TIMEOUT_S:,} (30 days)"),
}


def check_sft_values(sft: dict[str, Any]) -> None:
    """Refuse out-of-range SFTConfig values with their key path (after types were checked)."""
    import math

    out = sft.get("output_dir")
    if not isinstance(out, str) or not out.strip():
        # an empty path is the working folder: the model card would replace ./README.md
        raise ConfigError("sft.output_dir", f"must be a folder path, got {shown(out)}")
    for key, (ok, what) in SFT_VALUE_RULES.items():
        value = sft.get(key)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not math.isfinite(value) or not ok(value):
            raise ConfigError(f"sft.{key}", f"must be {what}, got {shown(value)}")
    for key, allowed in _field_choices().items():
        values = sft.get(key)
        for value in values if isinstance(values, list) else [values]:
            if isinstance(value, str) and value not in allowed:
                raise ConfigError(f"sft.{key}", f"{value!r} is not one of {', '.join(allowed)}")
    _check_report_to(sft.get("report_to"))


def _field_choices() -> dict[str, list[str]]:
    """SFTConfig's fields that list their values in their metadata (``loss_type``, ``ddp_backend``,
    ``packing_strategy``, ...): TRL and transformers refuse another only once the trainer is built,
    after the model loaded, with a traceback."""
    from trl import SFTConfig

    return {f.name: [str(c) for c in f.metadata["choices"]] for f in dataclasses.fields(SFTConfig)
            if f.init and f.metadata.get("choices")}


def _check_report_to(value) -> None:
    """``report_to``: "all", "none" or integrations transformers knows (its Trainer refuses any other
    name when it is built, after the model loaded)."""
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    names = value if isinstance(value, list) else [value] if isinstance(value, str) else []
    known = ("all", "none", *INTEGRATION_TO_CALLBACK)
    for name in names:
        if isinstance(name, str) and name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError("sft.report_to", f"{name!r} is not one of {', '.join(known)}{hint}")


def _prepare_config_class():
    """beam_sft.prepare's PrepareConfig (data.prepare is checked with it before any heavy work)."""
    from beam_sft.prepare.config import PrepareConfig

    return PrepareConfig


def sft_fields() -> dict[str, Any]:
    """SFTConfig's init fields and their type hints (imports TRL)."""
    from trl import SFTConfig

    try:
        hints = typing.get_type_hints(SFTConfig)
    except Exception:  # an unresolvable forward reference: check names only
        hints = {}
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(SFTConfig) if f.init}


# SFTConfig keys that name a file or folder (a string there; deepspeed and the like may be a mapping too).
SFT_PATH_KEYS = ("output_dir", "logging_dir", "deepspeed", "fsdp_config", "accelerator_config",
                 "resume_from_checkpoint", "chat_template_path")


def validate_sft(sft: dict[str, Any]) -> dict[str, Any]:
    """Check ``sft`` keys against TRL's SFTConfig and coerce simple values to the field's type.

    Unknown keys fail with their path and the closest known key; keys that would undo the
    prepared-dataset contract are refused with the reason.
    """
    for key in SFT_PATH_KEYS:  # '' is not "not given": HF reads it as no file, or as the working folder
        if key in sft:
            require_path(sft[key], f"sft.{key}")
    known = sft_fields()
    out: dict[str, Any] = {}
    for key, value in sft.items():
        path = f"sft.{key}"
        if key in FORBIDDEN_SFT_KEYS:
            raise ConfigError(path, f"not allowed here: {FORBIDDEN_SFT_KEYS[key]}")
        if key == "resume_from_checkpoint":  # ours: a path, or true for the last checkpoint in output_dir
            if value is not None and not isinstance(value, (bool, str)):
                raise ConfigError(path, f"expected a path or true/false, got {shown(value)}")
            out[key] = value
            continue
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(path, f"unknown SFTConfig key{hint}")
        out[key] = _coerce(known[key], _number(value, known[key]), path)
        _check_choice(known[key], out[key], path)
    return out


def _check_choice(tp: Any, value: Any, path: str) -> None:
    """A string for a field typed with an enum (``lr_scheduler_type``, ``optim``, ``save_strategy``,
    ...) must be one of its values: SFTConfig would refuse it only once built, with a traceback.

    >>> from transformers.trainer_utils import SchedulerType
    >>> try:
    ...     _check_choice(SchedulerType | str, "cosinee", "sft.lr_scheduler_type")
    ... except ConfigError as exc:
    ...     print(str(exc)[:58], "...", str(exc)[-22:])
    sft.lr_scheduler_type: 'cosinee' is not one of constant, c ... (did you mean cosine?)
    """
    import enum

    if not isinstance(value, str):
        return
    choices = [a for a in (typing.get_args(tp) or (tp,)) if isinstance(a, type) and issubclass(a, enum.Enum)]
    if not choices:
        return
    allowed = [str(m.value) for e in choices for m in e]
    if value not in allowed:
        shown_list = ", ".join(sorted(allowed)[:2]) + ", ..." if len(allowed) > 12 else ", ".join(sorted(allowed))
        close = difflib.get_close_matches(value, allowed, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(path, f"{value!r} is not one of {shown_list}{hint}")


def _number(value: Any, tp: Any) -> Any:
    """YAML 1.1 reads ``1e-4`` as a string; read it as the number the field expects."""
    from beam_sft.config_utils import yaml_number

    return yaml_number(value, tp)


def sft_kwargs(recipe: Recipe) -> dict[str, Any]:
    """The SFTConfig keyword arguments: the recipe's sft section minus the keys we handle ourselves."""
    kwargs = {k: v for k, v in recipe.sft.items() if k not in ("assistant_only_loss", "resume_from_checkpoint")}
    # The masks become labels in our dataset; TRL's own flag would demand a conversational dataset.
    kwargs["assistant_only_loss"] = False
    return kwargs
