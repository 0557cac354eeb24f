"""A bounded wait for the other processes, naming the one that did not answer.

A stopped or hung rank would otherwise leave the others waiting in a collective until the process
group's timeout (transformers' default ``ddp_timeout``: 30 minutes) and then fail without saying who.

* Until the pre-flight is over, the process group's timeout is ``preflight.timeout`` (default 600 s);
  then it becomes ``sft.ddp_timeout`` (default 1800 s) for training, where a long save on one rank
  may keep the others waiting. (transformers hands ``ddp_timeout`` to the group only on GPUs, so the
  watch sets it on the group itself, on every device.)
* Before each pre-flight collective every process meets the others at a ``monitored_barrier`` on a
  gloo group of its own (gloo implements it, beside NCCL too); a process that is not there in time is
  named in a ``PreflightError``. A collective that times out elsewhere (a barrier inside accelerate,
  TRL or the trainer) is answered the same way: a short monitored barrier finds who is missing.

Raising the timeout after the pre-flight uses torch's private ``_set_pg_timeout``, fenced in
``beam_sft.compat.torch_distributed`` (a test fails naming it if torch drops it).
"""

from __future__ import annotations

import contextlib
import re
from datetime import timedelta

from beam_sft.compat.torch_distributed import set_default_timeout
from beam_sft.errors import PreflightError

DEFAULT_DDP_TIMEOUT = 1800.0  # transformers' TrainingArguments.ddp_timeout
DIAGNOSE_TIMEOUT = 30.0  # seconds the post-timeout barrier waits to find the missing ranks


class RankWatch:
    """``barrier(what)`` waits at most ``timeout`` seconds for every process (a no-op in one process)."""

    def __init__(self, timeout: float, training_timeout: float = DEFAULT_DDP_TIMEOUT):
        import torch.distributed as dist

        self.timeout = float(timeout)
        self.training_timeout = float(training_timeout)
        self.group = None
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            # transformers passes ddp_timeout to the process group only on GPUs (with use_cpu it is
            # created with torch's 30 minutes): set the pre-flight bound on the group itself.
            set_default_timeout(self.timeout)
            # Collective: every process creates it at the same point of build().
            self.group = dist.new_group(backend="gloo", timeout=timedelta(seconds=self.timeout))

    def barrier(self, what: str, timeout: float | None = None) -> None:
        if self.group is None:
            return
        import torch.distributed as dist

        timeout = self.timeout if timeout is None else timeout
        try:
            dist.monitored_barrier(group=self.group, timeout=timedelta(seconds=timeout), wait_all_ranks=True)
        except RuntimeError as exc:
            raise PreflightError(silent_ranks_message(str(exc), what, timeout, dist.get_rank())) from exc

    @contextlib.contextmanager
    def naming_silent_ranks(self, what: str):
        """A collective that times out inside the block becomes a PreflightError naming the silent rank."""
        try:
            yield
        except RuntimeError as exc:
            if self.group is None or isinstance(exc, PreflightError) or "timeout" not in str(exc).lower() \
                    and "timed out" not in str(exc).lower():
                raise
            self.barrier(what, timeout=min(DIAGNOSE_TIMEOUT, self.timeout))  # raises, naming who is missing
            raise

    def end_of_preflight(self) -> None:
        """The pre-flight is over: collectives may now wait ``training_timeout`` (sft.ddp_timeout)."""
        if self.group is not None and self.training_timeout != self.timeout:
            set_default_timeout(self.training_timeout)


def silent_ranks_message(error: str, what: str, timeout: float, me: int) -> str:
    """Turn torch's monitored-barrier error into a message naming the ranks that did not answer.

    >>> silent_ranks_message("[Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 5000 ms", "x", 5, 0)
    'rank(s) 1, 3 did not answer within 5s at x (seen from rank 0): stopped, hung or dead. Set preflight.timeout to wait longer.'
    """
    found = re.search(r"Ranks? ([\d, ]+) failed to pass", error)
    if found:
        ranks = found.group(1).strip()
    elif re.search(r"rank 0|Rank 0", error) and me != 0:
        ranks = "0"
    else:
        ranks = "unknown"
    return (f"rank(s) {ranks} did not answer within {timeout:g}s at {what} (seen from rank {me}): stopped, hung "
            "or dead. Set preflight.timeout to wait longer.")
