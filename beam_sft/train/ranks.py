"""A bounded wait for the other processes, naming the one that did not answer.

A stopped or hung rank would otherwise leave the others waiting in a collective until the process
group's timeout (torch's default: 30 minutes) and then fail without saying who. Before each pre-flight
collective every process meets the others at a ``monitored_barrier`` on a gloo group of its own (gloo is
the backend that implements it, beside NCCL too), with the recipe's ``preflight.timeout``; a process
that is not there in time is named in a ``PreflightError`` on every process that waited for it.
"""

from __future__ import annotations

import re
from datetime import timedelta

from beam_sft.errors import PreflightError


class RankWatch:
    """``barrier(what)`` waits at most ``timeout`` seconds for every process (a no-op in one process)."""

    def __init__(self, timeout: float):
        import torch.distributed as dist

        self.timeout = float(timeout)
        self.group = None
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            # Collective: every process creates it at the same point of build().
            self.group = dist.new_group(backend="gloo", timeout=timedelta(seconds=self.timeout))

    def barrier(self, what: str) -> None:
        if self.group is None:
            return
        import torch.distributed as dist

        try:
            dist.monitored_barrier(group=self.group, timeout=timedelta(seconds=self.timeout), wait_all_ranks=True)
        except RuntimeError as exc:
            raise PreflightError(silent_ranks_message(str(exc), what, self.timeout, dist.get_rank())) from exc


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
