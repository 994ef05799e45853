"""Training checkpoints written and read back checked: each records the SHA-256 of its content,
and one read back must be of this run (its key) and hold what was written (its hash).

A checkpoint of another run is refused (:class:`CheckpointMismatchError`); a damaged one (its
content differs from the hash it recorded) or one without a hash (written before OLAS recorded
them) is set aside as ``<name>.bad`` with a warning, and the run is trained again from the start:
never resumed as good. Used by :func:`olas_utils.toa.train.train_model` and, to tell a finished
run from one to train, by :mod:`olas_utils.toa.parallel`.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import torch

from olas_utils.infra.atomic import save_atomic
from olas_utils.infra.fingerprint import sha256_tree

__all__ = ["CHECKPOINT_HASH", "CheckpointMismatchError", "checkpoint_intact", "read_checkpoint", "write_checkpoint"]

#: Key under which a training checkpoint records the SHA-256 of the rest of its content
#: (:func:`olas_utils.infra.fingerprint.sha256_tree`).
CHECKPOINT_HASH = "content_sha256"


class CheckpointMismatchError(ValueError):
    """A checkpoint exists at the path but was written for other settings or data."""


def checkpoint_intact(state) -> bool:
    """Whether a loaded training checkpoint holds what was written: its recorded
    :data:`CHECKPOINT_HASH` equals the SHA-256 of the rest of its content (False for a damaged
    checkpoint, one without a recorded hash, or anything that is not a checkpoint dict)."""
    if not isinstance(state, dict) or not isinstance(state.get(CHECKPOINT_HASH), str):
        return False
    try:
        actual = sha256_tree({k: v for k, v in state.items() if k != CHECKPOINT_HASH})
    except Exception:  # noqa: BLE001 - content that cannot even be hashed is damaged
        return False
    return actual == state[CHECKPOINT_HASH]


def write_checkpoint(content: dict, path: str | os.PathLike) -> Path:
    """Write ``content`` with its :data:`CHECKPOINT_HASH` to ``path`` atomically.

    Raises:
        OSError: the file cannot be written (names the path; a full disk says so).
    """
    return save_atomic({**content, CHECKPOINT_HASH: sha256_tree(content)}, path, what="training checkpoint")


def read_checkpoint(path: str | os.PathLike, key: str) -> dict | None:
    """The checkpoint at ``path`` if it is of the run ``key`` and intact; None if there is none,
    or if it was damaged or records no hash (then set aside as ``<name>.bad``, with a warning).

    Raises:
        CheckpointMismatchError: the file cannot be read as a checkpoint, or was written for
            another run (its key differs): delete it or choose another path.
    """
    path = Path(path)
    if not path.exists():
        return None
    try:
        state = torch.load(path, weights_only=False, map_location="cpu")
    except Exception as e:  # noqa: BLE001 - a truncated file is reported, not reused
        raise CheckpointMismatchError(f"{path} is not a readable checkpoint ({e}); delete it to start over") from e
    if not isinstance(state, dict) or state.get("key") != key:
        raise CheckpointMismatchError(
            f"{path} was written for another training run (other data, settings or model size); "
            "delete it or pass another checkpoint path"
        )
    if checkpoint_intact(state):
        return state
    why = (
        "records no content hash (written before OLAS recorded checkpoint hashes), so it cannot be checked"
        if CHECKPOINT_HASH not in state
        else "is damaged: its content differs from the SHA-256 it recorded when written"
    )
    bad = path.with_name(path.name + ".bad")
    try:
        os.replace(path, bad)
        where = f"set aside as {bad}"
    except OSError as e:
        where = f"could not be set aside ({e.strerror or e}); it will be overwritten"
    warnings.warn(
        f"training checkpoint {path} {why}: it is not resumed; {where}, and the run is trained again from the start",
        UserWarning,
        stacklevel=3,
    )
    return None
