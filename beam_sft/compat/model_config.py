"""transformers' model-config internals: the attention implementation a loaded model runs.

transformers 5 keeps it as ``PretrainedConfig._attn_implementation`` (a property; the public
``model.set_attn_implementation`` only sets it, and there is no public getter), so reading it is
fenced here; ``problems()`` says when the property is gone.
"""

from __future__ import annotations


def attn_implementation(config) -> str | None:
    """The attention implementation ``config``'s model runs (``"sdpa"``, ``"eager"``, ...)."""
    return config._attn_implementation


def keep_in_fp32_strict(model) -> list[str]:
    """The module-name patterns ``model`` declares must stay float32 whatever the load dtype
    (``PreTrainedModel._keep_in_fp32_modules_strict``: Beam's router weight and correction bias).
    There is no public accessor; ``from_pretrained`` reads the same attribute."""
    return list(getattr(model, "_keep_in_fp32_modules_strict", None) or [])


def problems() -> list[str]:
    from transformers import PretrainedConfig, PreTrainedModel

    found = []
    if not hasattr(PreTrainedModel, "_keep_in_fp32_modules_strict"):
        found.append("transformers.PreTrainedModel._keep_in_fp32_modules_strict: gone (fp32 routers unchecked)")

    if not isinstance(getattr(PretrainedConfig, "_attn_implementation", None), property):
        found.append("transformers.PretrainedConfig._attn_implementation: not a property any more")
    return found
