"""``TeacherConfig``: where the teacher is and what it may cost; the CLI's flags and the prepare
config's ``reasoning:`` block are both this one type.

>>> from beam_sft.config_utils import from_dict
>>> from_dict(TeacherConfig, {"base_url": "http://h:8000/v1", "model": "m", "concurrency": 4}).concurrency
4
>>> from_dict(TeacherConfig, {"base_url": "http://h/v1", "model": "m"}).response_bytes()  # 24 * 20000 + 64 KiB
545536
>>> from_dict(TeacherConfig, {"base_url": "http://h/v1", "model": "m", "max_request": 4}, "reasoning")
Traceback (most recent call last):
...
beam_sft.errors.ConfigError: reasoning.max_request: unknown key (known: allow_insecure_http, api_key_env, backoff, base_url, cache_dir, concurrency, judge, max_reasoning_chars, max_requests, max_response_bytes, max_tokens, max_tokens_total, model, prompt, retries, temperature, timeout)
>>> from_dict(TeacherConfig, {"base_url": "http://h/v1", "model": "m", "judge": {"modle": "j"}}, "reasoning")
Traceback (most recent call last):
...
beam_sft.errors.ConfigError: reasoning.judge.modle: unknown key (known: api_key_env, base_url, max_tokens, model, prompt, temperature)
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from beam_sft.config_utils import require_path
from beam_sft.errors import BeamError, ConfigError
from beam_sft.reason.checks import DEFAULT_MAX_CHARS
from beam_sft.redact import redact_url, url_secrets

# The environment variables the key is read from, in order, when api_key_env is not given.
DEFAULT_KEY_ENVS = ("BEAM_TEACHER_API_KEY", "OPENAI_API_KEY")


def check_base_url(url: str, key: str = "base_url") -> None:
    """An endpoint's URL: http(s), a host, a port that is one; refused with ``key`` and the URL quoted
    without its credentials (the teacher's, the judge's, eval's).

    >>> check_base_url("http://u:pw@127.0.0.1:99999/v1", "judge.base_url")
    Traceback (most recent call last):
    ...
    beam_sft.errors.ConfigError: judge.base_url: is not a URL (Port out of range 0-65535): 'http://***@127.0.0.1:99999/v1'
    """
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ConfigError(key, f"must be an http(s) URL, got {redact_url(str(url))!r}")
    try:
        parts = urlsplit(url)
        host, _ = parts.hostname, parts.port  # a bad port raises here
    except ValueError as exc:
        raise ConfigError(key, f"is not a URL ({exc}): {redact_url(url)!r}") from None
    if not host:
        raise ConfigError(key, f"has no host: {redact_url(url)!r}")


def check_transport(base_url: str, api_key: str | None, *, allowed: bool) -> None:
    """Refuse to send a credential (the key, or one the URL carries) over plain http to a host that is
    not this machine (127.0.0.0/8, ::1, localhost), unless ``allowed``: anyone on the path reads it."""
    parts = urlsplit(base_url)
    if parts.scheme != "http" or allowed or _loopback(parts.hostname or ""):
        return
    if api_key or url_secrets(base_url):
        raise BeamError(f"refusing to send the API key over plain http to {parts.hostname}: anyone on the "
                        "network path can read it; use https, or allow it with --allow-insecure-http "
                        "(reasoning.allow_insecure_http: true) on a network you trust")


@dataclass(frozen=True)
class JudgeConfig:
    """``--judge``: one more request per filled turn asks whether its reasoning leads to exactly that
    turn (``beam_sft.reason.judge``). Unset endpoint/model: the teacher's own."""

    base_url: str | None = None  # default: the teacher's
    model: str | None = None  # default: the teacher's
    api_key_env: str | None = None  # default: the teacher's key
    prompt: str | None = None  # default beam_sft/reason/prompts/judge_v1.txt
    max_tokens: int = 256  # a verdict line and a reason; a reply cut off here is judge_failed
    temperature: float = 0.0  # a verdict, not a sample

    def __post_init__(self) -> None:
        if self.base_url is not None:
            check_base_url(self.base_url)
        if self.api_key_env is not None and not self.api_key_env.strip():
            raise ConfigError("api_key_env", "must name an environment variable (leave it out for the teacher's key)")
        if self.model is not None and not self.model.strip():
            raise ConfigError("model", "must not be empty")
        require_path(self.prompt, "prompt")  # empty: not the default prompt, said
        if self.max_tokens < 1:
            raise ConfigError("max_tokens", f"must be at least 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ConfigError("temperature", "out of range")

    @property
    def params(self) -> dict:
        return {"max_tokens": self.max_tokens, "temperature": self.temperature}


@dataclass(frozen=True)
class TeacherConfig:
    base_url: str
    model: str
    api_key_env: str | None = None  # default: BEAM_TEACHER_API_KEY, then OPENAI_API_KEY
    concurrency: int = 8
    max_requests: int | None = None  # retries count: every request sent is spent
    max_tokens_total: int | None = None  # the replies' usage.total_tokens, summed
    timeout: float = 120.0  # seconds per request, in all: connect, headers, body (however slowly sent)
    retries: int = 4
    backoff: float = 1.0  # seconds; the n-th retry waits up to backoff * 2**n (jittered), or Retry-After
    prompt: str | None = None  # a prompt file; default beam_sft/reason/prompts/v1.txt
    cache_dir: str | None = None  # default: $XDG_CACHE_HOME/beam-sft/teacher (~/.cache/...)
    max_tokens: int = 2048  # per request: a reply that reaches it is cut off (teacher_cut_off)
    temperature: float = 0.6
    max_reasoning_chars: int = DEFAULT_MAX_CHARS
    judge: JudgeConfig | None = None  # --judge: each filled turn's reasoning is judged (one more request)
    max_response_bytes: int | None = None  # a reply's bytes; default sized from max_reasoning_chars (response_bytes)
    allow_insecure_http: bool = False  # send the key over plain http to a host that is not this machine

    def __post_init__(self) -> None:
        check_base_url(self.base_url)  # quoted without its credentials
        if self.api_key_env is not None and not self.api_key_env.strip():
            raise ConfigError("api_key_env", "must name an environment variable (leave it out for "
                                             f"{' then '.join(DEFAULT_KEY_ENVS)})")
        if not self.model.strip():
            raise ConfigError("model", "must not be empty")
        for name in ("prompt", "cache_dir"):  # empty: not the default prompt or cache, said
            require_path(getattr(self, name), name)
        for name in ("concurrency", "max_tokens", "max_reasoning_chars"):
            if getattr(self, name) < 1:
                raise ConfigError(name, f"must be at least 1, got {getattr(self, name)}")
        if self.max_response_bytes is not None and self.max_response_bytes < 1:
            raise ConfigError("max_response_bytes", f"must be at least 1, got {self.max_response_bytes}")
        for name in ("max_requests", "max_tokens_total"):
            if getattr(self, name) is not None and getattr(self, name) < 0:
                raise ConfigError(name, f"must be >= 0, got {getattr(self, name)}")
        if self.retries < 0 or self.timeout <= 0 or self.backoff < 0 or self.temperature < 0:
            raise ConfigError("retries" if self.retries < 0 else "timeout" if self.timeout <= 0
                              else "backoff" if self.backoff < 0 else "temperature", "out of range")

    @property
    def params(self) -> dict:
        """The generation parameters sent with every request (and part of every cache key)."""
        return {"max_tokens": self.max_tokens, "temperature": self.temperature}

    def response_bytes(self) -> int:
        """The byte bound of a reply: given, or room for the longest text the checks let through at
        JSON's widest escaping (12 bytes a character, a surrogate pair as two ``\\uXXXX``) in both the
        content and a reasoning field (24 bytes a character), plus 64 KiB for the rest of the reply."""
        return self.max_response_bytes or 24 * self.max_reasoning_chars + 65536

    def check_transport(self, api_key: str | None, *, base_url: str | None = None) -> None:
        """Refuse to send a credential (the key, or one the URL carries) over plain http to a host that
        is not this machine (127.0.0.0/8, ::1, localhost), unless allowed: anyone on the path reads it.
        ``base_url``: another endpoint under the same rule (the judge's)."""
        check_transport(base_url or self.base_url, api_key, allowed=self.allow_insecure_http)

    def api_key(self) -> str | None:
        """The key from the environment (never from a flag: a command line is visible to every user)."""
        if self.api_key_env:
            if self.api_key_env not in os.environ:
                raise BeamError(f"the API key variable {self.api_key_env} is not set")
            return os.environ[self.api_key_env]
        return next((os.environ[v] for v in DEFAULT_KEY_ENVS if os.environ.get(v)), None)

    def judge_key(self) -> str | None:
        """The judge's key: its own variable when given (a judge served elsewhere), else the teacher's."""
        if self.judge is not None and self.judge.api_key_env:
            if self.judge.api_key_env not in os.environ:
                raise BeamError(f"the judge's API key variable {self.judge.api_key_env} is not set")
            return os.environ[self.judge.api_key_env]
        return self.api_key()

    def resolved_cache_dir(self) -> Path:
        if self.cache_dir:
            return Path(self.cache_dir)
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / "beam-sft" / "teacher"


def _loopback(host: str) -> bool:
    """
    >>> [_loopback(h) for h in ("localhost", "127.3.2.1", "::1", "10.0.0.1", "localhost.evil.com")]
    [True, True, True, False, False]
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
