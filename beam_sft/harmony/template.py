"""Access to the chat template that ships with beam-sft (``chat_template.jinja`` beside this file)."""

from __future__ import annotations

from importlib import resources

# Keys the template call itself uses (``apply_chat_template``'s own parameters): a per-row
# chat_template_kwargs entry by one of these names would collide with them. The one copy:
# convert's validation (``bad_template_kwargs``) and the encoder both read it from here.
RESERVED_TEMPLATE_KWARGS = frozenset(
    {"messages", "conversation", "tools", "documents", "chat_template", "add_generation_prompt",
     "continue_final_message", "tokenize", "return_dict", "return_assistant_tokens_mask", "padding",
     "truncation", "max_length", "return_tensors", "tokenizer_kwargs", "sanitize_control_tokens"}
)


def load_chat_template() -> str:
    """Return the text of beam-sft's own Beam Harmony chat template."""
    return resources.files("beam_sft.harmony").joinpath("chat_template.jinja").read_text(encoding="utf-8")
