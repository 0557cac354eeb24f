"""A model's config, as ``plan`` and ``export`` read it: loaded from a config object, a
``config.json``, a model folder or a hub id (``None``: Beam itself, ``BeamConfig()``), checked
(every size a positive integer in bounds, top-k within the experts, heads divisible: one
``ConfigError`` line naming the key) and built on the ``meta`` device (exact shapes, no memory).

The memory planner (``train/plan.py``) counts what this builds; ``export`` builds the model it
fills from a sharded checkpoint the same way.
"""

from __future__ import annotations

from pathlib import Path

from beam_sft.config_utils import load_json_config
from beam_sft.errors import BeamError, ConfigError

# Names a config uses for the number of routed experts and for how many each token uses.
NUM_EXPERTS_KEYS = ("num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts")
TOP_K_KEYS = ("num_experts_per_tok", "moe_topk", "top_k", "num_experts_per_token")


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[:limit] + "..."


def load_model_config(source, *, trust_remote_code: bool = False):
    """A transformers config from a config object, a ``config.json`` path, or a model directory/hub id;
    ``None``: Beam itself, ``BeamConfig()`` with transformers' defaults. Checked by :func:`check_config`."""
    from transformers import AutoConfig, PretrainedConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from beam_sft.model_support import require_support

    if source is None:
        from transformers import BeamConfig

        return BeamConfig()
    if isinstance(source, PretrainedConfig):
        check_config(source, str(getattr(source, "name_or_path", "") or "config"))
        return source
    path = Path(source)
    require_support(path)  # a 'beam' config on a transformers without models/beam/: say which it needs
    if path.is_file():
        try:
            data = load_json_config(path)  # size-bounded, like every config we read
        except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, nested past the parser
            raise BeamError(f"{path}: not a JSON config ({_one_line(exc)})") from exc
        except OSError as exc:
            raise BeamError(f"{path}: cannot read it ({_one_line(exc)})") from exc
        if not isinstance(data, dict):
            raise BeamError(f"{path}: a config is a JSON object of keys, not a {type(data).__name__}")
        model_type = data.get("model_type")
        if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
            raise BeamError(f"{path}: model_type: unknown or missing ({model_type!r})")
        check_config(data, str(path))
        try:
            config = CONFIG_MAPPING[model_type].from_dict(data)
        except Exception as exc:  # noqa: BLE001 (the config class's own validation: any type, one line)
            raise BeamError(f"{path}: not a valid {model_type} config ({_one_line(exc)})") from exc
    else:
        if path.is_dir() and not (path / "config.json").is_file():
            raise BeamError(f"{source}: a folder without config.json (no model config: a tokenizer alone cannot be planned or trained)")
        if path.is_dir():
            try:
                raw = load_json_config(path / "config.json")
            except (OSError, ValueError, RecursionError) as exc:
                raise BeamError(f"{path / 'config.json'}: not a JSON config ({_one_line(exc)})") from exc
            if not isinstance(raw, dict):
                raise BeamError(f"{path / 'config.json'}: a config is a JSON object of keys, not a {type(raw).__name__}")
            check_config(raw, str(path / "config.json"))
        try:
            config = AutoConfig.from_pretrained(str(source), trust_remote_code=trust_remote_code)
        except OSError as exc:
            raise BeamError(f"{source}: no model config found ({_one_line(exc)})") from exc
        except Exception as exc:  # noqa: BLE001 (a config that does not build: one line, never a traceback)
            raise BeamError(f"{source}: the config does not load ({_one_line(exc)})") from exc
    check_config(config, str(source))
    return config


