"""torch.distributed's internals: the default process group's timeout, changed after it exists
(torch's ``_set_pg_timeout``; no public setter), for the rank watch (``beam_sft.train.ranks``)."""

from __future__ import annotations

import importlib
from datetime import timedelta

PRIVATE_NAMES = (("torch.distributed.distributed_c10d", "_set_pg_timeout"),)


def problems() -> list[str]:
    """The torch names ``set_default_timeout`` needs that are missing (empty when all are there)."""
    return [f"{m}.{n}" for m, n in PRIVATE_NAMES if not hasattr(importlib.import_module(m), n)]


def set_default_timeout(seconds: float) -> None:
    """The default process group's timeout for the collectives that follow."""
    from torch.distributed.distributed_c10d import _set_pg_timeout

    _set_pg_timeout(timedelta(seconds=seconds))
