"""``transformers serve`` (transformers' own OpenAI-compatible server) on the fixture model, on
127.0.0.1 and a free port: started once per session by the fixture and stopped by it. Where it
cannot start (the serving extras missing, no free port, the model will not load) the tests that
need it skip and say why."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

START_SECONDS = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    def __init__(self, base_url: str, model: str):
        self.base_url, self.model = base_url, model


@pytest.fixture(scope="session")
def transformers_server(fixture_dir, tmp_path_factory):
    from transformers.utils.import_utils import is_serve_available

    if not is_serve_available():
        pytest.skip("transformers serve needs the serving extras (fastapi, uvicorn, openai): pip install -e '.[serving]'")
    exe = Path(sys.executable).with_name("transformers")
    if not exe.exists() and shutil.which("transformers") is None:
        pytest.skip("the transformers command is not installed")
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(exe if exe.exists() else "transformers"), "serve", str(fixture_dir),
                                 "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"],
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    import httpx

    deadline = time.time() + START_SECONDS
    ready = False
    while time.time() < deadline and proc.poll() is None:
        try:
            ready = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200
        except httpx.HTTPError:
            ready = False
        if ready:
            break
        time.sleep(0.5)
    if not ready:
        proc.kill()
        proc.wait()
        pytest.skip(f"transformers serve did not start on 127.0.0.1:{port}: {log.read_text(errors='replace')[-500:]}")
    try:
        yield LiveServer(f"http://127.0.0.1:{port}/v1", str(fixture_dir))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
