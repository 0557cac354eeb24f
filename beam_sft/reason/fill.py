"""A row -> the row with its missing reasoning written by the teacher, and where each turn's came from.

``Teacher`` is a ``fill`` for ``beam_sft.convert.pipeline`` (called between conversion and the
missing-reasoning policy). For each trained assistant turn:

- it has reasoning: provenance ``{"turn": i, "source": "data"}`` (a field or a reasoning part),
  ``"inline_tags"`` (``<think>`` blocks in the text) or ``"text_before_calls"``;
- it has none: the teacher is asked (or the cache answers); a text that passes ``checks``,
  ``consistency`` and, with a ``judge``, the judge's verdict becomes the turn's ``reasoning_content``
  with ``{"turn": i, "source": "teacher", "model", "endpoint_host", "prompt_digest", "cached",
  "answered_at"}`` (for a cached answer, the model and endpoint that gave it, from the cache entry;
  with a judge, ``"judge": {...}``); otherwise the turn stays without reasoning and gets ``{"turn": i, "source":
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
from datetime import datetime, timezone
from typing import Any

from beam_sft.convert.options import ConvertOptions
from beam_sft.convert.policy import apply_missing_reasoning
from beam_sft.convert.rows import BeamRow, has_reasoning
from beam_sft.convert.validate import validate
from beam_sft.harmony.spans import is_trained
from beam_sft.reason.cache import AnswerCache, cache_key
from beam_sft.reason.checks import DEFAULT_MAX_CHARS, check_text
from beam_sft.reason.client import Completion, TeacherClient, TeacherError
from beam_sft.reason.consistency import check_consistency
from beam_sft.reason.judge import Judge, Unparseable, parse_verdict
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
    verdicts: Counter = field(default_factory=Counter)  # --judge: yes, no, unparseable, failed (its request)
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

    def verdict(self, name: str) -> None:
        with self._lock:
            self.verdicts[name] += 1

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "asked": self.asked, "filled": self.filled, "cached": self.cached,
                "rejected": dict(sorted(self.rejected.items())), "sources": dict(sorted(self.sources.items())),
                "verdicts": dict(sorted(self.verdicts.items()))}


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
    judge: Judge | None = None  # --judge: each filled turn's reasoning is judged before it is kept

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
            if entry.get("rejected") and self.options.missing_reasoning in ("drop", "truncate"):
                # the row goes (drop) or ends before this turn (truncate): its later turns would be asked,
                # paid for and counted as filled, and then appear nowhere
                break
        return {**row, "messages": filled, "meta": {**meta, "reasoning": entries}}

    def _provenance(self, turn: int) -> dict[str, Any]:
        return {"turn": turn, "source": "teacher", "model": self.model, "endpoint_host": self.endpoint_host,
                "prompt_digest": self.prompt.digest}

    def _answer(self, key: str, request: list[dict], client: TeacherClient | None, params: dict,
                asker: tuple[str, str]) -> tuple[Completion, dict | None, bool]:
        """(the answer to ``request``, where it came from, whether the cache gave it); raises
        ``TeacherError``. ``asker``: (model, endpoint host) recorded with a fresh answer."""
        entry = self.cache.get_entry(key)
        if entry is not None and entry.completion.refusal is not None and not self._still_refused(entry.completion.refusal):
            entry = None  # refused for its size under a smaller bound than this run's: asked again
        if entry is None and client is None:
            code, message = self.refusals.get(key) or (
                "teacher_failed", "no cached answer for this turn (prepare asks before encoding)")
            raise TeacherError(code, message)
        if entry is None:
            try:
                with self.cache.claim(key):  # another run asking this turn now: wait for its answer
                    entry = self.cache.get_entry(key, again=True)
                    if entry is not None and entry.completion.refusal is not None \
                            and not self._still_refused(entry.completion.refusal):
                        entry = None
                    if entry is None:
                        completion = self._sized(client.complete(request, params))
                        origin = {"endpoint_host": asker[1], "model": asker[0],
                                  "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
                        self.cache.put(key, completion, origin)
                        return completion, origin, False
            except TeacherError as exc:
                self.refusals[key] = (exc.code, exc.message)
                if exc.bound is not None:  # a reply refused for its size is cached as that refusal
                    self.cache.put(key, Completion.refused(exc.code, exc.message, exc.bound), {
                        "endpoint_host": asker[1], "model": asker[0],
                        "at": datetime.now(timezone.utc).isoformat(timespec="seconds")})
                raise
        self.stats.add(cached=1)
        return entry.completion, entry.origin, True

    def _ask(self, messages: list[dict], turn: int, tools: list | None) -> tuple[str | None, dict]:
        self.stats.add(asked=1)
        request = self.prompt.messages(messages, turn, tools)
        key = cache_key(self.prompt.digest, self.model, request, self.params)
        try:
            completion, origin, cached = self._answer(key, request, self.client, self.params,
                                                      (self.model, self.endpoint_host))
        except TeacherError as exc:
            return None, self._refused(turn, exc.code, exc.message)
        if completion.refusal is not None:
            return None, self._refused(turn, completion.refusal["code"], completion.refusal["message"])
        problem = check_text(completion.text, completion.finish_reason, max_chars=self.max_chars,
                             forbidden_tokens=self.options.forbidden_tokens) \
            or check_consistency(completion.text, messages[turn], tools)
        if problem is not None:
            return None, self._refused(turn, *problem)
        text = completion.text.strip()
        # a cached answer names the server and model that gave it, not the ones this run talks to
        entry = {**self._provenance(turn), "cached": cached}
        if origin is not None:
            entry.update(model=origin["model"], endpoint_host=origin["endpoint_host"], answered_at=origin["at"])
        elif cached:
            entry.update(endpoint_host=None, answered_at=None)  # cached before origins were recorded
        if self.judge is not None:
            verdict = self._judge(messages, turn, tools, text)
            entry["judge"] = verdict
            if verdict.get("verdict") != "yes":
                return None, {**self._refused(turn, verdict.pop("rejected"), verdict.pop("message")),
                              "judge": verdict}
        self.stats.add(filled=1)
        return text, entry

    def _judge(self, messages: list[dict], turn: int, tools: list | None, text: str) -> dict[str, Any]:
        """The judge's verdict on ``text`` for ``messages[turn]``: ``{"model", "endpoint_host",
        "prompt_digest", "verdict", "reason", "cached"}``; a ``no`` or a failure also carries
        ``rejected`` and ``message`` (popped by the caller)."""
        judge = self.judge
        request = judge.messages(messages, turn, tools, text)
        key = cache_key(judge.prompt.digest, judge.model, request, judge.params)
        info: dict[str, Any] = {"model": judge.model, "endpoint_host": judge.endpoint_host,
                                "prompt_digest": judge.prompt.digest}
        try:
            completion, origin, cached = self._answer(key, request, judge.client, judge.params,
                                                      (judge.model, judge.endpoint_host))
        except TeacherError as exc:
            self.stats.verdict("failed")
            return {**info, "rejected": exc.code, "message": f"the judge's request: {exc.message}"}
        if origin is not None:
            info.update(model=origin["model"], endpoint_host=origin["endpoint_host"], answered_at=origin["at"])
        info["cached"] = cached
        if completion.refusal is not None:  # the judge's reply was refused for its size
            self.stats.verdict("failed")
            return {**info, "rejected": completion.refusal["code"],
                    "message": f"the judge's request: {completion.refusal['message']}"}
        try:
            verdict, reason = parse_verdict(completion.text, completion.finish_reason)
        except Unparseable as exc:
            self.stats.verdict("unparseable")
            return {**info, "rejected": "judge_failed", "message": f"the judge's reply is not a verdict: {exc}"}
        self.stats.verdict(verdict)
        info.update(verdict=verdict, reason=reason)
        if verdict == "no":
            return {**info, "rejected": "teacher_inconsistent",
                    "message": f"the judge ({info['model']}) says the reasoning does not lead to this turn: "
                               f"{reason[:200]}"}
        return info

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
