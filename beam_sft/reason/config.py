"""``TeacherConfig``: where the teacher is and what it may cost; the CLI's flags and the prepare
config's ``reasoning:`` block are both this one type.

>>> from beam_sft.config_utils import from_dict
>>> from_dict(TeacherConfig, {"base_url": "http://h:8000/v1", "model": "m", "concurrency": 4}).concurrency
4
>>> from_dict(TeacherConfig, {"base_url": "http://h/v1", "model": "m", "max_request": 4}, "reasoning")
Traceback (most recent call last):
...
beam_sft.errors.ConfigError: reasoning.max_request: unknown key (known: api_key_env, backoff, base_url, cache_dir, concurrency, judge, max_reasoning_chars, max_requests, max_tokens, max_tokens_total, model, prompt, retries, temperature, timeout)
>>> from_dict(TeacherConfig, {"base_url": "http://h/v1", "model": "m", "judge": {"modle": "j"}}, "reasoning")
Traceback (most recent call last):
...
beam_sft.errors.ConfigError: reasoning.judge.modle: unknown key (known: api_key_env, base_url, max_tokens, model, prompt, temperature)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from beam_sft.errors import BeamError, ConfigError
from beam_sft.reason.checks import DEFAULT_MAX_CHARS

# The environment variables the key is read from, in order, when api_key_env is not given.
DEFAULT_KEY_ENVS = ("BEAM_TEACHER_API_KEY", "OPENAI_API_KEY")


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
        if self.base_url is not None and not self.base_url.startswith(("http://", "https://")):
            raise ConfigError("base_url", f"must be an http(s) URL, got {self.base_url!r}")
        if self.model is not None and not self.model:
            raise ConfigError("model", "must not be empty")
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
    timeout: float = 120.0  # seconds per request
    retries: int = 4
    backoff: float = 1.0  # seconds; the n-th retry waits up to backoff * 2**n (jittered), or Retry-After
    prompt: str | None = None  # a prompt file; default beam_sft/reason/prompts/v1.txt
    cache_dir: str | None = None  # default: $XDG_CACHE_HOME/beam-sft/teacher (~/.cache/...)
    max_tokens: int = 2048  # per request: a reply that reaches it is cut off (teacher_cut_off)
    temperature: float = 0.6
    max_reasoning_chars: int = DEFAULT_MAX_CHARS
    judge: JudgeConfig | None = None  # --judge: each filled turn's reasoning is judged (one more request)

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError("base_url", f"must be an http(s) URL, got {self.base_url!r}")
        if not self.model:
            raise ConfigError("model", "must not be empty")
        for name in ("concurrency", "max_tokens", "max_reasoning_chars"):
            if getattr(self, name) < 1:
                raise ConfigError(name, f"must be at least 1, got {getattr(self, name)}")
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
