"""HTTP to an OpenAI-compatible chat-completions endpoint, built for real servers.

- ``timeout``: seconds per request (connect, read, write, pool), so a hung server costs at most that.
- Retries: 429, 5xx, timeouts and connection errors are retried up to ``retries`` times with
  exponential backoff and full jitter (``backoff * 2**attempt``, capped at ``max_backoff``); a
  ``Retry-After`` header (seconds or an HTTP date) is honoured instead when given. Other 4xx are
  not retried: asking again would fail again.
- ``Budget``: a hard bound on requests sent (retries included) and on tokens used (the replies'
  ``usage.total_tokens``). When it is spent, ``complete`` raises ``TeacherError("teacher_budget_exhausted")``
  without sending; the caller falls back to the row's policy and the run ends cleanly.

The API key is read from an environment variable by the CLI and only ever sent as a header; it is
never logged, and no error message here quotes a request's headers.
"""

from __future__ import annotations

import email.utils
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class TeacherError(Exception):
    """A request that gave no usable completion: ``code`` is a reason code of stage ``reason``."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Completion:
    text: str
    finish_reason: str | None
    tokens: int

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "finish_reason": self.finish_reason, "tokens": self.tokens}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Completion:
        return cls(str(data["text"]), data.get("finish_reason"), int(data.get("tokens") or 0))


@dataclass
class Budget:
    """Requests and tokens left (``None``: unbounded); shared by every thread of a run."""

    max_requests: int | None = None
    max_tokens: int | None = None
    requests: int = 0
    tokens: int = 0
    errors: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take_request(self) -> None:
        with self._lock:
            if self.max_requests is not None and self.requests >= self.max_requests:
                raise TeacherError("teacher_budget_exhausted", f"--max-requests {self.max_requests} spent")
            if self.max_tokens is not None and self.tokens >= self.max_tokens:
                raise TeacherError("teacher_budget_exhausted", f"--max-tokens-total {self.max_tokens} spent")
            self.requests += 1

    def add_tokens(self, n: int) -> None:
        with self._lock:
            self.tokens += n

    def add_error(self) -> None:
        with self._lock:
            self.errors += 1


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (a number or an HTTP date), or None.

    >>> retry_after("3"), retry_after(None), retry_after("soon")
    (3.0, None, None)
    >>> retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0)
    10.0
    """
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def endpoint_host(base_url: str) -> str:
    """The host (and port) of an endpoint, for provenance: never its path, query or credentials.

    >>> endpoint_host("http://user:pw@10.0.0.5:8000/v1?x=1")
    '10.0.0.5:8000'
    """
    parts = urlsplit(base_url)
    return parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else base_url


class TeacherClient:
    """One endpoint and model; thread-safe (one pooled ``httpx.Client``)."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 120.0,
                 retries: int = 4, backoff: float = 1.0, max_backoff: float = 60.0, budget: Budget | None = None,
                 concurrency: int = 8, sleep=time.sleep):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.host = endpoint_host(base_url)
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.budget = budget or Budget()
        self._sleep = sleep
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self._http = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout), limits=limits)

    def close(self) -> None:
        self._http.close()

    def _wait(self, attempt: int, asked: float | None) -> None:
        delay = asked if asked is not None else random.uniform(0, min(self.max_backoff, self.backoff * 2 ** attempt))
        self._sleep(min(delay, self.max_backoff))

    def complete(self, messages: list[dict], params: dict[str, Any]) -> Completion:
        """One chat completion, retried as the module docstring says; raises ``TeacherError``."""
        body = {"model": self.model, "messages": messages, "stream": False, **params}
        last = "no attempt"
        for attempt in range(self.retries + 1):
            self.budget.take_request()
            asked = None
            try:
                response = self._http.post(self.url, json=body)
            except httpx.TimeoutException as exc:
                last = f"timed out ({type(exc).__name__})"
            except httpx.TransportError as exc:
                last = f"connection failed ({type(exc).__name__}: {exc})"
            else:
                if response.status_code == 200:
                    return self._parse(response)
                last = f"HTTP {response.status_code}: {response.text[:200]!r}"
                if response.status_code not in RETRY_STATUS:
                    break
                asked = retry_after(response.headers.get("retry-after"))
            self.budget.add_error()
            if attempt < self.retries:
                self._wait(attempt, asked)
        raise TeacherError("teacher_failed", f"{self.host}: {last} (after {attempt + 1} attempt(s))")

    def _parse(self, response: httpx.Response) -> Completion:
        try:
            data = response.json()
            choice = data["choices"][0]
            text = choice["message"].get("content")
            usage = data.get("usage") or {}
            tokens = int(usage.get("total_tokens") or 0)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            self.budget.add_error()
            raise TeacherError("teacher_failed", f"{self.host}: the reply is not a chat completion ({exc!r})") from None
        self.budget.add_tokens(tokens)
        return Completion(text if isinstance(text, str) else "", choice.get("finish_reason"), tokens)
