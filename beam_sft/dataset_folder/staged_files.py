"""The output files of ``convert`` and ``reason`` (``-o``, ``--rejects``, ``--summary-json``), written as
``prepare`` writes its folder: one writer per output, staged beside it, published by rename once the
run has finished, an earlier output intact until then. A link given as an output is replaced as a
link, never written through into the file it points to.

``staged_files({"-o": path, "--rejects": path, ...})`` takes the lock of each output
(``beam_sft.dataset_folder.lock``: an ``flock`` the kernel releases when the holder dies, however it dies;
a second run on a held output is refused with one line naming the holder), and yields the staging
path of each, ``.NAME.partial-PID`` beside it. When the block ends normally every staged file is
synced and renamed over its output (``-o`` last, so a complete ``-o`` is never published beside an
older rejects file); when it raises, or the process is killed (``kill -9``), the staged files are
not published and the earlier outputs stay as they were. A staged file left by a dead process is
removed by the next run that takes the lock.

>>> import tempfile; d = Path(tempfile.mkdtemp())
>>> with staged_files({"-o": d / "out.jsonl"}) as staged:
...     _ = staged["-o"].write_text("row\\n")
...     (d / "out.jsonl").exists()
False
>>> (d / "out.jsonl").read_text(), sorted(p.name for p in d.iterdir())
('row\\n', ['out.jsonl'])
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

from beam_sft.dataset_folder.lock import output_lock, pid_alive
from beam_sft.dataset_folder.oserrors import unwritable

logger = logging.getLogger("beam_sft.dataset_folder")


def partial_path(final: Path) -> Path:
    return final.parent / f".{final.name}.partial-{os.getpid()}"


def _remove_dead_partials(final: Path) -> None:
    """Staged files of ``final`` whose writer is gone (a killed run): named by our convention, plain
    files, their pid dead. Called with the lock held, so no live writer can be staging them."""
    pattern = re.compile(re.escape(f".{final.name}.partial-") + r"(\d+)\Z")
    try:
        names = os.listdir(final.parent)
    except OSError:
        return
    for name in names:
        match = pattern.match(name)
        if not match or int(match.group(1)) == os.getpid() or pid_alive(int(match.group(1))):
            continue
        path = final.parent / name
        if path.is_file() and not path.is_symlink():
            with contextlib.suppress(OSError):
                path.unlink()
                logger.info("removed %s, left by process %s, which is gone", path, match.group(1))


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def staged_files(outputs: dict[str, str | os.PathLike | None]) -> Iterator[dict[str, Path]]:
    """Lock, stage and publish the outputs that are given (``None``: not written); see the module."""
    finals = {label: Path(path) for label, path in outputs.items() if path is not None}
    with contextlib.ExitStack() as stack:
        for final in finals.values():
            try:
                final.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise unwritable(final.parent, exc) from exc
            stack.enter_context(output_lock(final))
            _remove_dead_partials(final)
        staged = {label: partial_path(final) for label, final in finals.items()}
        try:
            yield staged
            for label in sorted(staged, key=lambda name: name == "-o"):  # -o last: see the module
                _publish(staged[label], finals[label])
        finally:
            for path in staged.values():
                with contextlib.suppress(OSError):
                    path.unlink()


def _publish(staged: Path, final: Path) -> None:
    try:
        if not staged.exists():  # the run wrote nothing there: an empty file, as before
            staged.touch()
        _sync(staged)
        os.replace(staged, final)
    except OSError as exc:
        raise unwritable(final.parent, exc) from exc


@contextlib.contextmanager
def staged_folder(final: Path, what: str = "staging") -> Iterator[Path]:
    """A new folder to write a whole output into (``merge``'s, ``export``'s), published when the block
    ends without an error, else removed (it holds only what the block wrote): a failure (a load that
    fails after the first shards were written, a full disk, Ctrl-C) leaves no half-written folder that
    would block a retry. ``final`` is new or empty (the caller checked).

    A new ``final``: staged beside it, with the mode a folder made now gets (``mkdtemp`` makes 0700,
    which would hide a model from the other users of a cluster), and renamed into place. An existing
    empty ``final`` (``-o .``, a mount point, a folder with the user's mode or ACLs) is the user's and
    stays: staged inside it, and its entries moved up one by one when complete."""
    import shutil
    import tempfile

    final = Path(final)
    existing = final.is_dir()
    if existing:
        staging = Path(tempfile.mkdtemp(prefix=f".{what}-", dir=final))
    else:
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.{what}-", dir=final.parent))
        os.chmod(staging, 0o777 & ~_umask())
    try:
        yield staging
        if existing:
            for entry in sorted(staging.iterdir()):
                os.replace(entry, final / entry.name)
            staging.rmdir()
        else:
            os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _umask() -> int:
    mask = os.umask(0o022)  # (read by setting: the only way; set back at once)
    os.umask(mask)
    return mask
