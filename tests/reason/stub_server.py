"""A small OpenAI-compatible chat-completions server on 127.0.0.1 (real sockets, a thread), for what
no real server does on demand: a 429 before success, a hang, a death mid-run, chosen replies.

``behave(n, body) -> Reply`` decides the reply to the n-th request (0-based); every request body is
recorded in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    text: str = "I look at what was asked and answer it."
    status: int = 200
    finish_reason: str = "stop"
    headers: dict = field(default_factory=dict)
    delay: float = 0.0
    tokens: int = 10
    # write(handler, request_headers): the reply written by hand instead (trickled, endless, hostile
    # bytes: tests/reason/hostile.py); the write ends when the client hangs up
    write: object = None


def always(reply: Reply):
    return lambda n, body: reply


class StubServer:
    def __init__(self, behave=None):
        self.behave = behave or always(Reply())
        self.requests: list[dict] = []
        self.dead = False
        self.headers: list[dict] = []
        self.paths: list[str] = []  # each request's path and query, as sent
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                if stub.dead:  # a dead server: the connection drops without a reply
                    self.close_connection = True
                    self.connection.close()
                    return
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                with stub._lock:
                    n = len(stub.requests)
                    stub.requests.append(body)
                    stub.headers.append(dict(self.headers))
                    stub.paths.append(self.path)
                reply = stub.behave(n, body)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.write is not None:
                    try:
                        reply.write(self, dict(self.headers))
                    except OSError:
                        pass  # the client hung up (a deadline or a byte bound did its job)
                    self.close_connection = True
                    return
                if reply.status == 200:
                    payload = {"id": f"c{n}", "object": "chat.completion", "model": body.get("model"),
                               "choices": [{"index": 0, "finish_reason": reply.finish_reason,
                                            "message": {"role": "assistant", "content": reply.text}}],
                               "usage": {"prompt_tokens": reply.tokens // 2, "completion_tokens": reply.tokens // 2,
                                         "total_tokens": reply.tokens}}
                else:
                    payload = {"error": {"message": "stub error", "code": reply.status}}
                data = json.dumps(payload).encode()
                try:
                    self.send_response(reply.status)
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (a timeout test)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def kill(self):
        """Die as a crashed server does: open connections drop, new ones are refused."""
        self.dead = True
        self.stop()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
