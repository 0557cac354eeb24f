"""Typed exceptions. Each names where the problem is (source, row) and which rule it broke."""

from __future__ import annotations

import signal
from typing import Any

from beam_sft.reject_codes import REASONS
from beam_sft.visible import cut, visible

# A rejection message quotes values bounded (``visible.quoted``); one longer than this was built from an
# unbounded text somewhere all the same (a library's error, a new message): kept to its start, as one
# 5 MB line in rejects.jsonl, the terminal and the report is no message. (Cut below it: a message
# built again from a cut one, unpickled or placed, is not cut twice.)
MESSAGE_CHARS = 2000


class BeamError(Exception):
    """Base class: every error beam-sft raises on purpose derives from it.

    Each one pickles to itself (``__reduce__`` where ``__init__`` takes other arguments than its
    message): a Ray task's or a worker process's error reaches the driver as the same type and
    message, not as Ray's "failed to deserialize exception".

    An error is one line where it is shown (``beam_sft.cli``): a newline in a name it quotes is shown
    ``\\n``, so a file named ``a\\nbeam-sft prepare: done`` cannot add a line that reads as ours. Only an
    error whose lines are its own (``multiline``: built by ``of_lines``, each line shown on one line
    as it was made) keeps them.
    """

    multiline = False

    @classmethod
    def of_lines(cls, *lines: str) -> BeamError:
        """An error of several lines (a head, then a list), each line's data shown ``visible`` on one line.

        >>> e = BeamError.of_lines("pre-flight failed:", "  - a\\nb.jsonl: empty")
        >>> str(e), e.multiline
        ('pre-flight failed:\\n  - a\\\\nb.jsonl: empty', True)
        """
        error = cls("\n".join(visible(line, newlines=False) for line in lines))
        error.multiline = True  # (an instance attribute: pickles with the error)
        return error


def _rebuild(cls, args: tuple, kwargs: dict):
    return cls(*args, **kwargs)


class ConfigError(BeamError):
    """A config or recipe is invalid; ``path`` is the dotted key path (``sft.learning_rate``)."""

    def __init__(self, path: str, message: str, *, file: str | None = None):
        self.path = path
        self.message = message
        self.file = file
        said = f"{path}: {message}" if path else message
        super().__init__(f"{file}: {said}" if file else said)

    def __reduce__(self):
        return _rebuild, (type(self), (self.path, self.message), {"file": self.file})

    def in_file(self, file) -> ConfigError:
        """The same error naming the config file it was read from (once: an inner file's name stays).

        >>> str(ConfigError("sources[0].weight", "must be >= 0").in_file("prep.yaml"))
        'prep.yaml: sources[0].weight: must be >= 0'
        """
        return self if self.file or file is None else ConfigError(self.path, self.message, file=str(file))


class Rejection(BeamError):
    """Why a row is not kept: the one type for it in every stage (convert, validate, encode, verify).

    It is a value (converters return it, ``rejects.jsonl`` stores ``to_json()``) and an exception
    (raised inside a reader or an encoder to abandon the row; the caller catches it and records
    it). ``code`` must be in the one table, ``beam_sft.reject_codes.REASONS``.

    >>> r = Rejection("missing_reasoning", "messages[2] has no reasoning")
    >>> r.at(source="a.jsonl", row=3, raw={"x": 1}).to_json()["row"]
    3
    >>> Rejection("no_such_code", "x")
    Traceback (most recent call last):
    ...
    ValueError: unknown reason code 'no_such_code' (add it to beam_sft/reject_codes.py)
    """

    def __init__(self, code: str, message: str, raw: Any = None, *, source: str | None = None,
                 row: int | None = None):
        if code not in REASONS:
            raise ValueError(f"unknown reason code {code!r} (add it to beam_sft/reject_codes.py)")
        self.code = code
        self.message = message if len(message) <= MESSAGE_CHARS else cut(message, MESSAGE_CHARS - 100)
        self.raw = raw
        self.source = source
        self.row = row
        where = f"{source}:{row}: " if source is not None else ""
        super().__init__(f"{where}[{code}] {message}")

    @property
    def detail(self) -> str:
        return self.message

    @property
    def stage(self) -> str:
        return REASONS[self.code].stage

    def at(self, *, source: str | None, row: int | None, raw: Any) -> Rejection:
        """The same rejection, placed: source, row index and the raw row."""
        return Rejection(self.code, self.message, raw, source=source, row=row)

    def to_json(self) -> dict[str, Any]:
        """The rejects.jsonl record: source, row index, reason code, message and the raw row."""
        return {"source": self.source, "row": self.row, "code": self.code, "message": self.message,
                "raw": self.raw}

    def _key(self) -> tuple:
        return (self.code, self.message, repr(self.raw), self.source, self.row)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rejection) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Rejection({self.code!r}, {self.message!r}, source={self.source!r}, row={self.row!r})"

    def __reduce__(self):  # pickles across worker processes with its keyword fields
        return (_rebuild_rejection, (self.code, self.message, self.raw, self.source, self.row))


def _rebuild_rejection(code, message, raw, source, row) -> Rejection:
    return Rejection(code, message, raw, source=source, row=row)


class TokenizerError(BeamError):
    """The tokenizer is unfit for Beam Harmony; ``problems`` lists every rule it breaks."""

    multiline = True

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("tokenizer is unfit for Beam Harmony:" + "".join(
            f"\n  - {visible(p, newlines=False)}" for p in self.problems))

    def __reduce__(self):
        return _rebuild, (type(self), (self.problems,), {})


class VerificationError(BeamError):
    """A prepared dataset breaks a mask invariant."""


class PreflightError(BeamError):
    """Training refused to start: the pre-flight found a problem."""


class OutputRefused(BeamError):
    """The output target is not ours to replace: a file, a link, or a folder holding the user's files."""

    def __init__(self, target, reason: str, *, hint: bool = True):
        self.target = target
        self.reason = reason
        self.hint = hint
        tail = (". Give an empty or new folder, or a folder an earlier prepare wrote (with nothing else in it)"
                if hint else "")
        super().__init__(f"refusing to write to {target}: {reason}{tail}")

    def __reduce__(self):
        return _rebuild, (type(self), (self.target, self.reason), {"hint": self.hint})


class PreparedError(BeamError):
    """A prepared folder breaks its contract (``beam_sft.dataset_folder``): missing, incomplete, changed
    since it was written, or not verified. ``path`` is the folder or file at fault."""

    def __init__(self, path, message: str):
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")

    def __reduce__(self):
        return _rebuild, (type(self), (self.path, self.message), {})


class OutputLocked(BeamError):
    """Another live process holds the output folder's lock."""


class OutputUnwritable(BeamError):
    """The output folder cannot be written (read-only, no permission, or no space left)."""

    def __init__(self, target, reason: str):
        self.target = target
        self.reason = reason
        super().__init__(f"cannot write to {target}: {reason}")

    def __reduce__(self):
        return _rebuild, (type(self), (self.target, self.reason), {})


class RunStopped(BeamError):
    """Going on could only fail the same way for every row (the teacher refused the API key, or knows
    no such endpoint or model): the run ends at once, said in one line, and publishes nothing."""


class NothingKept(BeamError):
    """Every input row was rejected (or mixed out): there is nothing to prepare. The message holds
    the per-source table of reasons (``data.rejects.sources_table``: each cell shown on one line)."""

    multiline = True


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived; ``signum`` says which (the command exits 128 + signum)."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    def __reduce__(self):
        return _rebuild, (type(self), (self.signum,), {})
