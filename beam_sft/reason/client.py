"""HTTP to an OpenAI-compatible chat-completions endpoint, built for real servers (and hostile ones).

- ``timeout``: the total seconds of one request, connect to the last byte of the reply (headers,
  body, however the server spaces them: ``transport.DeadlineTransport``), so a hung or trickling
  server costs at most that.
- ``max_response_bytes``: a reply is read streaming up to this many bytes (an error reply up to
  ``ERROR_BODY_BYTES``); a larger one is refused unread past the bound (``teacher_reply_too_large``).
- Retries: 429, 5xx, timeouts and connection errors are retried up to ``retries`` times with
  exponential backoff and full jitter (``backoff * 2**attempt``, capped at ``max_backoff``); a
  ``Retry-After`` header (seconds or an HTTP date) is honoured instead when given. Other 4xx are
  not retried: asking again would fail again. 401, 403 and 404 (a refused key, a key that may not,
  no such endpoint or model) stop the run: ``TeacherStopped``, and no further request is sent.
- The reply is decoded by the one JSON rule (``beam_sft.data.jsontext``): a key twice or ``1e400``
  is ``teacher_failed`` naming the rule. Content given as a list of parts is joined from its text
  parts; a reply with reasoning (``reasoning_content`` / ``reasoning``) and no content is
  ``teacher_reasoning_only`` (that is the model's thinking about our request, not the text asked for).
- ``Budget``: a hard bound on requests sent (retries included) and on tokens used (the replies'
  ``usage.total_tokens``; a 200 reply whose usage is absent, negative, not an integer, or that
  cannot be read at all (too large, not strict JSON: ``1e400``) is counted at the request's
  ``max_tokens``, the bound the server was given, counted in ``Budget.estimated`` and warned about once). When it is spent, ``complete`` raises ``TeacherError("teacher_budget_exhausted")``
  without sending; the caller falls back to the row's policy and the run ends cleanly.

The API key is read from an environment variable by the CLI and only ever sent as a header. Every
message this module makes goes through ``beam_sft.redact.Redactor`` (the key, the URL's
credentials, any ``Bearer`` value a server echoes), and a reply quoting the key is refused.
"""

from __future__ import annotations

import email.utils
import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from beam_sft.data import jsontext
from beam_sft.errors import BeamError, RunStopped
from beam_sft.reason.transport import DeadlineTransport
from beam_sft.redact import LogFilter, Redactor

logger = logging.getLogger("beam_sft.reason")

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# Statuses after which no request can succeed: the run stops (the same key and URL for every turn).
STOP_STATUS = {401: "the API key was refused", 403: "the API key may not use this endpoint or model",
               404: "no such endpoint or model"}
ERROR_BODY_BYTES = 4096  # of an error reply: enough for its message
TEXT_PART_TYPES = ("text", "output_text")
# the loggers of the HTTP stack: httpx logs every request's URL (credentials and all) at INFO
HTTP_LOGGERS = ("httpx", "httpcore.connection", "httpcore.http11", "httpcore.http2", "httpcore.proxy")


