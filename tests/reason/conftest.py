"""``transformers serve`` on the fixture model (``beam_sft.reason.local_server``), on 127.0.0.1
and a free port: started once per session by the fixture and stopped by it. Where it cannot start
(the serving extras missing, the model will not load) the tests that need it skip and say why."""

from __future__ import annotations

import pytest

from tests.serving import serve_or_skip


@pytest.fixture(scope="session")
def transformers_server(fixture_dir, tmp_path_factory):
    yield from serve_or_skip(fixture_dir, tmp_path_factory)
