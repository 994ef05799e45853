"""Atomic file writes: a reader (or a resumed run) sees the old file or the new one, never
half of one; a failed write leaves nothing behind and names the path."""

from __future__ import annotations

import os
from pathlib import Path

import torch

__all__ = ["save_atomic"]


def save_atomic(obj, path: Path, *, what: str = "training checkpoint") -> None:
    """``torch.save`` to a temporary file beside ``path``, then rename: a reader never sees
    a half-written file, and a failed save leaves no temporary file behind.

    Args:
        obj: what to save.
        path: the final file.
        what: how the error message calls the file.

    Raises:
        OSError: the folder or file cannot be written; the message names ``path``.
    """
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise type(e)(e.errno, f"could not write the {what} {path}: {e.strerror or e}") from e
        raise
