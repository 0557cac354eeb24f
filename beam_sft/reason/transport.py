"""An httpx transport whose every socket operation is bounded by the request's total deadline.

httpx's timeouts are per operation: a server that sends one byte of its headers, its body or its
SSE events every second never trips a read timeout, and holds the request for as long as it
trickles. Here each connect, read and write of the socket gets ``min(its own timeout, the time
left)``, and none starts once the deadline has passed (``httpcore.ReadTimeout``, which httpx reports as
``httpx.ReadTimeout``): a request ends at ``deadline`` however the server spaces its bytes,
headers, body and a reused keep-alive connection alike.

The deadline is per thread (a sync request runs, headers and body, in its caller's thread), set
by ``DeadlineTransport.deadline(seconds)`` around the whole request and the reading of its body.
Only httpcore's and httpx's public API is used (``httpcore.ConnectionPool(network_backend=...)``,
``httpx.BaseTransport``). Proxies from the environment are not used: a proxy transport would not
carry the deadline (the endpoint is reached directly, as a local server always is).
"""

from __future__ import annotations

import contextlib
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpcore
import httpx


class _Clock(threading.local):
    deadline: float | None = None


def _bounded(clock: _Clock, timeout: float | None) -> float | None:
    if clock.deadline is None:
        return timeout
    left = clock.deadline - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the request's total deadline passed")
    # a socket takes no wait past TIMEOUT_MAX (OverflowError): `--timeout 1e300` means no deadline to speak of
    left = min(left, threading.TIMEOUT_MAX)
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, clock: _Clock):
        self._inner, self._clock = inner, clock

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(self._clock, timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(self._clock, timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(ssl_context, server_hostname, _bounded(self._clock, timeout))
        return _Stream(inner, self._clock)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, clock: _Clock):
        self._inner, self._clock = httpcore.SyncBackend(), clock

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options=None) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(host, port, _bounded(self._clock, timeout), local_address, socket_options)
        return _Stream(stream, self._clock)

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options=None):
        return _Stream(self._inner.connect_unix_socket(path, _bounded(self._clock, timeout), socket_options),
                       self._clock)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


# httpcore's exceptions -> httpx's (what the client catches), most specific first
_EXCEPTIONS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.PoolTimeout, httpx.PoolTimeout), (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout), (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException), (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError), (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError), (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError), (httpcore.ProtocolError, httpx.ProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol), (httpcore.ProxyError, httpx.ProxyError),
)


@contextlib.contextmanager
def _mapped(request: httpx.Request) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for theirs, ours in _EXCEPTIONS:
            if isinstance(exc, theirs):
                raise ours(str(exc) or type(exc).__name__, request=request) from exc
        raise


class _Body(httpx.SyncByteStream):
    def __init__(self, inner, request: httpx.Request):
        self._inner, self._request = inner, request

    def __iter__(self) -> Iterator[bytes]:
        with _mapped(self._request):
            yield from self._inner

    def close(self) -> None:
        with _mapped(self._request):
            self._inner.close()


class DeadlineTransport(httpx.BaseTransport):
    def __init__(self, *, max_connections: int, max_keepalive_connections: int):
        self._clock = _Clock()
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(), max_connections=max_connections,
            max_keepalive_connections=max_keepalive_connections, network_backend=_Backend(self._clock))

    @contextlib.contextmanager
    def deadline(self, seconds: float) -> Iterator[None]:
        """Every socket operation of this thread inside the block ends by ``seconds`` from now."""
        before = self._clock.deadline
        self._clock.deadline = time.monotonic() + seconds
        try:
            yield
        finally:
            self._clock.deadline = before

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=request.headers.raw, content=request.stream, extensions=request.extensions)
        with _mapped(request):
            response = self._pool.handle_request(core)
        return httpx.Response(status_code=response.status, headers=response.headers,
                              stream=_Body(response.stream, request), extensions=response.extensions)

    def close(self) -> None:
        self._pool.close()
