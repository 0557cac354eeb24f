"""Helpers of the output-safety tests: a digest of everything under a folder, and the one-line check."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def tree_digest(root: Path) -> dict[str, str]:
    """Relative path -> what is there (a file's SHA-256 and mode, a link's target, "dir"), every entry at
    any depth, hidden ones included: equal before and after means nothing of the user's changed."""
    root = Path(root)
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = "link:" + os.readlink(path)
            elif path.is_dir():
                out[rel] = "dir"
            else:
                st = path.stat()
                out[rel] = f"{hashlib.sha256(path.read_bytes()).hexdigest()}:{st.st_mode:o}:{st.st_ino}"
    return out


def assert_one_line_error(err: str, command: str, *needles: str) -> None:
    """``err`` (stderr) holds no traceback and exactly one error line, ``beam-sft COMMAND: error: ...``,
    holding each needle (progress and log lines of a run that got that far may come before it)."""
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith(f"beam-sft {command}: error: ")]
    assert len(errors) == 1, err
    for needle in needles:
        assert needle in errors[0], (needle, err)


def run_cli(argv: list[str]) -> tuple[int, str]:
    """``beam-sft ARGV`` in this process: (exit code, stderr); stdout is dropped."""
    import contextlib
    import io

    from beam_sft.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


def chdir(path: Path):
    """A context manager: the working directory is ``path`` inside it (hypothesis tests cannot take
    pytest's function-scoped ``monkeypatch``)."""
    import contextlib

    @contextlib.contextmanager
    def inside():
        previous = os.getcwd()
        os.chdir(path)
        try:
            yield path
        finally:
            os.chdir(previous)

    return inside()
