"""transformers' training loop, for a resume from a checkpoint already at the run's last step
(``beam_sft.train.trainer.trainer_class``).

transformers 5.24's ``Trainer._inner_training_loop`` resumes by running ``Trainer._run_epoch`` from the
checkpoint's epoch, skipping the batches of the steps it had trained in that epoch. Whether the run is
over it asks only after a step (``DefaultFlowCallback.on_step_end``: ``global_step >= max_steps``), so
a checkpoint at ``max_steps`` that is not at an epoch's end trained one step more (step max_steps + 1,
with the learning-rate schedule past its end); at an epoch's end the loop has no epoch left and
trains nothing. ``stops_at_max_steps`` makes the first case the second: an epoch that begins at
``max_steps`` runs no step. ``PRIVATE_NAMES`` lists what it relies on and ``problems()`` names what a new
transformers changed.
"""

from __future__ import annotations

import inspect

# The method overridden, and the loop that must still call it once per epoch.
PRIVATE_NAMES = (("transformers.trainer", "Trainer", "_run_epoch"),
                 ("transformers.trainer", "Trainer", "_inner_training_loop"))
CALL = "self._run_epoch("


def problems() -> list[str]:
    """What ``stops_at_max_steps`` needs that this transformers lacks (empty when all is there)."""
    from transformers import Trainer

    missing = [f"{m}.{c}.{n}" for m, c, n in PRIVATE_NAMES if not hasattr(Trainer, n)]
    if not missing:
        try:
            source = inspect.getsource(Trainer._inner_training_loop)
        except (OSError, TypeError):
            source = ""
        if CALL not in source:
            missing.append(f"transformers.trainer.Trainer._inner_training_loop: no longer calls {CALL}...)")
    return missing


def stops_at_max_steps(base, say=None):
    """``base`` (a Trainer class) whose epochs run no step once the state is at ``max_steps``;
    ``say(global_step, max_steps)`` is called once, on the main process, when that stops a run."""

    class StopsAtMaxSteps(base):
        def _run_epoch(self, *args, **kwargs):
            if 0 < self.state.max_steps <= self.state.global_step:
                if say is not None and not self.control.should_training_stop and self.is_world_process_zero():
                    say(self.state.global_step, self.state.max_steps)
                self.control.should_training_stop = True  # the loop leaves after this epoch
                return None
            return super()._run_epoch(*args, **kwargs)

    StopsAtMaxSteps.__name__ = StopsAtMaxSteps.__qualname__ = f"{base.__name__}StopsAtMaxSteps"
    return StopsAtMaxSteps
