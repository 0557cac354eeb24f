"""``transformers serve`` (transformers' own OpenAI-compatible server) on 127.0.0.1 and a free port:
the local teacher of the tests, the benchmark and the README's example (the fixture model, or any
local checkpoint). Needs the ``serving`` extras (fastapi, uvicorn, openai).

    with local_server("out/fixture") as server:
        ...  # server.base_url, server.model
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from beam_sft.errors import BeamError


@dataclass(frozen=True)
class LocalServer:
    base_url: str
    model: str
    log: Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _command() -> str:
    exe = Path(sys.executable).with_name("transformers")
    found = str(exe) if exe.exists() else shutil.which("transformers")
    if found is None:
        raise BeamError("the transformers command is not installed")
    return found


@contextlib.contextmanager
def local_server(model: str | Path, *, log: str | Path, start_seconds: float = 120.0,
                 extra_args: tuple[str, ...] = ()) -> Iterator[LocalServer]:
    """Start the server, wait until ``/v1/models`` answers, yield it, stop it (its process group).
    ``BeamError`` when it cannot start (the message holds the end of its log)."""
    import httpx
    from transformers.utils.import_utils import is_serve_available

    if not is_serve_available():
        raise BeamError("transformers serve needs the serving extras (fastapi, uvicorn, openai): "
                        "pip install -e '.[serving]'")
    port, log = free_port(), Path(log)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with open(log, "wb") as out:
        proc = subprocess.Popen([_command(), "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
                                 "--device", "cpu", *extra_args],
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.time() + start_seconds
        while True:
            if proc.poll() is not None or time.time() > deadline:
                tail = log.read_text(errors="replace")[-500:]
                raise BeamError(f"transformers serve did not start on 127.0.0.1:{port}: {tail}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        yield LocalServer(f"http://127.0.0.1:{port}/v1", str(model), log)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
