"""transformers' weight conversion: the tensor names and layout ``save_pretrained`` writes, for
``beam-sft export`` (``train/export.py``), and which models transformers converts on load, for the
LoRA targets (``train/lora_targets.py``).

transformers 5.24 converts some checkpoints on load (``transformers.conversion_mapping``: Beam,
qwen2/3_moe, deepseek_v3 ... hold each layer's experts fused as ``mlp.experts.gate_up_proj`` and
``mlp.experts.down_proj``; the released files have ``mlp.experts.N.gate_proj.weight`` ...), and
``save_pretrained`` reverts it (``transformers.core_model_loading.revert_weight_conversion``), so a
saved folder has the released layout that serving engines read. Export reads the in-memory names
from a sharded checkpoint and writes one output shard at a time, so it needs what neither API offers
publicly: which tensors revert together (they must share a shard), and the revert itself.

The grouping follows ``revert_weight_conversion``'s own: its reversed converters, and the key
``apply_converters`` gives each name (the names a converter maps to one key revert together; every
other name is renamed alone, ``apply_renamings``). ``saved_groups`` checks the groups' reverts against
one revert of all the tensors (meta tensors: shapes only), so a transformers that groups otherwise
is an error before anything is written, not a wrong file. ``problems()`` names what a new
transformers moved.
"""

from __future__ import annotations

import importlib
import inspect

PRIVATE_NAMES = (("transformers.core_model_loading", "revert_weight_conversion"),
                 ("transformers.core_model_loading", "apply_converters"),
                 ("transformers.core_model_loading", "apply_renamings"),
                 ("transformers.core_model_loading", "WeightConverter"),
                 ("transformers.core_model_loading", "WeightRenaming"),
                 ("transformers.core_model_loading", "PrefixChange"),
                 ("transformers.conversion_mapping", "get_model_conversion_mapping"),
                 ("transformers.conversion_mapping", "get_checkpoint_conversion_mapping"))
# What the grouping mirrors in revert_weight_conversion's source: the conversions it reverses (the
# model's own, else the mapping without legacy renames and prefix changes) and how it keys them.
MIRRORED = ('getattr(model, "_weight_conversions", None)', "get_model_conversion_mapping(model, add_legacy=False)",
            "not isinstance(x, PrefixChange)", "weight_conversions[::-1]", "conversion.reverse_transform()",
            "apply_converters(original_key, converters)", "apply_renamings(original_key, renamings)")


def converts_on_load(model_type: str | None) -> bool:
    """Whether transformers converts ``model_type``'s checkpoints on load (its experts fused: peft
    0.21 then renames their LoRA targets, ``train/lora_targets.py``)."""
    try:
        from transformers.conversion_mapping import get_checkpoint_conversion_mapping
    except ImportError:  # an older transformers: nothing converts, and PEFT converts nothing either
        return False
    return model_type is not None and get_checkpoint_conversion_mapping(model_type) is not None


class ConversionMismatch(Exception):
    """The groups' reverts differ from one revert of every tensor (transformers groups otherwise)."""


def _reversed(model):
    """(converters, renamings) as ``revert_weight_conversion`` reverses them for ``model``."""
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import PrefixChange, WeightConverter, WeightRenaming

    conversions = getattr(model, "_weight_conversions", None)
    if conversions is None:
        conversions = [c for c in get_model_conversion_mapping(model, add_legacy=False)
                       if not isinstance(c, PrefixChange)]
    reverse = [c.reverse_transform() for c in (conversions or [])[::-1]]
    return ([c for c in reverse if isinstance(c, WeightConverter)],
            [c for c in reverse if isinstance(c, WeightRenaming)])


def _groups(model, names) -> tuple[list[list[str]], list[str]]:
    """(the converted groups, the names only renamed), in the order of ``names``."""
    from transformers.core_model_loading import apply_converters

    converters, _ = _reversed(model)
    converted, renamed = {}, []
    for name in names:
        key, pattern = apply_converters(name, converters) if converters else (name, None)
        if pattern is None:
            renamed.append(name)
        else:
            converted.setdefault(key, []).append(name)
    return list(converted.values()), renamed


def revert(model, tensors: dict) -> dict:
    """``save_pretrained``'s names and tensors for ``tensors`` (in-memory names; whole groups, as
    ``saved_groups`` makes them). ``tensors`` is emptied as it goes: a fused tensor is dropped once it is
    split, so one group at a time is held twice, never the whole dict."""
    from transformers.core_model_loading import revert_weight_conversion

    converted, renamed = _groups(model, list(tensors))
    out = {}
    for group in converted:
        out.update(revert_weight_conversion(model, {name: tensors.pop(name) for name in group}))
    out.update(revert_weight_conversion(model, {name: tensors.pop(name) for name in renamed}))
    return out


def saved_groups(model, tensors: dict) -> list[tuple[list[str], dict]]:
    """``tensors`` (in-memory names -> meta tensors) in the groups ``save_pretrained`` reverts together,
    each with the (meta) tensors it writes for them. Raises ``ConversionMismatch`` where the groups'
    reverts, together, are not one revert of all of ``tensors``."""
    try:
        return _saved_groups(model, tensors)
    except (RuntimeError, ValueError, TypeError, KeyError, IndexError, NotImplementedError) as exc:
        # A reverse operation that cannot run on shapes alone: refused before anything is read.
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise ConversionMismatch(f"{type(exc).__name__}: {first}") from exc


def _saved_groups(model, tensors: dict) -> list[tuple[list[str], dict]]:
    from transformers.core_model_loading import apply_renamings, revert_weight_conversion

    converted, renamed = _groups(model, list(tensors))
    _, renamings = _reversed(model)
    groups = [(group, revert_weight_conversion(model, {n: tensors[n] for n in group})) for group in converted]
    alone = revert_weight_conversion(model, {n: tensors[n] for n in renamed})
    for name in renamed:
        target = apply_renamings(name, renamings)
        if target not in alone:
            raise ConversionMismatch(f"{name}: renamed to {target}, which the revert did not write")
        groups.append(([name], {target: alone[target]}))
    whole = {n: (tuple(t.shape), t.dtype) for n, t in revert_weight_conversion(model, dict(tensors)).items()}
    parts = {n: (tuple(t.shape), t.dtype) for _, written in groups for n, t in written.items()}
    if parts != whole:
        differ = sorted(set(parts) ^ set(whole)) or sorted(n for n in whole if parts[n] != whole[n])
        raise ConversionMismatch(f"reverted by group, {differ[:3]} differ from one revert of the whole model")
    order = {name: index for index, name in enumerate(tensors)}
    return sorted(groups, key=lambda group: min(order[n] for n in group[0]))


def problems() -> list[str]:
    """What ``saved_groups`` and ``revert`` need that this transformers lacks (empty when all is there)."""
    found = []
    for module, name in PRIVATE_NAMES:
        try:
            present = hasattr(importlib.import_module(module), name)
        except ImportError:
            present = False
        if not present:
            found.append(f"{module}.{name}")
    if found:
        return found
    from transformers.core_model_loading import revert_weight_conversion

    try:
        source = inspect.getsource(revert_weight_conversion)
    except (OSError, TypeError):
        source = ""
    found += [f"transformers.core_model_loading.revert_weight_conversion: no longer has {line}"
              for line in MIRRORED if line not in source]
    return found
