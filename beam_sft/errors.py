"""Typed exceptions. Each names where the problem is (source, row) and which rule it broke."""

from __future__ import annotations


class BeamError(Exception):
    """Base class: every error beam-sft raises on purpose derives from it."""


class ConfigError(BeamError):
    """A config or recipe is invalid; ``path`` is the dotted key path (``sft.learning_rate``)."""

    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class RowError(BeamError):
    """A data row breaks a rule. ``code`` is the stable reason code written to rejects.jsonl."""

    def __init__(self, code: str, message: str, *, source: str | None = None, row: int | None = None):
        self.code = code
        self.detail = message
        self.source = source
        self.row = row
        where = f"{source}:{row}: " if source is not None else ""
        super().__init__(f"{where}[{code}] {message}")


class TokenizerError(BeamError):
    """The tokenizer is unfit for Beam Harmony; ``problems`` lists every rule it breaks."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("tokenizer is unfit for Beam Harmony:\n  - " + "\n  - ".join(self.problems))


class VerificationError(BeamError):
    """A prepared dataset breaks a mask invariant."""


class PreflightError(BeamError):
    """Training refused to start: the pre-flight found a problem."""


class OutputRefused(BeamError):
    """The output target is not ours to replace: a file, a link, or a folder holding the user's files."""

    def __init__(self, target, reason: str):
        self.target = target
        super().__init__(f"refusing to write to {target}: {reason}. Give an empty or new folder, "
                         f"or a folder an earlier prepare wrote (with nothing else in it)")


class PreparedError(BeamError):
    """A prepared folder breaks its contract (``beam_sft.prepared``): missing, incomplete, changed
    since it was written, or not verified. ``path`` is the folder or file at fault."""

    def __init__(self, path, message: str):
        self.path = path
        super().__init__(f"{path}: {message}")


class OutputLocked(BeamError):
    """Another live process holds the output folder's lock."""


class OutputUnwritable(BeamError):
    """The output folder cannot be written (read-only, no permission, or no space left)."""

    def __init__(self, target, reason: str):
        self.target = target
        super().__init__(f"cannot write to {target}: {reason}")


class NothingKept(BeamError):
    """Every input row was rejected (or mixed out): there is nothing to prepare. The message holds
    the per-source table of reasons."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived; ``signum`` says which (the command exits 128 + signum)."""

    def __init__(self, signum: int):
        import signal

        self.signum = signum
        super().__init__(signal.Signals(signum).name)
