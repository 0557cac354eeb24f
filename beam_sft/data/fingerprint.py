"""Fingerprints: one digest of everything a prepared dataset depends on, and of nothing else.

The parts: the bytes of every input file, the code that decides the output (``results_code_digest``:
``prepare()`` and every beam_sft module it imports, as code, not prose), the chat template, the tokenizer (vocabulary, merges, added tokens and their
flags, special tokens), the libraries that render and tokenize, and every option that changes the
output. Not in it: where the output goes, how many processes run, batch sizes, verification.
Change any one part and the digest changes, so the cache misses and the data is encoded again.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import re
import types
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

# re-exported: their home is the leaf beam_sft.digests (dataset_folder/ and verify/ read them there)
from beam_sft.digests import TOKENIZER_FILES, file_digest


def digest_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_json(value: Any) -> str:
    """Digest of a JSON-able value, independent of dict order.

    >>> digest_json({"a": 1, "b": [2]}) == digest_json({"b": [2], "a": 1})
    True
    """
    return digest_bytes(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode())


def data_digest(path: str | Path) -> str:
    """Digest of a file's bytes, or of every file under a directory (names and bytes, sorted).

    A path that is neither (a ``datasets`` hub name) is digested by name only.
    """
    path = Path(path)
    if path.is_file():
        return file_digest(path)
    if path.is_dir():
        sha = hashlib.sha256()
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            sha.update(str(file.relative_to(path)).encode() + b"\0" + file_digest(file).encode())
        return sha.hexdigest()
    return digest_bytes(f"name:{path}".encode())


def files_digest(files: Iterable[Path]) -> str:
    """Digest of files (their names and bytes)."""
    sha = hashlib.sha256()
    for file in sorted(Path(f) for f in files):
        sha.update(file.name.encode() + b"\0" + file.read_bytes())
    return sha.hexdigest()


# The modules whose code decides a prepared folder: ``prepare()`` and everything it imports of
# beam_sft (reading, converting, mixing, encoding, verifying, the report), found by import.
RESULT_ENTRIES = ("beam_sft.prepare.pipeline",)


def _const_part(value: Any) -> Any:
    """A constant as the same value in every process. ``repr`` of a frozenset (what ``x in {"a", "b"}``
    compiles to) lists its members in hash order, and string hashes are salted per process
    (PYTHONHASHSEED): sorted here, or the code digest (and so every cache key) changes each run."""
    if isinstance(value, types.CodeType):
        return _code_parts(value)
    if isinstance(value, frozenset):
        return ["frozenset", sorted(json.dumps(_const_part(v), sort_keys=True) for v in value)]
    if isinstance(value, tuple):
        return ["tuple", [_const_part(v) for v in value]]
    return repr(value)


def _code_parts(code: types.CodeType) -> list:
    """What a code object computes, without where it sits (file name, line numbers)."""
    consts = [_const_part(c) for c in code.co_consts]
    return [code.co_name, code.co_code.hex(), consts, code.co_names, code.co_varnames, code.co_freevars,
            code.co_cellvars, code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags]


def module_code_digest(source: str) -> str:
    """Digest of a module's code, not its prose: its bytecode compiled without docstrings
    (``optimize=2``; comments never reach it) and without line numbers, so a reworded docstring or
    comment, or a line moved by one, is the same code. (That level drops ``assert`` statements too:
    none of beam_sft's decides an output.) Compiling is about twice as fast as ``ast.parse``."""
    return digest_json(_code_parts(compile(source, "<module>", "exec", dont_inherit=True, optimize=2)))


def _package_modules(package: str) -> dict[str, Path]:
    """Every module of ``package`` (a top-level package), by dotted name."""
    root = Path(importlib.import_module(package).__file__).parent
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


# ``import a.b, c`` and ``from .a import b, c`` (one statement per line, or a parenthesised list),
# at module level or inside functions.
_IMPORT = re.compile(r"^[ \t]*(?:import[ \t]+([\w., \t]+)|from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+"
                     r"(\([^)]*\)|[^\n#]+))", re.MULTILINE)


def _imported(name: str, path: Path, source: str, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that module ``name`` (at ``path``) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: list[str] = []
    for plain, base, names in _IMPORT.findall(source):
        if plain:
            targets += [part.split()[0] for part in plain.split(",") if part.strip()]
            continue
        level = len(base) - len(base.lstrip("."))
        base = base.lstrip(".")
        if level:
            anchor = package.split(".")[: len(package.split(".")) - level + 1]
            base = ".".join(anchor + ([base] if base else []))
        for alias in names.strip("()").replace("\\", " ").split(","):
            alias = alias.split()[0] if alias.split() else ""
            if alias:
                targets.append(f"{base}.{alias}" if f"{base}.{alias}" in known else base)
    out = set()
    for target in targets:
        while target and target not in known:  # ``pkg.mod.name`` -> the module ``pkg.mod``
            target = target.rpartition(".")[0]
        if target:
            parts = target.split(".")  # importing a submodule runs its packages' __init__ too
            out.update(p for p in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if p in known)
    return out


def code_closure(entries: Iterable[str], package: str) -> dict[str, str]:
    """``entries`` and every module of ``package`` they import, directly or not: name -> source."""
    known = _package_modules(package)
    found: dict[str, str] = {}
    todo = list(entries)
    while todo:
        name = todo.pop()
        if name in found or name not in known:
            continue
        source = found[name] = known[name].read_text(encoding="utf-8")
        todo.extend(_imported(name, known[name], source, known) - found.keys())
    return found


def closure_digest(entries: Iterable[str], package: str) -> str:
    """Digest of the code (``module_code_digest``) of ``code_closure(entries, package)``."""
    return digest_json({name: module_code_digest(source) for name, source in code_closure(entries, package).items()})


@functools.lru_cache(maxsize=1)
def results_code_digest() -> str:
    """Digest of the code that decides a prepared folder's content (``RESULT_ENTRIES``); a module
    no entry imports (training, the CLI) and any module's docstrings are not in it."""
    return closure_digest(RESULT_ENTRIES, "beam_sft")


def tokenizer_digest(tokenizer) -> str:
    """Digest of what decides token ids: the backend (model, normalizer, pre-tokenizer, added tokens
    with their flags) and the special tokens. The chat template is digested on its own.

    A tokenizer loaded from a local folder is digested by its files (fast: no re-serialising a
    200k vocabulary), plus what it holds in memory (a flag changed after loading counts too).
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    folder = Path(str(getattr(tokenizer, "name_or_path", "") or ""))
    files = [folder / name for name in TOKENIZER_FILES if (folder / name).is_file()] if folder.is_dir() else []
    if files:
        backend_digest = files_digest(files)
    else:
        backend_digest = digest_bytes(backend.to_str().encode()) if backend is not None else None
    parts = {
        "backend": backend_digest,
        "class": type(tokenizer).__name__,
        "added": {str(i): [t.content, t.special, t.lstrip, t.rstrip, t.normalized, t.single_word]
                  for i, t in sorted(tokenizer.added_tokens_decoder.items())},
        "special": dict(tokenizer.special_tokens_map),
    }
    return digest_json(parts)


def library_versions(names: Iterable[str] = ("transformers", "tokenizers", "jinja2", "datasets")) -> dict[str, str]:
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def combine(parts: Mapping[str, Any]) -> str:
    """The fingerprint: a digest of the named parts."""
    return digest_json(dict(parts))
