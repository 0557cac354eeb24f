"""accelerate's private state (``compat.accelerate_state``, used by cpu_fsdp), applied only where a CPU FSDP
launch asks for it; the rank watch's message names the silent rank."""

from __future__ import annotations

import pytest

from beam_sft.compat import accelerate_state


def test_accelerate_still_has_what_cpu_fsdp_relies_on():
    missing = accelerate_state.problems()
    assert missing == [], f"accelerate changed: {missing} (update beam_sft/compat/accelerate_state.py)"


def test_check_internals_names_a_missing_private(monkeypatch):
    from accelerate.state import PartialState

    monkeypatch.delattr(PartialState, "_shared_state")
    assert accelerate_state.problems() == ["accelerate.state.PartialState._shared_state"]


@pytest.mark.parametrize(("fsdp", "use_cpu", "gpu", "promoted"),
                         [("true", True, True, True), ("true", False, False, True), ("true", False, True, False),
                          ("false", True, False, False), (None, True, False, False)])
def test_cpu_fsdp_only_where_a_cpu_fsdp_launch_asks(monkeypatch, fsdp, use_cpu, gpu, promoted):
    import torch
    from trl import SFTTrainer

    from beam_sft.train.trainer import trainer_class

    monkeypatch.delenv("ACCELERATE_USE_CPU", raising=False)
    if fsdp is None:
        monkeypatch.delenv("ACCELERATE_USE_FSDP", raising=False)
    else:
        monkeypatch.setenv("ACCELERATE_USE_FSDP", fsdp)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    cls = trainer_class(use_cpu)
    assert (cls.__mro__[1] is not SFTTrainer) == promoted  # [0]: the stop at max_steps, on every run
    assert issubclass(cls, SFTTrainer)


def test_silent_rank_is_named():
    from beam_sft.train.ranks import silent_ranks_message

    message = silent_ranks_message("[Rank 0]: Ranks 1 failed to pass monitoredBarrier in 2000 ms", "the data checks",
                                   2, 0)
    assert message.startswith("rank(s) 1 did not answer within 2s at the data checks")


def test_torch_still_has_what_the_rank_watch_relies_on():
    from beam_sft.compat import torch_distributed

    missing = torch_distributed.problems()
    assert missing == [], f"torch changed: {missing} (update beam_sft/compat/torch_distributed.py)"


def test_the_process_group_waits_the_preflight_timeout_until_the_preflight_is_over():
    from beam_sft.train.recipe import recipe_from_dict
    from beam_sft.train.trainer import build_sft_config

    base = {"model": {"path": "m"}, "data": {"prepared": "p"}, "sft": {"output_dir": "/tmp/x", "use_cpu": True}}
    assert build_sft_config(recipe_from_dict({**base, "preflight": {"timeout": 42}})).ddp_timeout == 42
    lower = {**base, "sft": {**base["sft"], "ddp_timeout": 20}}
    assert build_sft_config(recipe_from_dict(lower)).ddp_timeout == 20


def test_transformers_still_has_what_the_stop_at_max_steps_relies_on(monkeypatch):
    from transformers import Trainer

    from beam_sft.compat import trainer_loop

    assert trainer_loop.problems() == [], "transformers changed: update beam_sft/compat/trainer_loop.py"
    monkeypatch.setattr(Trainer, "_inner_training_loop", lambda self: None)
    assert trainer_loop.problems() == [
        "transformers.trainer.Trainer._inner_training_loop: no longer calls self._run_epoch(...)"]
    monkeypatch.delattr(Trainer, "_run_epoch")
    assert trainer_loop.problems() == ["transformers.trainer.Trainer._run_epoch"]


def test_transformers_still_has_what_export_relies_on(monkeypatch):
    import transformers.core_model_loading as loading

    from beam_sft.compat import weight_conversion

    assert weight_conversion.problems() == [], "transformers changed: update beam_sft/compat/weight_conversion.py"
    monkeypatch.setattr(loading, "revert_weight_conversion", lambda model, state_dict: state_dict)
    assert weight_conversion.problems() == [
        f"transformers.core_model_loading.revert_weight_conversion: no longer has {line}"
        for line in weight_conversion.MIRRORED]
    monkeypatch.delattr(loading, "apply_converters")
    assert weight_conversion.problems() == ["transformers.core_model_loading.apply_converters"]


def test_export_refuses_a_layout_that_does_not_revert_by_group(monkeypatch, tmp_path):
    """Where the groups export writes together do not revert as the whole model does (a transformers
    that groups otherwise), export stops before writing, naming the model type."""
    from transformers import AutoModelForCausalLM

    from beam_sft.compat import weight_conversion
    from beam_sft.errors import BeamError
    from beam_sft.train.export import export_checkpoint

    from .test_export import tiny_beam, write_dcp

    checkpoint = write_dcp(AutoModelForCausalLM.from_config(tiny_beam()), tmp_path / "ckpt")
    grouped = weight_conversion._groups

    def ungrouped(model, names):  # the fused experts taken for plain renames
        converted, renamed = grouped(model, names)
        return [], [name for group in converted for name in group] + renamed

    monkeypatch.setattr(weight_conversion, "_groups", ungrouped)
    with pytest.raises(BeamError, match="save layout for beam cannot be written shard by shard"):
        export_checkpoint(checkpoint, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*"))
