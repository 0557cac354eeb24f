"""The one guard every writing command calls before it opens anything for writing: no output is,
contains or lies inside one of the command's inputs, and no two outputs are one file.

Paths are compared as the file system sees them, not as they are spelled: each existing path is
identified by ``(st_dev, st_ino)`` after following symbolic links, so a symlink, a hard link, ``..``,
a trailing slash or another case (on a case-insensitive file system) of an input is that input. A
path that does not exist yet is placed by its nearest existing ancestor (resolved the same way), so
``new/../x.jsonl`` and a not-yet-made folder inside an input are caught too.

``place`` is that identity for any caller (``sources.read_twice``: no file is read by two sources),
so the project has one notion of "the same file" and of "inside".

``check_paths(inputs, outputs)`` raises OutputRefused with one line naming both sides; ``check_writable_target``
refuses an output that cannot be one (a folder where a file is written, a path under a file) with the
same one line, before a write turns it into a traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from beam_sft.errors import BeamError, ConfigError, OutputRefused

Named = Mapping[str, "str | os.PathLike | Iterable[str | os.PathLike] | None"]


def _identity(path: str | os.PathLike) -> tuple[int, int] | None:
    """(st_dev, st_ino) of what ``path`` names, following links; None when nothing is there."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):  # missing, a dangling link, a NUL in the name, too long
        return None
    return st.st_dev, st.st_ino


@dataclass(frozen=True)
class Place:
    """Where a path lies on disk: ``real`` (absolute, links followed, ``..`` applied after them, as the
    kernel does), ``identity`` (of what is there; None when nothing is), whether that is a folder, and
    ``above``: the identities of every existing folder above it, nearest first."""

    real: Path
    identity: tuple[int, int] | None
    folder: bool
    above: tuple[tuple[int, int], ...]


def place(path: str | os.PathLike, folders: dict[Path, tuple[int, int] | None] | None = None) -> Place | None:
    """``path``'s ``Place``, or None for a name no file can have (a NUL). ``folders`` caches the folders'
    identities across calls: a listing of many files in few folders stats each folder once, where
    deciding "inside" pair by pair would stat every pair.
    """
    try:
        real = _real(path)
    except (OSError, ValueError):  # a NUL in the name
        return None
    try:
        st = os.stat(real)
    except OSError:  # missing, a dangling link: placed by the folders above it
        st = None
    above = []
    for parent in real.parents:
        if folders is not None and parent in folders:
            ident = folders[parent]
        else:
            ident = _identity(parent)
            if folders is not None:
                folders[parent] = ident
        if ident is not None and ident not in above:
            above.append(ident)
    return Place(real, (st.st_dev, st.st_ino) if st is not None else None,
                 st is not None and stat.S_ISDIR(st.st_mode), tuple(above))


def _chain(path: str | os.PathLike) -> list[tuple[int, int]]:
    """The identities of ``path`` (when it exists) and of every existing folder above it, nearest first."""
    where = place(path)
    if where is None:
        return []
    own = [where.identity] if where.identity is not None else []
    return own + [ident for ident in where.above if ident != where.identity]


def relation(output: str | os.PathLike, other: str | os.PathLike) -> str | None:
    """How ``output`` and ``other`` overlap on disk: "is", "lies inside", "contains", or None.

    >>> relation("/tmp", "/tmp/"), relation("/tmp/x/y", "/tmp"), relation("/tmp", "/tmp/x"), relation("/tmp", "/usr")
    ('is', 'lies inside', 'contains', None)
    """
    out_ident, other_ident = _identity(output), _identity(other)
    if out_ident is not None and out_ident == other_ident:
        return "is"
    if _same_spelling(output, other):
        return "is"  # neither exists yet: two outputs spelled alike (through links, .., slashes)
    if other_ident is not None and other_ident in _chain(output)[(1 if out_ident is not None else 0):]:
        return "lies inside"
    if out_ident is not None and out_ident in _chain(other)[1:]:
        return "contains"
    # ``other`` does not exist yet (an output not made so far) but would be made inside ``output``
    if other_ident is None and _inside_spelling(other, output):
        return "contains"
    if out_ident is None and _inside_spelling(output, other):
        return "lies inside"
    return None


def _real(path: str | os.PathLike) -> Path:
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def _same_spelling(a, b) -> bool:
    try:
        return _real(a) == _real(b)
    except (OSError, ValueError):
        return False


