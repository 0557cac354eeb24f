"""Replies no real server sends on demand, written byte by byte into the stub server's socket
(``Reply(write=...)``): trickled headers or bodies, endless and huge bodies, exact JSON bytes
(a key twice, ``1e400``), error bodies that echo the request's Authorization header and URL.

Every writer stops when the client hangs up (the stub catches the ``OSError``) and, as a net for a
client that never would, after ``CAP_SECONDS`` or ``CAP_BYTES``.
"""

from __future__ import annotations

import json
import time

CAP_SECONDS = 30.0
CAP_BYTES = 200 << 20


def completion(content="I look at what was asked and answer it.", *, usage=None, finish="stop", **message) -> bytes:
    """A chat completion's bytes; ``usage`` given as is (``None``: 10 tokens; ``"absent"``: no usage key)."""
    payload = {"id": "c", "object": "chat.completion",
               "choices": [{"index": 0, "finish_reason": finish,
                            "message": {"role": "assistant", "content": content, **message}}]}
    if usage != "absent":
        payload["usage"] = {"total_tokens": 10} if usage is None else usage
    return json.dumps(payload).encode()


def _head(status: int, headers: dict) -> bytes:
    lines = [f"HTTP/1.1 {status} X"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def send(body: bytes, status: int = 200, *, trickle: float = 0.0, trickle_headers: bool = False,
         content_type: str = "application/json"):
    """The reply whole, or a byte every ``trickle`` seconds (its headers too with ``trickle_headers``)."""
    def write(handler, request_headers):
        head = _head(status, {"content-type": content_type, "content-length": len(body), "connection": "close"})
        started = time.monotonic()
        for part, slow in ((head, trickle_headers), (body, True)):
            if not (trickle and slow):
                handler.wfile.write(part)
                handler.wfile.flush()
                continue
            for i in range(len(part)):
                if time.monotonic() - started > CAP_SECONDS:
                    return
                handler.wfile.write(part[i:i + 1])
                handler.wfile.flush()
                time.sleep(trickle)
    return write


def endless(prefix: bytes = b'{"choices": [{"message": {"content": "', chunk: int = 1 << 16, trickle: float = 0.0):
    """A 200 whose body never ends (no length; chunks of ``chunk`` bytes, one every ``trickle`` s)."""
    def write(handler, request_headers):
        handler.wfile.write(_head(200, {"content-type": "application/json", "connection": "close"}) + prefix)
        started, sent, block = time.monotonic(), 0, b"x" * chunk
        while time.monotonic() - started < CAP_SECONDS and sent < CAP_BYTES:
            handler.wfile.write(block)
            handler.wfile.flush()
            sent += chunk
            if trickle:
                time.sleep(trickle)
    return write


def huge(size: int):
    """A 200 of ``size`` bytes with its length given: a completion whose content is all ``x``."""
    def write(handler, request_headers):
        prefix, suffix = b'{"choices": [{"message": {"content": "', b'"}, "finish_reason": "stop"}]}'
        n = size - len(prefix) - len(suffix)
        handler.wfile.write(_head(200, {"content-type": "application/json", "content-length": size,
                                        "connection": "close"}) + prefix)
        block = b"x" * (1 << 16)
        while n > 0:
            handler.wfile.write(block[:n])
            n -= len(block)
        handler.wfile.write(suffix)
    return write


def echo(status: int = 401, as_content: bool = False):
    """What many servers do on an error: the body quotes the request's headers and URL. With
    ``as_content``: a 200 whose completion text quotes them."""
    def write(handler, request_headers):
        quoted = f"{handler.path} {json.dumps(request_headers)}"
        body = completion(quoted) if as_content else json.dumps(
            {"error": {"message": f"bad credentials: Authorization {request_headers.get('Authorization')} "
                       f"for {handler.path}", "headers": request_headers}}).encode()
        send(body, 200 if as_content else status)(handler, request_headers)
    return write
