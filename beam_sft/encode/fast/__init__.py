"""The fast path: the same output as ``apply_chat_template``, a few times faster, proven at start-up.

Everything that makes ``prepare`` faster than one template call per row lives here, fenced off from
the reference encoder (``beam_sft.encode.template_encode``) that defines correct output:

- ``encoder.py`` (``FastEncoder``): render once, split the text at the added tokens (every Harmony
  marker is one), tokenize each distinct piece once, and derive the mask from whole pieces (the
  module docstring proves why that equals transformers' offset rule).
- ``render.py`` (``FastRenderer``): transformers' own compiled template on a private copy whose
  Jinja environment remembers pure macro calls (tool declarations render once per distinct tool).
- ``words.py`` (``WordTokenizer``): byte-level BPE words tokenized once per distinct word.
- ``probe.py``: the start-up probe comparing the fast encoder with the template on awkward rows and
  the run's first rows; any difference and the run uses the template encoder.

The transformers and jinja2 internals it uses are fenced in ``beam_sft.compat`` (``chat_template``,
``jinja_sandbox``): their audit names any that an upgrade changed, and the run then falls back, slow
but right, with a warning saying why.

Nothing outside this package depends on it except ``beam_sft.encode.select``, which decides.
"""

from beam_sft.encode.fast.encoder import FastEncoder, piece_mask, unsupported_reasons

__all__ = ["FastEncoder", "piece_mask", "unsupported_reasons"]