def _inside_spelling(inner, outer) -> bool:
    try:
        inner, outer = _real(inner), _real(outer)
    except (OSError, ValueError):
        return False
    return inner != outer and outer in inner.parents


def _flatten(named: Named) -> list[tuple[str, str]]:
    out = []
    for label, value in named.items():
        if value is None:
            continue
        values = [value] if isinstance(value, (str, os.PathLike)) else list(value)
        out.extend((label, os.fspath(v)) for v in values if v is not None and os.fspath(v) != "")
    return out


def check_paths(inputs: Named, outputs: Named) -> None:
    """Refuse (OutputRefused, one line) any output that is, contains or lies inside an input, and any
    two outputs that are, contain or lie inside one another. ``inputs`` and ``outputs`` map a label
    (the flag or key that gave the path: ``-o``, ``model.path``) to a path, a list of paths or None.

    Called before anything is opened for writing, so a refusal changes nothing.
    """
    # An input that does not exist is not a local path (a hub id) or fails on its own when read.
    ins = [(label, p) for label, p in _flatten(inputs) if _identity(p) is not None]
    outs = _flatten(outputs)
    for label, path in outs:
        _check_name(path, label)
    for out_label, out in outs:
        for in_label, inp in ins:
            how = relation(out, inp)
            if how is not None:
                raise OutputRefused(out, f"the output ({out_label}) {how} the input {inp} ({in_label}); "
                                         "writing it would destroy what is read", hint=False)
    for i, (a_label, a) in enumerate(outs):
        for b_label, b in outs[i + 1:]:
            how = relation(a, b)
            if how is not None:
                raise OutputRefused(a, f"the output ({a_label}) {how} the output {b} ({b_label}); "
                                       "two outputs must be different files", hint=False)


def _check_name(path, label: str) -> None:
    if "\x00" in os.fspath(path):
        raise OutputRefused(repr(os.fspath(path)), f"{label} holds a NUL byte, which no file name can", hint=False)


def check_writable_target(path: str | os.PathLike, *, kind: str, label: str) -> None:
    """Refuse, with one line, an output ``path`` that cannot be written as a ``kind`` ("file" or
    "folder"): a folder where a file goes (or the reverse), or a path under an existing file.
    """
    _check_name(path, label)
    if kind == "file" and os.fspath(path).endswith(("/", os.sep)):
        raise OutputRefused(path, f"{label} ends with a slash, which names a folder; give a file name", hint=False)
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        st = None  # a part of the path is a file: named below
    except OSError as exc:
        raise OutputRefused(path, f"{label}: {exc.strerror}", hint=False) from None
    if st is not None:
        if kind == "file" and stat.S_ISDIR(st.st_mode):
            raise OutputRefused(path, f"{label} is a folder; give a file name", hint=False)
        if kind == "folder" and not stat.S_ISDIR(st.st_mode):
            raise OutputRefused(path, f"{label} is a file, not a folder", hint=False)
        return
    for parent in _real(path).parents:
        try:
            pst = os.stat(parent)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return
        if not stat.S_ISDIR(pst.st_mode):
            raise OutputRefused(path, f"{label} lies under {parent}, which is a file, not a folder", hint=False)
        return


def check_new_or_empty_folder(path: str | os.PathLike, *, label: str) -> None:
    """Refuse an output folder that holds anything (its files are the user's until proven otherwise),
    is a link, or cannot be a folder (``check_writable_target``)."""
    path = Path(path)
    if path.is_symlink():
        raise OutputRefused(path, f"{label} is a symbolic link; give a new or empty folder", hint=False)
    check_writable_target(path, kind="folder", label=label)
    try:
        holds = path.is_dir() and any(path.iterdir())
    except OSError as exc:
        raise OutputRefused(path, f"{label}: {exc.strerror}", hint=False) from None
    if holds:
        raise OutputRefused(path, f"{label} is not empty; give a new or empty folder", hint=False)


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")


