"""Which transformers a checkpoint's architecture needs, said before anything fails inside it.

Beam's model code (``transformers.models.beam``: ``BeamConfig``, ``BeamForCausalLM``) first shipped
in transformers 5.21.0; 5.20 has no ``models/beam/`` and ``AutoConfig`` there fails with an
"unrecognized model type" that does not say what to install. The install line names the range
pyproject pins (:data:`TESTED`), not the first release: the recipe is tested on one minor, and a
later one changed Beam's tensor-parallel plan (5.25 dropped the experts from it). ``check-tokenizer``, ``plan`` and the
train pre-flight ask :func:`missing_support` first and print its one line instead.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from beam_sft.errors import BeamError

# model_type -> (the first transformers release that ships it, the module that holds its code)
FIRST_RELEASE = {"beam": ("5.21.0", "transformers.models.beam")}
# pyproject's transformers requirement (a test holds the two equal)
TESTED = "transformers>=5.24,<5.25"


def _installed_transformers() -> str:
    try:
        from importlib.metadata import version

        return version("transformers")
    except Exception:  # noqa: BLE001 (not installed, or a broken install: the message says unknown)
        return "unknown"


def missing_support(model_type: str | None) -> str | None:
    """One line saying which transformers ``model_type`` needs, when the installed one lacks its
    code; None when it is there (or the type is not one this table knows)."""
    entry = FIRST_RELEASE.get(model_type) if isinstance(model_type, str) else None
    if entry is None:
        return None
    first, module = entry
    try:
        present = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is missing, or a module set to None
        present = False
    if present:
        return None
    return (f"a {model_type!r} checkpoint needs transformers>={first} ({module} first shipped in {first}); "
            f"installed: transformers {_installed_transformers()}; install the tested release with: "
            f"pip install '{TESTED}'")


def model_type_at(path) -> str | None:
    """The ``model_type`` of a local checkpoint folder or ``config.json``; None for a hub id, a
    folder without a config, or a config that does not read (the callers report those themselves)."""
    try:
        candidate = Path(path)
        config = candidate / "config.json" if candidate.is_dir() else candidate
        data = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else None
    except (OSError, ValueError, TypeError, RecursionError):  # not ours to report: the caller reads it again
        return None
    return data.get("model_type") if isinstance(data, dict) and isinstance(data.get("model_type"), str) else None


def require_support(path) -> None:
    """Raise BeamError (one line) when the checkpoint at ``path`` needs a newer transformers."""
    problem = missing_support(model_type_at(path))
    if problem:
        raise BeamError(f"{path}: {problem}")
