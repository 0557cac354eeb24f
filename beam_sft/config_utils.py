"""Typed configs from YAML/dicts: dataclasses that reject unknown keys, naming the full key path.

One source of truth per config: a frozen dataclass gives the defaults and types, a YAML file
overrides them, and ``--section.key value`` pairs on the command line override the YAML.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from beam_sft.errors import ConfigError

T = TypeVar("T")
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


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
        raise ConfigError(path, f"{value!r} does not match {tp}")
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(path, f"{value!r} is not one of {', '.join(map(repr, args))}")
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
        raise ConfigError(path, f"expected true/false, got {value!r}")
    if tp is float:
        value = yaml_number(value, float)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                number = float(value)
            except OverflowError:  # an int too large for a float
                number = math.inf
            if not math.isfinite(number):  # NaN, .inf, 1e400 (read as inf): never a setting
                raise ConfigError(path, f"expected a finite number, got {value!r}")
            return number
        raise ConfigError(path, f"expected a number, got {value!r}")
    if tp is int:
        value = yaml_number(value, int)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(path, f"expected an integer, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(path, f"expected a string, got {value!r}")
    if tp is Path:
        if isinstance(value, (str, Path)):
            return Path(value)
        raise ConfigError(path, f"expected a path, got {value!r}")
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


def parse_overrides(pairs: list[str], value: Callable[[list[str], str], Any] | None = None) -> dict[str, Any]:
    """Turn ``["--sft.learning_rate", "1e-4", "--lora.r=8"]`` into a nested dict. ``value(key_parts,
    raw)`` reads each value (default: YAML, with "1e-4" read as the number people mean).

    >>> parse_overrides(["--sft.learning_rate", "1e-4", "--lora.r=8"])
    {'sft': {'learning_rate': 0.0001}, 'lora': {'r': 8}}
    """
    if value is None:
        import yaml

        def value(parts: list[str], raw: str) -> Any:
            return yaml_number(yaml.safe_load(raw))

    out: dict[str, Any] = {}
    i = 0
    while i < len(pairs):
        token = pairs[i]
        if not token.startswith("--") or len(token) == 2:
            raise ConfigError("", f"expected --section.key, got {token!r}")
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
    import yaml

    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        from beam_sft.prepared.oserrors import describe

        raise ConfigError("", f"cannot read the config {describe(exc)}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError("", f"{path}: not a YAML text file (not UTF-8 at byte {exc.start})") from None
    if "\x00" in text:
        raise ConfigError("", f"{path}: not a YAML text file (it holds NUL bytes)")
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is not None:
                _check_unique_keys(node, path)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError("", f"{path}:{where}: not valid YAML for a config: {problem}") from None
    except RecursionError:
        raise ConfigError("", f"{path}: nested too deeply") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("", f"{path}: top level must be a mapping")
    return data


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
