"""Atomic writes: a crash leaves either the old file or the new one, never half of one."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path

from evals.errors import UserError

# what a full or read-only location raises when written to
WRITE_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT)


def write_json_atomic(path: Path, data: dict, *, sort_keys: bool = True) -> None:
    """Write-then-rename, so a crash leaves either the old file or the new one, never half.
    `sort_keys=False` keeps the dict's order (e.g. schema_version first)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=2, sort_keys=sort_keys, default=str) + "\n"
    write_text_atomic(path, text)


def write_text_atomic(path: Path, text: str) -> None:
    """Write-then-rename of a text file; the temporary file never outlives a failure."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def writable_dir(path: Path, what: str) -> Path:
    """`path` once a file could be written and removed there (or, where `path` does not
    exist yet, in its nearest existing parent, so nothing is left behind); else a one-line
    UserError naming `what` (e.g. "--reports"), the path and the system's reason."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(existing))
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".evals-write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot write there ({exc.strerror or exc}); name a "
                        "writable directory, or free space there.") from None
    return path