def check_local_or_hub_id(value: str | os.PathLike, key: str) -> None:
    """Refuse (ConfigError naming ``key``) a model or tokenizer that is neither an existing local path
    nor spelled like a hub id (``NAME`` or ``ORG/NAME``): said here, in one line, instead of the hub
    client's "Repo id must be in the form ..." from deep inside ``from_pretrained``.

    >>> check_local_or_hub_id("openai/gpt-oss-20b", "model.path")
    >>> check_local_or_hub_id("/no/such/model", "model.path")
    Traceback (most recent call last):
    ...
    beam_sft.errors.ConfigError: model.path: /no/such/model does not exist (and is not a hub id ORG/NAME)
    """

    text = os.fspath(value)
    if os.path.lexists(text):
        return
    if _HUB_ID.fullmatch(text) and "--" not in text and ".." not in text and not text.endswith((".", "-")):
        head = text.split("/", 1)[0]
        if "/" in text and os.path.isdir(head):  # `out/fixtur`: a typo of a local path, not a hub id to query
            raise ConfigError(key, f"{text} does not exist ({head}/ is a local folder, so this is a path in it, "
                                   "not a hub id)")
        return
    raise ConfigError(key, f"{text} does not exist (and is not a hub id ORG/NAME)")


# ---------------------------------------------------------------------------- every command declares its outputs

# The key under which a subcommand's parser records its declaration (``set_defaults``): ``cli.main``
# refuses to run a command without one, and tests/test_output_guard.py enumerates the parser so that a
# new subcommand cannot be added without saying what it writes.
DECLARATION = "output_declaration"


@dataclass(frozen=True)
class Outputs:
    """What one run of a command reads and writes, by label (the flag or key that gave the path):
    ``files`` and ``folders`` are written, ``inputs`` only read. ``cli.main`` checks them before the
    command runs (``check_paths``, then ``check_writable_target`` for each output)."""

    inputs: Named = field(default_factory=dict)
    files: Named = field(default_factory=dict)
    folders: Named = field(default_factory=dict)
    # files among ``files`` at a path the user did not give (a default beside another output), each
    # with the test of a file a run of ours wrote there: only such a file, or nothing, is replaced
    defaulted: dict[str, Callable[[Path], bool]] = field(default_factory=dict)


@dataclass(frozen=True)
class Declaration:
    kind: str  # "writes", "nothing" (writes no file) or "own" (rewrites only files of ours, said in ``why``)
    outputs: Callable[[argparse.Namespace], Outputs] | None = None
    why: str = ""


def writes(parser: argparse.ArgumentParser, outputs: Callable[[argparse.Namespace], Outputs]) -> None:
    """Declare a writing command: ``outputs(args)`` names its inputs and outputs, checked by the guard
    before the command runs. The one line a new writing command adds after ``add_parser``."""
    parser.set_defaults(**{DECLARATION: Declaration("writes", outputs)})


def writes_nothing(parser: argparse.ArgumentParser, why: str) -> None:
    """Declare a command that writes no file (it prints); tests prove it on a real run."""
    parser.set_defaults(**{DECLARATION: Declaration("nothing", why=why)})


def rewrites_own_files(parser: argparse.ArgumentParser, why: str) -> None:
    """Declare a command that only rewrites files a beam-sft command wrote (``verify``: its sections of a
    prepared folder's report); ``why`` names them."""
    parser.set_defaults(**{DECLARATION: Declaration("own", why=why)})


def guard_command(args: argparse.Namespace) -> None:
    """What ``cli.main`` runs before every command: its declared outputs through the guard. A command
    that declares nothing is not run (a programming error, named in one line)."""
    declaration = getattr(args, DECLARATION, None)
    if not isinstance(declaration, Declaration):

        raise BeamError(f"the command {args.command} declares no outputs (beam_sft.paths.writes); not run")
    if declaration.kind == "writes":
        check_outputs(declaration.outputs(args))


def check_outputs(spec: Outputs) -> None:
    """``check_paths`` over a command's ``Outputs``, then ``check_writable_target`` for each output."""
    check_paths(spec.inputs, {**spec.files, **spec.folders})
    for kind, named in (("folder", spec.folders), ("file", spec.files)):
        for label, path in _flatten(named):
            check_writable_target(path, kind=kind, label=label)
    for label, ours in spec.defaulted.items():
        path = spec.files.get(label)
        if path is not None:
            check_default_output(path, label=label, ours=ours)


def check_default_output(path: str | os.PathLike, *, label: str, ours: Callable[[Path], bool]) -> None:
    """An output the user did not name is written where nothing is, or over a file ``ours`` says a run
    of ours wrote (a rerun of the same command); anything else there is the user's, and naming the
    path (``label PATH``) is what says to replace it."""
    path = Path(path)
    if not os.path.lexists(path) or ours(path):
        return
    raise OutputRefused(path, f"it is the default of {label}, which was not given, and it holds something a "
                              f"beam-sft run did not write; give {label} {path} to replace it, or another path",
                        hint=False)
