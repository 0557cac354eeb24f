"""``transformers serve`` for a test (``beam_sft.reason.local_server``): on 127.0.0.1 and a free port,
stopped when the fixture ends; where it cannot start (the serving extras missing, the model will not
load) the tests that need it skip and say why. The one home of that set-up for every test package."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


def serve_or_skip(model_dir: str | Path, tmp_path_factory) -> Iterator:
    """A fixture's body: ``yield from serve_or_skip(model, tmp_path_factory)``."""
    from beam_sft.errors import BeamError
    from beam_sft.reason.local_server import local_server

    log = tmp_path_factory.mktemp("serve") / "serve.log"
    try:
        server = local_server(model_dir, log=log)
        started = server.__enter__()
    except BeamError as exc:
        pytest.skip(str(exc))
    try:
        yield started
    finally:
        server.__exit__(None, None, None)
