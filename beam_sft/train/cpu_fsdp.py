"""FSDP on the CPU, for the ``cpu-fsdp2`` launcher config that tests the FSDP2 path without GPUs.

accelerate 1.15 only turns a multi-process run into FSDP for GPU-like device types: on the CPU the
state stays ``MULTI_CPU`` (plain DDP over gloo) and the FSDP plugin from the launcher config is
dropped without a word. torch's FSDP2 (``fully_shard``) itself runs on the CPU over gloo, so when
the launcher asked for FSDP (``ACCELERATE_USE_FSDP``) for a CPU run (``sft.use_cpu``, which the
cpu-* configs need since accelerate's FSDP launcher does not pass its ``use_cpu`` on, or no GPU at all)
and the state fell back to ``MULTI_CPU``, we promote the state to FSDP with the launcher's plugin.

The state itself is written by ``beam_sft.compat.accelerate_state`` (the package of every use of a
library's internals, with its audit). Nothing here runs unless a CPU FSDP launch asks for it:
``trainer.trainer_class`` returns TRL's plain ``SFTTrainer`` otherwise.
"""

from __future__ import annotations

from beam_sft.compat import accelerate_state
from beam_sft.train import launch


def cpu_fsdp_requested(use_cpu: bool = False) -> bool:
    """True when the launcher asked for FSDP and the run is on the CPU (the cpu-fsdp2 config)."""
    if not launch.fsdp_requested():
        return False
    if use_cpu or launch.cpu_requested():
        return True
    import torch

    return not torch.cuda.is_available()


def promote_cpu_fsdp(accelerator) -> bool:
    """Make ``accelerator`` shard with FSDP when a CPU FSDP launch asked for it but the state dropped it."""
    if not launch.fsdp_requested() or not accelerate_state.is_multi_cpu(accelerator.state):
        return False
    accelerate_state.promote_to_fsdp()
    return True


def trainer_class(base):
    """``base`` (TRL's SFTTrainer) promoted to FSDP on the CPU; used only when ``cpu_fsdp_requested``."""

    class CpuFsdpSFTTrainer(base):
        def create_accelerator_and_postprocess(self):
            super().create_accelerator_and_postprocess()
            if promote_cpu_fsdp(self.accelerator):
                self.is_fsdp_enabled = True

    return CpuFsdpSFTTrainer
