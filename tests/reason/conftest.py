"""``transformers serve`` on the fixture model (``beam_sft.reason.local_server``), on 127.0.0.1
and a free port: started once per session by the fixture and stopped by it. Where it cannot start
(the serving extras missing, the model will not load) the tests that need it skip and say why."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def transformers_server(fixture_dir, tmp_path_factory):
    from beam_sft.errors import BeamError
    from beam_sft.reason.local_server import local_server

    log = tmp_path_factory.mktemp("serve") / "serve.log"
    try:
        server = local_server(fixture_dir, log=log)
        started = server.__enter__()
    except BeamError as exc:
        pytest.skip(str(exc))
    try:
        yield started
    finally:
        server.__exit__(None, None, None)
