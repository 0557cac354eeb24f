"""OSErrors that mean "this folder cannot be written", said as such (naming it) instead of a traceback."""

from __future__ import annotations

import errno
from pathlib import Path

from beam_sft.errors import OutputUnwritable

UNWRITABLE = {errno.EACCES: "permission denied", errno.EPERM: "permission denied",
              errno.EROFS: "the file system is read-only", errno.ENOSPC: "no space left on the device",
              errno.EDQUOT: "disk quota exceeded"}


def unwritable(folder: Path, exc: OSError) -> OSError | OutputUnwritable:
    """The OSError as an OutputUnwritable naming ``folder`` when it means the folder cannot be
    written; other errors come back as they are.

    >>> import errno
    >>> str(unwritable(Path("out"), OSError(errno.ENOSPC, "No space left", "out/x.arrow")))
    'cannot write to out: no space left on the device (out/x.arrow)'
    """
    reason = UNWRITABLE.get(exc.errno)
    return OutputUnwritable(folder, f"{reason} ({exc.filename or folder})") if reason else exc
