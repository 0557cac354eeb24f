"""Typed configs from YAML/dicts: dataclasses that reject unknown keys, naming the full key path.

One source of truth per config: a frozen dataclass gives the defaults and types, a YAML file
overrides them, and ``--section.key value`` pairs on the command line override the YAML.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import reprlib
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from beam_sft.errors import ConfigError

T = TypeVar("T")
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")

# Bounds on any config we read (recipes, prepare and convert configs, a model's config.json, a DeepSpeed
# JSON): a config is a page of settings, never data. The file's size is checked before it is read; the
# YAML's node count, as if every alias were written out, before any value is built, so an alias bomb
# (9 anchors each naming the one before 9 times: 9^10 values) costs one walk of its few nodes.
MAX_CONFIG_BYTES = 4 * 1024 * 1024
MAX_CONFIG_NODES = 1_000_000
_SHOWN_CHARS = 200  # a value echoed in an error is cut to this many characters


def shown(value: Any) -> str:
    """``repr(value)`` bounded in work and length, for an error message: a few items of each container,
    a few levels deep, at most ``_SHOWN_CHARS`` characters (a config value can be huge).

    >>> shown(list(range(10**6)))
    '[0, 1, 2, 3, 4, 5, ...]'
    >>> len(shown("x" * 10**6)) <= 200
    True
    """
    short = reprlib.Repr()  # attributes, not keywords: the keywords are Python 3.12's
    short.maxlevel = 3
    short.maxtuple = short.maxlist = short.maxarray = short.maxdict = short.maxset = short.maxfrozenset = 6
    short.maxdeque = 6
    short.maxstring = short.maxother = _SHOWN_CHARS
    short.maxlong = 60
    text = short.repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS - 3] + "..."


def read_config_text(path: str | Path, kind: str = "YAML text file") -> str:
    """A config file's text, refused (ConfigError, one line) past ``MAX_CONFIG_BYTES`` (checked before
    reading, and again on what is read: a file that grows, or a FIFO), unreadable or not UTF-8."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            raw = fh.read(MAX_CONFIG_BYTES + 1) if size <= MAX_CONFIG_BYTES else b""
    except OSError as exc:
        from beam_sft.dataset_folder.oserrors import describe

        raise ConfigError("", f"cannot read the config {describe(exc)}") from None
    if size > MAX_CONFIG_BYTES or len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError("", f"{path}: {max(size, len(raw)):,} bytes; a config file is at most "
                              f"{MAX_CONFIG_BYTES:,} bytes (config_utils.MAX_CONFIG_BYTES): it is settings, not data")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError("", f"{path}: not a {kind} (not UTF-8 at byte {exc.start})") from None
    if "\x00" in text:
        raise ConfigError("", f"{path}: not a {kind} (it holds NUL bytes)")
    return text


def load_json_config(path: str | Path) -> Any:
    """A JSON config file (a model's config.json, a DeepSpeed config), size-bounded like every config;
    a key given twice in one object is refused (JSON keeps the last silently), like a YAML config's."""
    import json

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ConfigError(key, f"given twice in one object of {path}; keep one")
            out[key] = value
        return out

    return json.loads(read_config_text(path, "JSON config"), object_pairs_hook=unique)


