"""What training does to a model before step 1 is one list, ``trainer.MODEL_CHANGES``, applied in one
place (``trainer.apply_model_changes``): the build records the changes it made, and each one it
records is on the model (Beam, a dense model, another MoE); no change is made anywhere else."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from beam_sft.train import trainer
from beam_sft.train.recipe import recipe_from_dict

from .conftest import recipe_dict
from .moe_support import moe_dirs  # noqa: F401 (a pytest fixture)

PACKAGE = Path(trainer.__file__).resolve().parents[1]
# The functions that change a model for training; each may be called only from the list.
CHANGE_FUNCTIONS = {"disable_cache", "keep_packed_sequences_apart", "route_in_fp32", "mark_zero3_leaves",
                    "lora_config"}


def _build(model_dir, prepared_dir, out, attn, **sections):
    recipe = recipe_from_dict(recipe_dict(model_dir, prepared_dir, out, model={"attn_implementation": attn},
                                          **sections))
    return trainer.build(recipe)


@pytest.mark.parametrize("arch, attn, lora, expected", [
    ("dense", "sdpa", False, ("kv_cache_off",)),
    ("beam", "sdpa", False, ("kv_cache_off", "packed_sequence_masks", "routers_float32")),
    ("gpt_oss", "eager", True, ("kv_cache_off", "packed_sequence_masks", "lora_adapters")),
])
def test_the_build_makes_the_listed_changes(arch, attn, lora, expected, moe_dirs, fixture_dir,  # noqa: F811
                                            prepared_dir, tmp_path, caplog):
    model_dir = fixture_dir if arch == "dense" else moe_dirs[arch]
    sections = {"lora": {"r": 4, "target_modules": ["q_proj"]}} if lora else {}
    with caplog.at_level("INFO", logger="beam_sft.train"):
        run = _build(model_dir, prepared_dir, tmp_path / "o", attn, **sections)
    assert run.model_changes == expected
    assert f"model changes: {', '.join(expected)}" in caplog.text
    model = run.trainer.model
    base = model.get_base_model() if lora else model
    assert base.config.use_cache is False
    hooked = getattr(base.model, "_beam_packed_mask_hook", None) is not None
    assert hooked == ("packed_sequence_masks" in expected)
    fp32 = [n for n, m in base.named_modules() if getattr(m, "beam_sft_fp32_routing", False)]
    assert bool(fp32) == ("routers_float32" in expected)
    assert (type(model).__name__ == "PeftModelForCausalLM") == lora


def test_a_change_applies_only_where_its_predicate_holds(fixture_dir):
    """The list's own machinery: a change whose predicate fails is neither made nor recorded, and the
    trainer arguments a change hands over reach the trainer."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(fixture_dir)
    made = []
    changes = (trainer.ModelChange("never", lambda c: False, lambda c: made.append("never")),
               trainer.ModelChange("always", lambda c: True, lambda c: (made.append("always"), {"x": 1})[1]))
    changed = trainer.apply_model_changes(model, None, changes)
    assert made == ["always"] and changed.applied == ("always",) and changed.trainer_kwargs["x"] == 1


def _calls_outside_the_list(source: str) -> list[str]:
    """The calls of CHANGE_FUNCTIONS in ``source`` that are not inside the MODEL_CHANGES assignment."""
    tree = ast.parse(source)
    inside = set()
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "MODEL_CHANGES" for t in targets):
            inside |= {id(n) for n in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and id(node) not in inside:
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name in CHANGE_FUNCTIONS:
                found.append(f"{name} (line {node.lineno})")
    return found


def test_no_model_change_is_made_outside_the_list():
    outside = {p.relative_to(PACKAGE).as_posix(): calls for p in sorted(PACKAGE.rglob("*.py"))
               if (calls := _calls_outside_the_list(p.read_text(encoding="utf-8")))}
    assert not outside, f"a model change made outside trainer.MODEL_CHANGES: {outside}"


def test_a_change_planted_outside_the_list_is_seen():
    planted = "MODEL_CHANGES = (f(lambda c: disable_cache(c.model)),)\ndef _build(model):\n    route_in_fp32(model, None)\n"
    assert _calls_outside_the_list(planted) == ["route_in_fp32 (line 3)"]
