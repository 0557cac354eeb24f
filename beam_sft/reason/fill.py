"""A row -> the row with its missing reasoning written by the teacher, and where each turn's came from.

``Teacher`` is a ``fill`` for ``beam_sft.convert.pipeline`` (called between conversion and the
missing-reasoning policy). For each trained assistant turn:

- it has reasoning: provenance ``{"turn": i, "source": "data"}`` (a field or a reasoning part),
  ``"inline_tags"`` (``<think>`` blocks in the text) or ``"text_before_calls"``;
- it has none: the teacher is asked (or the cache answers); a text that passes ``checks`` becomes
  the turn's ``reasoning_content`` with ``{"turn": i, "source": "teacher", "model", "endpoint_host",
  "prompt_digest"}``; otherwise the turn stays without reasoning and gets ``{"turn": i, "source":
  "none", "rejected": CODE, "message": ...}``, so the policy decides (``drop``: the row is rejected
  with CODE; ``unmask``: weight 0; ``truncate``: cut) and nothing is invented silently.

A row that validation would reject for another rule whatever the teacher writes is not sent (no
request is spent on it). With ``client=None`` the teacher only reads the cache (``prepare``'s
encode workers, after its parent asked): a turn with no cached answer is ``teacher_failed``.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from beam_sft.convert.options import ConvertOptions
from beam_sft.convert.policy import apply_missing_reasoning
from beam_sft.convert.rows import BeamRow, has_reasoning
from beam_sft.convert.validate import validate
from beam_sft.harmony.spans import is_trained
from beam_sft.reason.cache import AnswerCache, cache_key
from beam_sft.reason.checks import DEFAULT_MAX_CHARS, check_text
from beam_sft.reason.client import Completion, TeacherClient, TeacherError
from beam_sft.reason.prompt import Prompt


@dataclass
class FillStats:
    """Counts of a run, shared by its threads (the progress bar and the summary read them)."""

    rows: int = 0
    asked: int = 0  # turns that needed the teacher
    filled: int = 0
    cached: int = 0  # answers read from the cache
    rejected: Counter = field(default_factory=Counter)  # teacher code -> turns
    sources: Counter = field(default_factory=Counter)  # provenance source -> trained turns
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def count(self, entry: dict) -> None:
        with self._lock:
            self.sources[entry["source"]] += 1
            if entry.get("rejected"):
                self.rejected[entry["rejected"]] += 1

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "asked": self.asked, "filled": self.filled, "cached": self.cached,
                "rejected": dict(sorted(self.rejected.items())), "sources": dict(sorted(self.sources.items()))}


@dataclass
class Teacher:
    prompt: Prompt
    model: str
    endpoint_host: str
    cache: AnswerCache
    options: ConvertOptions
    client: TeacherClient | None = None
    params: dict[str, Any] = field(default_factory=dict)  # generation parameters (max_tokens, temperature)
    max_chars: int = DEFAULT_MAX_CHARS
    max_response_bytes: int | None = None  # the client's byte bound: a cached size refusal under it stands
    stats: FillStats = field(default_factory=FillStats)
    # cache key -> (code, message) of requests that failed in this run (an asking teacher records
    # them; a cache-reading one given them reports the same code instead of "no cached answer")
    refusals: dict[str, tuple[str, str]] = field(default_factory=dict)

    def __call__(self, row: BeamRow) -> BeamRow:
        messages = row.get("messages")
        meta = dict(row.get("meta") or {})
        origins = meta.pop("reasoning_origins", None) or {}
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return row
        probe = validate(apply_missing_reasoning(row, "unmask"), options=self.options)
        if probe is not None and probe.code != "no_trained_turn":
            return {**row, "meta": meta}  # rejected for another rule whatever the teacher writes
        filled = list(messages)
        entries: list[dict] = []
        for i, message in enumerate(messages):
            if message.get("role") != "assistant" or not is_trained(message):
                continue
            if has_reasoning(message):
                entry = {"turn": i, "source": origins.get(i, "data")}
            else:
                text, entry = self._ask(messages, i, row.get("tools"))
                if text is not None:
                    filled[i] = {**message, "reasoning_content": text}
            self.stats.count(entry)
            entries.append(entry)
        return {**row, "messages": filled, "meta": {**meta, "reasoning": entries}}

    def _provenance(self, turn: int) -> dict[str, Any]:
        return {"turn": turn, "source": "teacher", "model": self.model, "endpoint_host": self.endpoint_host,
                "prompt_digest": self.prompt.digest}

    def _ask(self, messages: list[dict], turn: int, tools: list | None) -> tuple[str | None, dict]:
        self.stats.add(asked=1)
        request = self.prompt.messages(messages, turn, tools)
        key = cache_key(self.prompt.digest, self.model, request, self.params)
        completion = self.cache.get(key)
        if completion is not None and completion.refusal is not None and not self._still_refused(completion.refusal):
            completion = None  # refused for its size under a smaller bound than this run's: asked again
        try:
            if completion is not None:
                self.stats.add(cached=1)
            elif self.client is None:
                code, message = self.refusals.get(key) or (
                    "teacher_failed", "no cached answer for this turn (prepare asks before encoding)")
                raise TeacherError(code, message)
            else:
                completion = self._sized(self.client.complete(request, self.params))
                self.cache.put(key, completion)
        except TeacherError as exc:
            if self.client is not None:
                self.refusals[key] = (exc.code, exc.message)
                if exc.bound is not None:  # a reply refused for its size is cached as that refusal
                    self.cache.put(key, Completion.refused(exc.code, exc.message, exc.bound))
            return None, self._refused(turn, exc.code, exc.message)
        if completion.refusal is not None:
            return None, self._refused(turn, completion.refusal["code"], completion.refusal["message"])
        problem = check_text(completion.text, completion.finish_reason, max_chars=self.max_chars,
                             forbidden_tokens=self.options.forbidden_tokens)
        if problem is not None:
            return None, self._refused(turn, *problem)
        self.stats.add(filled=1)
        return completion.text.strip(), self._provenance(turn)

    def _sized(self, completion: Completion) -> Completion:
        """A text over the length bound becomes its refusal before it is cached: the cache never holds
        a runaway generation (the other checks depend on the run's tokenizer, and re-run on a cached text)."""
        problem = check_text(completion.text, completion.finish_reason, max_chars=self.max_chars)
        if problem is not None and problem[0] == "teacher_too_long":
            return Completion.refused(*problem, self.max_chars, completion.tokens)
        return completion

    def _still_refused(self, refusal: dict) -> bool:
        bound = {"teacher_too_long": self.max_chars, "teacher_reply_too_large": self.max_response_bytes}
        now = bound.get(refusal["code"])
        return now is None or now <= refusal["bound"]

    def _refused(self, turn: int, code: str, message: str) -> dict:
        return {**self._provenance(turn), "source": "none", "rejected": code, "message": message}


__all__ = ["Completion", "FillStats", "Teacher"]