def from_dict(cls: type[T], data: Any, path: str = "") -> T:
    """Build dataclass ``cls`` from ``data``; unknown keys and wrong types raise ConfigError.

    >>> @dataclasses.dataclass(frozen=True)
    ... class Opt:
    ...     lr: float = 1e-3
    >>> from_dict(Opt, {"lr": 2})
    Opt(lr=2.0)
    >>> from_dict(Opt, {"lt": 2}, "sft")
    Traceback (most recent call last):
    ...
    beam_sft.errors.ConfigError: sft.lt: unknown key (known: lr)

    A value check in the dataclass's ``__post_init__`` raises ConfigError with its key; the key path
    of where the dataclass sits is put in front of it.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(path, f"expected a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    for key in data:
        if key not in fields:
            raise ConfigError(_join(path, str(key)), f"unknown key (known: {', '.join(sorted(fields))})")
    hints = typing.get_type_hints(cls)
    kwargs = {name: _coerce(hints[name], value, _join(path, name)) for name, value in data.items()}
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a required field is missing
        raise ConfigError(path, str(exc)) from exc
    except ConfigError as exc:  # a value check in __post_init__ names its key relative to cls
        if not path:
            raise
        message = str(exc)[len(exc.path) + 2:] if exc.path else str(exc)
        raise ConfigError(_join(path, exc.path) if exc.path else path, message) from exc


def require_path(value: str | None, key: str) -> str | None:
    """``value`` when it names something, for every config key that is a path: an empty one (``''``,
    blanks) is refused with its key, never read as ``Path('')``, the working folder, nor taken for
    "not given" and a default put in its place. Path-typed fields get it from ``_coerce``; a path
    kept as ``str`` (a path or a hub id) calls it in its ``__post_init__``.

    >>> require_path("", "data.prepared")
    Traceback (most recent call last):
    ...
    beam_sft.errors.ConfigError: data.prepared: an empty path (it would name the working folder): give a path, or leave the key out for its default
    """
    if isinstance(value, str) and not value.strip():
        raise ConfigError(key, "an empty path (it would name the working folder): give a path, or leave the key "
                               "out for its default")
    return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _coerce(tp: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        arms = [a for a in args if a is not type(None)]
        if len(arms) == 1:  # Optional[X]: X's own error names the deepest path
            return _coerce(arms[0], value, path)
        for arg in arms:
            try:
                return _coerce(arg, value, path)
            except ConfigError:
                continue
        raise ConfigError(path, f"{shown(value)} does not match {tp}")
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(path, f"{shown(value)} is not one of {', '.join(map(repr, args))}")
        return value
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, path)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(path, f"expected a list, got {type(value).__name__}")
        item = args[0] if args else Any
        items = [_coerce(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(path, f"expected a mapping, got {type(value).__name__}")
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(path, f"expected true/false, got {shown(value)}")
    if tp is float:
        value = yaml_number(value, float)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                number = float(value)
            except OverflowError:  # an int too large for a float
                number = math.inf
            if not math.isfinite(number):  # NaN, .inf, 1e400 (read as inf): never a setting
                raise ConfigError(path, f"expected a finite number, got {shown(value)}")
            return number
        raise ConfigError(path, f"expected a number, got {shown(value)}")
    if tp is int:
        value = yaml_number(value, int)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(path, f"expected an integer, got {shown(value)}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(path, f"expected a string, got {shown(value)}")
    if tp is Path:
        if isinstance(value, (str, Path)):
            return Path(require_path(str(value), path))
        raise ConfigError(path, f"expected a path, got {shown(value)}")
    return value


def yaml_number(value: Any, tp: Any = None) -> Any:
    """YAML 1.1 (PyYAML) reads ``1e-4`` as a string: read such a string as the number type ``tp``
    expects (``tp`` None: whichever number it spells). Anything else comes back as it was.

    >>> yaml_number("1e-4", float), yaml_number("8", int), yaml_number("8", None), yaml_number("nan", None)
    (0.0001, 8, 8, 'nan')
    >>> yaml_number("2024.10", str | None), yaml_number("1.5", int | float)
    ('2024.10', 1.5)
    """
    if not isinstance(value, str) or not _NUMBER.fullmatch(value.strip()):
        return value
    kinds = typing.get_args(tp) or ((tp,) if tp is not None else (int, float))
    if str in kinds:
        return value
    for kind in (int, float):
        if kind in kinds:
            try:
                return kind(value.strip())
            except ValueError:
                continue
    return value


def set_by_overrides(path: str, extra: dict[str, Any]) -> bool:
    """True when the key path ``path`` (``sft.foo``, ``data.prepare.sources[0].x``) lies in what the
    command-line overrides ``extra`` set: an error there is the flag's, not the config file's.

    >>> set_by_overrides("sft.seed", {"sft": {"seed": 1}}), set_by_overrides("sft.lr", {"sft": {"seed": 1}})
    (True, False)
    """
    node: Any = extra
    for part in re.split(r"\.|(?=\[)", path):
        if not part:
            continue
        if not isinstance(node, dict) or part not in node:
            return node is not extra and not isinstance(node, dict)  # below a value a flag set whole
        node = node[part]
    return node is not extra


def parse_overrides(pairs: list[str], value: Callable[[list[str], str], Any] | None = None) -> dict[str, Any]:
    """Turn ``["--sft.learning_rate", "1e-4", "--lora.r=8"]`` into a nested dict. ``value(key_parts,
    raw)`` reads each value (default: YAML, with "1e-4" read as the number people mean).

    >>> parse_overrides(["--sft.learning_rate", "1e-4", "--lora.r=8"])
    {'sft': {'learning_rate': 0.0001}, 'lora': {'r': 8}}
    """
    if value is None:
        def value(parts: list[str], raw: str) -> Any:
            return yaml_number(parse_yaml(raw, "--" + ".".join(parts)))

    out: dict[str, Any] = {}
    i = 0
    while i < len(pairs):
        token = pairs[i]
        if not token.startswith("--") or len(token) == 2:
            raise ConfigError("", f"expected --section.key, got {shown(token)}")
        if "=" in token:
            key, raw = token[2:].split("=", 1)
            i += 1
        else:
            if i + 1 >= len(pairs):
                raise ConfigError(token[2:], "missing value")
            key, raw = token[2:], pairs[i + 1]
            i += 2
        node = out
        parts = key.split(".")
        if not all(parts):  # "--.seed", "--sft..seed", "--sft.=1": no key to set (it read as a file's unknown key "")
            raise ConfigError("", f"expected --section.key, got {shown(token)} (an empty name in the key path)")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(key, "conflicts with an earlier override")
        if parts[-1] in node:  # two values for one key: which one was meant is not ours to guess
            raise ConfigError(key, "given twice on the command line")
        node[parts[-1]] = value(parts, raw)
    return out


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Recursively merge ``override`` into a copy of ``base``."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def load_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML config file as a mapping; every way it can be unfit is a ConfigError, one line: the file
    cannot be read or is not UTF-8 text, the YAML does not parse or holds a tag (``!!python/object``:
    never constructed), or a key is given twice (named by its key path: ``sft.learning_rate``)."""
    data = parse_yaml(read_config_text(path), path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("", f"{path}: top level must be a mapping")
    return data


def parse_yaml(text: str, where: str | Path, *, unique_keys: bool = True) -> Any:
    """YAML text as a value, with every bound a config has: tags are never constructed (safe loader),
    a key given twice is refused (``unique_keys``), and the document's size as if its aliases were
    written out is bounded (``MAX_CONFIG_NODES``) before anything is built. ``where`` names the text
    (a file, a flag) in the one-line ConfigError."""
    import yaml

    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError("", f"{where}: {len(text):,} characters; a config is at most {MAX_CONFIG_BYTES:,}")
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()  # nodes only: an alias is the same node object, not a copy
            if node is not None:
                _check_expansion(node, where)
                if unique_keys:
                    _check_unique_keys(node, where)
            return loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError("", f"{where}:{at}: not valid YAML for a config: {str(problem)[:_SHOWN_CHARS]}") from None
    except RecursionError:
        raise ConfigError("", f"{where}: nested too deeply") from None


def _check_expansion(root: Any, where: str | Path) -> None:
    """Refuse a YAML node graph whose expansion (every alias written out) holds more than
    ``MAX_CONFIG_NODES`` nodes, or that holds itself (a recursive alias): counted once per distinct node,
    bottom up, so the count of a bomb is a few multiplications, never its expansion."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            total = 1 + sum(size[id(c)] for c in _children(node))
            if total > MAX_CONFIG_NODES:
                line = node.start_mark.line + 1
                raise ConfigError("", f"{where}: line {line}: written out, its aliases make more than "
                                      f"{MAX_CONFIG_NODES:,} values (config_utils.MAX_CONFIG_NODES); a config "
                                      "has no need of that many (an alias bomb?)")
            size[key] = total
            continue
        if key in size:
            continue
        if key in on_path:
            raise ConfigError("", f"{where}: line {node.start_mark.line + 1}: an alias that holds itself "
                                  "(a recursive YAML value): never a config")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in size)


def _children(node: Any) -> list:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_unique_keys(node: Any, file: str | Path, path: str = "") -> None:
    """Refuse a mapping that gives one key twice (YAML would keep the last silently), naming its key path."""
    import yaml

    stack = [(node, path)]
    seen_nodes: set[int] = set()
    while stack:
        current, where = stack.pop()
        if id(current) in seen_nodes:  # an alias: checked once
            continue
        seen_nodes.add(id(current))
        if isinstance(current, yaml.MappingNode):
            keys: dict[str, int] = {}
            for key_node, value_node in current.value:
                key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else None
                if key is not None and key != "<<":
                    line = key_node.start_mark.line + 1
                    if key in keys:
                        raise ConfigError(_join(where, key), f"given twice in {file} (lines {keys[key]} and {line}); "
                                                             "keep one")
                    keys[key] = line
                stack.append((value_node, _join(where, key) if key is not None else where))
        elif isinstance(current, yaml.SequenceNode):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(current.value))
