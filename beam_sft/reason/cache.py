"""Teacher answers on disk, keyed by content: a killed run resumes without asking again, a second
run asks nothing.

The key is the SHA-256 of the prompt's digest, the model, the request's messages (the row's context
and the turn, as the prompt renders them) and the generation parameters: change any of them and
the turn is asked again; the endpoint is not in the key (the same model served elsewhere answers
the same question). Each answer is one file, ``DIR/ab/abcdef....json``, written to a temporary
file in the same folder and renamed into place, so a run killed mid-write leaves either the whole
answer or none. Only completions are stored (a failure is asked again on the next run); what the
checks make of them is decided anew each run.

An entry is ``{"text": str, "finish_reason": str | null, "tokens": int >= 0, "origin": {"endpoint_host":
str, "model": str, "at": ISO time}}``: where and when the answer was given, so a cached answer's
provenance names the server that gave it, not the one this run talks to. An entry of another shape
(a ``text`` that is not a string, ``tokens`` that are not a non-negative integer, a key missing or
unknown, a duplicate key, a non-JSON number: an edited or damaged file) is a miss: the turn is asked
again and the entry rewritten, never kept as whatever ``str()`` makes of it. An entry written before
origins were recorded (the first three keys only) is read, its origin ``None`` (unrecorded).

A reply refused for its size (``teacher_reply_too_large``, ``teacher_too_long``) is stored as that
refusal, ``"refusal": {"code": str, "message": str, "bound": int}`` with an empty text, never its body:
the cache stays small whatever a server sends, and a rerun under a larger bound asks again.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beam_sft.data.jsontext import loads
from beam_sft.errors import BeamError, OutputUnwritable
from beam_sft.reason.client import Completion

_KEYS = {"text", "finish_reason", "tokens"}
_ORIGIN_KEYS = {"endpoint_host", "model", "at"}


@dataclass(frozen=True)
class Cached:
    completion: Completion
    origin: dict[str, str] | None  # endpoint_host, model, at; None: an entry from before origins were kept


def parse_entry(data: Any) -> Cached | None:
    """A cache entry of the shape the module docstring gives, or ``None`` (a miss).

    >>> parse_entry({"text": "t", "finish_reason": "stop", "tokens": 3}).completion.text
    't'
    >>> [parse_entry(d) for d in ({"text": ["a"], "finish_reason": None, "tokens": 1},
    ...     {"text": "t", "finish_reason": None, "tokens": -1}, {"text": "t", "finish_reason": None, "tokens": True},
    ...     {"text": "t", "finish_reason": None, "tokens": 1, "extra": 1}, {"text": "t", "tokens": 1})]
    [None, None, None, None, None]
    """
    if not isinstance(data, dict) or not _KEYS <= set(data) <= _KEYS | {"origin", "refusal"}:
        return None
    text, finish, tokens = data["text"], data["finish_reason"], data["tokens"]
    if not isinstance(text, str) or not (finish is None or isinstance(finish, str)):
        return None
    try:
        text.encode("utf-8")  # a lone surrogate (a "\\ud800" escape written in by hand): no row can hold it
    except UnicodeEncodeError:
        return None
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        return None
    origin = data.get("origin")
    if "origin" in data and not (isinstance(origin, dict) and set(origin) == _ORIGIN_KEYS
                                 and all(isinstance(v, str) for v in origin.values())):
        return None
    refusal = data.get("refusal")
    if "refusal" in data and not (isinstance(refusal, dict) and set(refusal) == {"code", "message", "bound"}
                                  and isinstance(refusal["code"], str) and isinstance(refusal["message"], str)
                                  and isinstance(refusal["bound"], int) and not isinstance(refusal["bound"], bool)):
        return None
    return Cached(Completion(text, finish, tokens, refusal), origin)


def cache_key(prompt_digest: str, model: str, messages: list[dict], params: dict[str, Any]) -> str:
    """
    >>> a = cache_key("sha256:x", "m", [{"role": "user", "content": "hi"}], {"max_tokens": 8})
    >>> a == cache_key("sha256:x", "m", [{"role": "user", "content": "hi"}], {"max_tokens": 9})
    False
    """
    blob = json.dumps({"prompt": prompt_digest, "model": model, "messages": messages, "params": params},
                      ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class AnswerCache:
    def __init__(self, directory: str | Path):
        self.dir = Path(directory)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BeamError(f"cache folder {self.dir}: cannot be created ({exc.strerror or exc})") from None
        self.hits = 0
        self.damaged = 0  # entries of the wrong shape, read as misses
        self._lock = threading.Lock()

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get_entry(self, key: str, *, again: bool = False) -> Cached | None:
        """The answer stored under ``key`` with its origin; ``None`` when there is none or it is damaged.
        ``again``: a second look at a key just read (under its claim), not counted twice."""
        try:
            entry = parse_entry(loads(self._path(key).read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):  # unreadable, not UTF-8, not JSON under the one JSON rule
            entry = None
        if again:
            return entry
        with self._lock:
            if entry is None:
                self.damaged += 1  # asked again, rewritten
            else:
                self.hits += 1
        return entry

    def get(self, key: str) -> Completion | None:
        entry = self.get_entry(key)
        return entry.completion if entry is not None else None

    @contextlib.contextmanager
    def claim(self, key: str) -> Iterator[None]:
        """Hold the right to ask ``key``: a second run (or thread) asking the same turn waits here
        until the first has stored its answer, then reads it, so two runs on one cache never both
        pay for a turn. An ``flock`` on ``ab/.KEY.lock``: the kernel releases it when its holder
        dies, however it dies; polled, so a wait stays interruptible."""
        path = self._path(key).with_name(f".{key}.lock")
        while True:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise BeamError(f"cache folder {self.dir}: {path} is a symbolic link, not a lock; "
                                    "move it away") from None
                raise OutputUnwritable(self.dir, exc.strerror or str(exc)) from None
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        time.sleep(0.05)
                if os.fstat(fd).st_ino == os.stat(path).st_ino:
                    break  # the lock file we hold is still the one at the path
            except FileNotFoundError:
                pass  # its holder removed it as it let go: take the next one
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                path.unlink()
            os.close(fd)

    def put(self, key: str, completion: Completion, origin: dict[str, str] | None = None) -> None:
        """Store one answer (and where it came from); a cache that cannot be written ends the run
        (``OutputUnwritable``): going on would spend requests whose answers a rerun would have to buy again."""
        path = self._path(key)
        record = completion.to_json()
        if origin is not None:
            record["origin"] = origin
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        except OSError as exc:
            raise OutputUnwritable(self.dir, exc.strerror or str(exc)) from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(record, fh, ensure_ascii=False)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                raise OutputUnwritable(self.dir, exc.strerror or str(exc)) from None
            raise

