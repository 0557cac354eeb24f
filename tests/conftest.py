"""Shared test fixtures: the locally built checkpoint and the optional reference template."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BEAM_SHARED_DIR", REPO_ROOT.parent / "shared"))


def pytest_configure(config) -> None:
    """Tests that press Ctrl-C on a child (reason, prepare) need it to arrive as a terminal sends it. A
    shell without job control starts background commands with SIGINT ignored (``make test &``), every
    child inherits that across exec, and a Python started so never installs its KeyboardInterrupt
    handler: those tests then waited out their timeouts (stop 45's clean-clone failures). A handler, unlike
    an ignored disposition, is reset to the default by exec, so children start as from a terminal."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def reference_template_path() -> Path | None:
    """The checkpoint's official template: $BEAM_REFERENCE_TEMPLATE, else ../shared/reference."""
    env = os.environ.get("BEAM_REFERENCE_TEMPLATE")
    path = Path(env) if env else SHARED / "reference" / "chat_template.jinja"
    return path if path.is_file() else None


def corpus_dir() -> Path | None:
    path = SHARED / "corpus"
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def reference_template() -> str:
    path = reference_template_path()
    if path is None:
        pytest.skip("reference chat template not found: set BEAM_REFERENCE_TEMPLATE or provide ../shared/reference")
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def shared_corpus() -> Path:
    path = corpus_dir()
    if path is None:
        pytest.skip("shared corpus not found: provide ../shared/corpus (or BEAM_SHARED_DIR)")
    return path


@pytest.fixture(scope="session")
def fixture_dir(tmp_path_factory) -> Path:
    """The fixture checkpoint (tokenizer + tiny model), built once per session."""
    from beam_sft.harmony.fixture import build_fixture

    return build_fixture(tmp_path_factory.mktemp("fixture"))


@pytest.fixture(scope="session")
def tokenizer(fixture_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(fixture_dir)


@pytest.fixture(scope="session")
def reference_tokenizer(fixture_dir, reference_template):
    """The fixture tokenizer with the reference template swapped in (for differential tests)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(fixture_dir)
    tok.chat_template = reference_template
    return tok
