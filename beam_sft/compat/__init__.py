"""Every use of another library's internals (transformers, jinja2, accelerate, torch, datasets): one package, each
module with the audit of what it relies on, and one ``problems()`` over all of them, which
``beam-sft check-tokenizer`` prints.

- ``chat_template.py``: transformers' chat-template helpers, for the fast encoder and for verify;
- ``jinja_sandbox.py``: jinja2's sandbox and runtime, for the render memo and verify's attribute memo;
- ``accelerate_state.py``: accelerate's shared state, for CPU FSDP launches (``train/cpu_fsdp.py``);
- ``model_config.py``: a model config's attention implementation (``train/packing.py``);
- ``torch_distributed.py``: the process group's timeout (``train/ranks.py``);
- ``datasets_table.py``: whether a dataset's rows are its Arrow table's (``train/preflight.py``);
- ``datasets_files.py``: how ``load_dataset`` lists and types a local repository's files (``data/hub.py``);
- ``trainer_loop.py``: transformers' Trainer loop, stopped at ``max_steps`` on a resume (``train/trainer.py``).
- ``weight_conversion.py``: the layout ``save_pretrained`` writes (the load conversion reverted), for
  ``beam-sft export`` (``train/export.py``), and which models are converted on load (``train/lora_targets.py``).

A leaf: it imports nothing else of beam_sft, so the encoder and verify both use it and stay
independent of each other. Where an audit finds a problem its user takes the slow, public path and
says so once, loudly (``switched_off``), naming what it turned off and why.
"""

from __future__ import annotations

import hashlib
import inspect
import logging

from beam_sft.compat import (
    accelerate_state,
    chat_template,
    datasets_files,
    datasets_table,
    jinja_sandbox,
    model_config,
    torch_distributed,
    trainer_loop,
    weight_conversion,
)

logger = logging.getLogger("beam_sft.compat")
_SAID: set[tuple[str, tuple[str, ...]]] = set()


def switched_off(what: str, reasons: list[str]) -> None:
    """Log (a warning, once per process) that ``what`` runs its slow path because of ``reasons``."""
    key = (what, tuple(reasons))
    if reasons and key not in _SAID:
        _SAID.add(key)
        logger.warning("%s is off, its slow path runs instead: %s", what, "; ".join(reasons))


def library_code_digest() -> str:
    """Digest of the source of every library function the fast paths stand in for or call privately
    (the chat-template helpers, the sandbox functions the shortcuts mirror): part of the prepare
    fingerprint, so a patched library misses the cache even at the same version number."""
    module = chat_template._module()
    names = sorted({**chat_template.ENCODER_PRIVATE, **chat_template.ENCODER_PUBLIC, **chat_template.VERIFY_PRIVATE})
    sources = [_source(getattr(module, name, None)) for name in names]
    sources += [_source(func) for _, func in sorted(jinja_sandbox._audited_functions().items())]
    return hashlib.sha256("\0".join(sources).encode()).hexdigest()


def _source(func) -> str:
    try:
        return inspect.getsource(inspect.unwrap(func))
    except (OSError, TypeError):
        return repr(func)


def problems() -> dict[str, list[str]]:
    """Every audit here: the fast path (or adapter) -> what is missing or changed ([] when all hold)."""
    return {
        "fast encoder (beam_sft.encode.fast)": chat_template.encoder_problems(),
        "render shortcuts (encode/fast/render.py)": jinja_sandbox.shortcut_problems(),
        "verify's direct render (verify/template.py)": chat_template.verify_problems(),
        "verify's own compile (attribute memo, generation blocks)": chat_template.oracle_problems(),
        "CPU FSDP launches (train/cpu_fsdp.py)": accelerate_state.problems(),
        "packed attention masks (train/packing.py)": model_config.problems(),
        "the rank watch's training timeout (train/ranks.py)": torch_distributed.problems(),
        "the pre-flight's column reads (train/preflight.py)": datasets_table.problems(),
        "a local repository's files as load_dataset lists them (data/hub.py)": datasets_files.problems(),
        "a resume at max_steps trains nothing (train/trainer.py)": trainer_loop.problems(),
        "export's save_pretrained layout, LoRA's PEFT renames (train/export.py, lora_targets.py)":
            weight_conversion.problems(),
    }
