"""transformers' model-config internals: the attention implementation a loaded model runs.

transformers 5 keeps it as ``PretrainedConfig._attn_implementation`` (a property; the public
``model.set_attn_implementation`` only sets it, and there is no public getter), so reading it is
fenced here; ``problems()`` says when the property is gone.
"""

from __future__ import annotations


def attn_implementation(config) -> str | None:
    """The attention implementation ``config``'s model runs (``"sdpa"``, ``"eager"``, ...)."""
    return config._attn_implementation


def problems() -> list[str]:
    from transformers import PretrainedConfig

    if not isinstance(getattr(PretrainedConfig, "_attn_implementation", None), property):
        return ["transformers.PretrainedConfig._attn_implementation: not a property any more"]
    return []
