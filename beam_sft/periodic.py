"""``periodic``: call a function every few seconds from a daemon thread while a block runs.

A leaf (imports nothing of beam_sft) so that any layer can draw a progress line with it:
``prepare``'s heartbeat and ``reason``'s stderr line both do.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def periodic(interval: float, action, name: str) -> Iterator[None]:
    """Call ``action()`` every ``interval`` seconds from a daemon thread while the block runs (so
    the work never waits on a terminal or a log); the thread is joined when the block ends."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(interval):
            action()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
