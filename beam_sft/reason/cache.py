"""Teacher answers on disk, keyed by content: a killed run resumes without asking again, a second
run asks nothing.

The key is the SHA-256 of the prompt's digest, the model, the request's messages (the row's context
and the turn, as the prompt renders them) and the generation parameters: change any of them and
the turn is asked again; the endpoint is not in the key (the same model served elsewhere answers
the same question). Each answer is one file, ``DIR/ab/abcdef....json``, written to a temporary
file in the same folder and renamed into place, so a run killed mid-write leaves either the whole
answer or none. Only completions are stored (a failure is asked again on the next run); what the
checks make of them is decided anew each run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from beam_sft.errors import BeamError, OutputUnwritable
from beam_sft.reason.client import Completion


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

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> Completion | None:
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            completion = Completion.from_json(data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a damaged entry (a disk full mid-write elsewhere): asked again, rewritten
        self.hits += 1
        return completion

    def put(self, key: str, completion: Completion) -> None:
        """Store one answer; a cache that cannot be written ends the run (``OutputUnwritable``): going
        on would spend requests whose answers a rerun would have to buy again."""
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        except OSError as exc:
            raise OutputUnwritable(self.dir, exc.strerror or str(exc)) from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(completion.to_json(), fh, ensure_ascii=False)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                raise OutputUnwritable(self.dir, exc.strerror or str(exc)) from None
            raise