class TeacherError(Exception):
    """A request that gave no usable completion: ``code`` is a reason code of stage ``reason``."""

    def __init__(self, code: str, message: str, *, bound: int | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.bound = bound  # set when a size bound refused the reply: the refusal is cached, never the body


class TeacherStopped(RunStopped):
    """401/403/404: every further request would fail the same way; the run ends, nothing is published."""


@dataclass(frozen=True)
class Completion:
    """A reply's text, or (``refusal``) what a size bound made of a reply: ``{"code", "message",
    "bound"}``, stored in the cache in place of the body (a rerun under a larger bound asks again)."""

    text: str
    finish_reason: str | None
    tokens: int
    refusal: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data = {"text": self.text, "finish_reason": self.finish_reason, "tokens": self.tokens}
        return {**data, "refusal": self.refusal} if self.refusal is not None else data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Completion:
        refusal = data.get("refusal")
        if refusal is not None and not (isinstance(refusal, dict) and isinstance(refusal.get("code"), str)
                                        and isinstance(refusal.get("message"), str)
                                        and isinstance(refusal.get("bound"), int)):
            raise ValueError("a cached refusal without its code, message and bound")
        return cls(str(data["text"]), data.get("finish_reason"), int(data.get("tokens") or 0), refusal)

    @classmethod
    def refused(cls, code: str, message: str, bound: int, tokens: int = 0) -> Completion:
        return cls("", None, tokens, {"code": code, "message": message, "bound": bound})


@dataclass
class Budget:
    """Requests and tokens left (``None``: unbounded); shared by every thread of a run."""

    max_requests: int | None = None
    max_tokens: int | None = None
    requests: int = 0
    tokens: int = 0
    errors: int = 0
    estimated: int = 0  # replies whose usage could not be trusted, counted at their max_tokens
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

    def add_estimated(self, n: int) -> bool:
        """Count a reply at ``n`` tokens for want of a usable usage; True the first time (warn once)."""
        with self._lock:
            self.tokens += n
            self.estimated += 1
            return self.estimated == 1


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
    return parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else "?"


def chat_url(base_url: str) -> str:
    """The chat-completions URL of an endpoint: the path grows, a query (``?api-version=...``) stays.

    >>> chat_url("https://h/openai/v1/?api-version=2024")
    'https://h/openai/v1/chat/completions?api-version=2024'
    """
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/chat/completions"))


def read_bounded(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """Up to ``limit`` bytes of the body, read as it streams; ``(bytes, whole)``: False when it is longer."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            return b"".join(chunks), False
        chunks.append(chunk)
    return b"".join(chunks), True


def _describe(value: Any) -> str:
    return type(value).__name__ if not isinstance(value, (int, float, str)) or isinstance(value, bool) \
        else repr(value)[:40]


def join_content(content: Any) -> str | None:
    """A message's content as text: a string, or a list of parts joined from its text parts.

    >>> join_content([{"type": "text", "text": "a "}, {"type": "text", "text": "b"}]), join_content(None)
    ('a b', None)
    """
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValueError(f"message.content is {_describe(content)}, not text")
    texts = []
    for i, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in TEXT_PART_TYPES or not isinstance(part.get("text"), str):
            kind = part.get("type") if isinstance(part, dict) else None
            raise ValueError(f"message.content[{i}] is not a text part (type {_describe(kind)})")
        texts.append(part["text"])
    return "".join(texts)


def unicode_problem(text: str, where: str) -> None:
    """``ValueError`` when ``text`` is not valid Unicode (a lone surrogate, sent as a ``"\\ud800"`` escape):
    no row, no cache file, no output line can hold it.

    >>> unicode_problem("bad \\ud800", "message.content")
    Traceback (most recent call last):
    ...
    ValueError: message.content is not valid Unicode text (surrogates not allowed at character 4)
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{where} is not valid Unicode text ({exc.reason} at character {exc.start})") from None


class TeacherClient:
    """One endpoint and model; thread-safe (one pooled ``httpx.Client``)."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 120.0,
                 retries: int = 4, backoff: float = 1.0, max_backoff: float = 60.0, budget: Budget | None = None,
                 concurrency: int = 8, max_response_bytes: int = 1 << 20, sleep=time.sleep):
        self.url = chat_url(base_url)
        self.model = model
        self.host = endpoint_host(base_url)
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_response_bytes = max_response_bytes
        self.budget = budget or Budget()
        self.redact = Redactor.for_endpoint(base_url, api_key)
        if api_key and not all("!" <= c <= "~" for c in api_key):  # said in one line, never sent, never quoted
            raise BeamError("the API key holds whitespace, a line break, a control or a non-ASCII character, which "
                            "an Authorization header cannot carry (a trailing newline or \\r from a key file?); "
                            "set the variable to the key alone")
        self._sleep = sleep
        self._aborted = threading.Event()
        self._stopped: TeacherStopped | None = None
        # identity: the byte bound is on what is read, and no compressed reply expands past it
        headers = {"Accept-Encoding": "identity", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
        self._transport = DeadlineTransport(max_connections=concurrency, max_keepalive_connections=concurrency)
        self._http = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout), transport=self._transport,
                                  trust_env=False, follow_redirects=False)
        self._log_filter = LogFilter(self.redact)  # removed again by close()
        for name in HTTP_LOGGERS:
            logging.getLogger(name).addFilter(self._log_filter)

    def abort(self) -> None:
        """The run is ending (Ctrl-C, an error elsewhere): every request not yet sent, every retry and
        backoff wait ends at once, and requests in flight lose their connections, so the worker threads
        end in seconds, not after their timeouts and retries."""
        self._aborted.set()
        if self._stopped is None:
            self._stopped = TeacherStopped("the run was interrupted; no further request is sent")
        # Closed from a daemon thread, waited for a moment only: closing the pool takes locks a worker
        # thread may hold in the middle of a request, and Ctrl-C must not wait out its timeout.
        closer = threading.Thread(target=self._http.close, name="teacher-abort", daemon=True)
        closer.start()
        closer.join(2.0)

    def close(self) -> None:
        if not self._aborted.is_set():  # (abort closed it, or is closing it)
            self._http.close()
        for name in HTTP_LOGGERS:
            logging.getLogger(name).removeFilter(self._log_filter)

    def _wait(self, attempt: int, asked: float | None) -> None:
        delay = asked if asked is not None else random.uniform(0, min(self.max_backoff, self.backoff * 2 ** attempt))
        if self._sleep is time.sleep:  # the real clock: a wait that abort() ends
            self._aborted.wait(min(delay, self.max_backoff))
        else:
            self._sleep(min(delay, self.max_backoff))

    def _error(self, code: str, message: str, **kw) -> TeacherError:
        return TeacherError(code, self.redact(f"{self.host}: {message}"), **kw)

    def complete(self, messages: list[dict], params: dict[str, Any]) -> Completion:
        """One chat completion, retried as the module docstring says; raises ``TeacherError``, or
        ``TeacherStopped`` (now and for every later call) after a 401/403/404."""
        return self._parse(self.send({"model": self.model, "messages": messages, "stream": False, **params},
                                     params), params)

    def send(self, body: dict[str, Any], params: dict[str, Any] | None = None) -> bytes:
        """The bytes of one 200 reply to ``body``, read whole within ``max_response_bytes``: the HTTP of
        ``complete`` (retries, deadline, budget, stop after 401/403/404), for a caller that reads the
        reply itself (``beam-sft eval --base-url``). ``params``: the request's ``max_tokens``, at which
        a reply too large to read is counted."""
        params = body if params is None else params
        last = "no attempt"
        for attempt in range(self.retries + 1):
            if self._stopped is not None:
                raise self._stopped
            self.budget.take_request()
            asked = None
            try:
                with self._transport.deadline(self.timeout), self._http.stream("POST", self.url, json=body) as response:
                    status = response.status_code
                    limit = self.max_response_bytes if status == 200 else ERROR_BODY_BYTES
                    data, whole = read_bounded(response, limit)
                    retry_header = response.headers.get("retry-after")
            except httpx.TimeoutException as exc:
                last = f"timed out (--timeout {self.timeout:g} s for the whole request; {type(exc).__name__})"
            except httpx.TransportError as exc:
                last = f"connection failed ({type(exc).__name__}: {exc})"
            except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError) as exc:  # not a converter bug: said, redacted
                last = f"the request failed ({type(exc).__name__}: {exc})"
            else:
                if status == 200:
                    if not whole:
                        self.budget.add_error()
                        self._tokens(None, params, "the reply was too large to read")  # generated: counted
                        raise self._error("teacher_reply_too_large", f"the reply is larger than --max-response-bytes "
                                          f"{limit} (not read past it)", bound=limit)
                    return data
                # cut: a body past its bound ends where the bound fell, maybe inside an echoed key
                quoted = self.redact.cut(data.decode("utf-8", "replace"))[:200]
                last = f"HTTP {status}: {quoted!r}"
                if status in STOP_STATUS:
                    self.budget.add_error()
                    self._stopped = TeacherStopped(self.redact(
                        f"the server at {self.host} answered HTTP {status} ({STOP_STATUS[status]}): {quoted!r}; "
                        "the run stops here and publishes nothing"))
                    raise self._stopped
                if status not in RETRY_STATUS:
                    break
                asked = retry_after(retry_header)
            self.budget.add_error()
            if attempt < self.retries:
                self._wait(attempt, asked)
        raise self._error("teacher_failed", f"{last} (after {attempt + 1} attempt(s))")

    def _parse(self, data: bytes, params: dict[str, Any]) -> Completion:
        try:
            if self.redact.holds(data.decode("utf-8", "replace")):
                raise ValueError("it quotes the API key or a credential of the URL (a server echoing the request); "
                                 "refused, never stored")
            try:
                payload = jsontext.loads(data)
            except ValueError as exc:
                raise ValueError(f"not strict JSON ({jsontext.reason(exc)}: {exc})") from None
            if not isinstance(payload, dict) or not isinstance(payload.get("choices"), list) or not payload["choices"]:
                raise ValueError("no choices")
            choice = payload["choices"][0]
            message = choice.get("message") if isinstance(choice, dict) else None
            if not isinstance(message, dict):
                raise ValueError("choices[0].message is not an object")
            text = join_content(message.get("content"))
            if text:
                unicode_problem(text, "message.content")
            finish = choice.get("finish_reason")
            if finish is not None and not isinstance(finish, str):
                raise ValueError(f"finish_reason is {_describe(finish)}, not a string")
        except ValueError as exc:
            self.budget.add_error()
            self._tokens(None, params, "the reply could not be read")  # a 200 still cost tokens: counted
            raise self._error("teacher_failed", f"the reply is not a chat completion: {exc}") from None
        tokens = self._tokens(payload.get("usage"), params)
        if not (text or "").strip():  # "\n\n" beside the reasoning (a reasoning parser's split) is no content either
            thought = next((message[k] for k in ("reasoning_content", "reasoning")
                            if isinstance(message.get(k), str) and message[k].strip()), None)
            if thought is not None:
                raise self._error("teacher_reasoning_only", f"the reply has reasoning ({len(thought)} characters) but "
                                  "no content: the model's own thinking, not the text asked for (a reasoning "
                                  "parser took it all, or max_tokens ran out while it thought)")
        return Completion(text or "", finish, tokens)

    def _tokens(self, usage: Any, params: dict[str, Any], unreadable: str | None = None) -> int:
        """``usage.total_tokens`` when it is a count; else the request's max_tokens, counted and said once."""
        total = usage.get("total_tokens") if isinstance(usage, dict) else None
        if isinstance(total, int) and not isinstance(total, bool) and total >= 0:
            self.budget.add_tokens(total)
            return total
        bound = params.get("max_tokens")
        bound = bound if isinstance(bound, int) and bound > 0 else 0
        if self.budget.add_estimated(bound):
            logger.warning(self.redact(
                f"beam-sft reason: warning: {self.host} gave no usable usage.total_tokens "
                f"({unreadable or ('absent' if total is None else _describe(total))}); such replies are counted at the request's "
                f"max_tokens ({bound}) against --max-tokens-total (the summary says how many)"))
        return bound
