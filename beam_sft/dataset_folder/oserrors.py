"""OSErrors that mean "this folder cannot be written", said as such (naming it) instead of a traceback."""

from __future__ import annotations

import errno
from pathlib import Path

from beam_sft.errors import OutputUnwritable

UNWRITABLE = {errno.EACCES: "permission denied", errno.EPERM: "permission denied",
              errno.EROFS: "the file system is read-only", errno.ENOSPC: "no space left on the device",
              errno.EDQUOT: "disk quota exceeded", errno.ENOTDIR: "a part of the path is a file, not a folder",
              errno.EISDIR: "a folder is where a file goes", errno.EEXIST: "a file is in the way",
              errno.ENAMETOOLONG: "a name in the path is too long", errno.ELOOP: "too many symbolic links",
              errno.EFBIG: "the file is too large for the file system"}


def unwritable(folder: Path, exc: OSError) -> OSError | OutputUnwritable:
    """The OSError as an OutputUnwritable naming ``folder`` when it means the folder cannot be
    written; other errors come back as they are.

    >>> import errno
    >>> str(unwritable(Path("out"), OSError(errno.ENOSPC, "No space left", "out/x.arrow")))
    'cannot write to out: no space left on the device (out/x.arrow)'
    """
    reason = UNWRITABLE.get(exc.errno)
    return OutputUnwritable(folder, f"{reason} ({exc.filename or folder})") if reason else exc


def describe(exc: OSError) -> str:
    """One line for any OSError: the path(s) it names and what went wrong, in words.

    >>> import errno
    >>> describe(IsADirectoryError(errno.EISDIR, "Is a directory", "out"))
    'out: a folder is where a file goes'
    >>> describe(OSError("We couldn't connect.\\nCheck your internet connection."))
    "We couldn't connect. Check your internet connection."
    """
    reason = UNWRITABLE.get(exc.errno) or exc.strerror or str(exc) or type(exc).__name__
    reason = " ".join(str(reason).split())  # a library's message over several lines, as one
    where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
    return f"{where}: {reason}" if where else reason
