"""Access to the chat template that ships with beam-sft (``chat_template.jinja`` beside this file)."""

from __future__ import annotations

from importlib import resources


def load_chat_template() -> str:
    """Return the text of beam-sft's own Beam Harmony chat template."""
    return resources.files("beam_sft.harmony").joinpath("chat_template.jinja").read_text(encoding="utf-8")
