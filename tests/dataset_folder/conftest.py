"""The prepared-folder contract's tests share the encode tests' fixtures (tokenizers, small data files)."""

from tests.encode.conftest import (  # noqa: F401 (pytest fixtures)
    realistic_tokenizer,
    realistic_tokenizer_dir,
    reference_tokenizer_dir,
    tokenizer_dir,
)