def text_config(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


# Sizes a config may give, each an integer in [low, high] when present (None: the model's default).
# The ceilings are far above any real model (Beam: hidden 5120, 52 layers, 256 experts, vocab 151,936)
# and low enough that a meta build stays seconds and no count overflows a tensor's size.
_WIDTH, _MANY = 2**22, 2**16
SIZE_KEYS = {
    "hidden_size": (1, _WIDTH), "intermediate_size": (1, _WIDTH), "moe_intermediate_size": (1, _WIDTH),
    "vocab_size": (1, _WIDTH), "head_dim": (1, _WIDTH), "num_hidden_layers": (1, 4096),
    "num_attention_heads": (1, _MANY), "num_key_value_heads": (1, _MANY), "sliding_window": (1, 2**31),
    **{key: (1, _MANY) for key in NUM_EXPERTS_KEYS + TOP_K_KEYS},
    "n_group": (1, _MANY), "topk_group": (1, _MANY), "n_shared_experts": (0, _MANY),
    "first_k_dense_replace": (0, 4096),
}


def check_config(config, where: str) -> None:
    """Refuse a config whose sizes cannot describe a model, naming the key (one line each).

    Without this, such a config fails inside the model's constructor (a negative dimension, a
    division by zero heads) or is planned as nonsense (a top-k above the expert count). ``config``
    is a transformers config, or the raw ``config.json`` mapping (checked before the config class
    runs its own ``__post_init__``, which fails on some of these without naming the key)."""
    if isinstance(config, dict):
        def lookup(key):
            return config.get(key)
    else:
        text = text_config(config)

        def lookup(key):
            return getattr(text, key, None)
    values = {}
    for key, (low, high) in SIZE_KEYS.items():
        value = lookup(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(key, f"must be an integer from {low} to {high:,}, got {value!r} (in {where})")
        values[key] = value
    experts = next((values[k] for k in NUM_EXPERTS_KEYS if k in values), None)
    top_k_key = next((k for k in TOP_K_KEYS if k in values), None)
    if experts and top_k_key and values[top_k_key] > experts:
        raise ConfigError(top_k_key, f"{values[top_k_key]} experts a token is more than the {experts} experts "
                                     f"there are (in {where})")
    heads, kv = values.get("num_attention_heads"), values.get("num_key_value_heads")
    if heads and kv and heads % kv:
        raise ConfigError("num_key_value_heads", f"{kv} does not divide num_attention_heads {heads} (in {where})")
    groups, topk_group = values.get("n_group"), values.get("topk_group")
    if experts and groups and top_k_key:
        if experts % groups:
            raise ConfigError("n_group", f"{groups} does not divide the {experts} experts (in {where})")
        if topk_group and topk_group > groups:
            raise ConfigError("topk_group", f"{topk_group} groups chosen of {groups} (in {where})")
        if topk_group and values[top_k_key] > topk_group * (experts // groups):
            raise ConfigError(top_k_key, f"{values[top_k_key]} experts a token, but the {topk_group} chosen groups "
                                         f"hold {topk_group * (experts // groups)} (in {where})")
    layers = values.get("num_hidden_layers")
    for key in ("layer_types", "mlp_layer_types"):
        kinds = lookup(key)
        if kinds is None:
            continue
        if not isinstance(kinds, (list, tuple)) or not all(isinstance(k, str) for k in kinds):
            raise ConfigError(key, f"must be a list of layer kinds, got {kinds!r:.80} (in {where})")
        if layers is not None and len(kinds) != layers:
            raise ConfigError(key, f"{len(kinds)} entries for num_hidden_layers {layers} (in {where})")


def meta_model(config):
    """The model built on the meta device: exact shapes, no memory, no weights read."""
    import torch
    from transformers import AutoModelForCausalLM

    # A config loaded with trust_remote_code carries its code's auto_map; building it needs the same trust.
    trust = bool(getattr(config, "auto_map", None))
    try:
        with torch.device("meta"):
            return AutoModelForCausalLM.from_config(config, trust_remote_code=trust)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RuntimeError, ArithmeticError) as exc:
        # A combination check_config does not know: still one line naming the model type.
        raise BeamError(f"{getattr(config, 'model_type', 'model')}: the model cannot be built from this config "
                        f"({type(exc).__name__}: {_one_line(exc)})") from exc


def config_int(config, keys) -> int | None:
    text = text_config(config)
    for key in keys:
        value = getattr(text, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
