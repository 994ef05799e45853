"""Reading a cache folder: :class:`CachedImages` (read-only memory maps, checked on open)
and :func:`open_cache`.

The folder layout is described in :mod:`olas_utils.similarity.imagecache.folder`, the
manifest in :mod:`olas_utils.similarity.imagecache.manifest`.

Importing this module does no work.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np

from olas_utils.similarity.imagecache.folder import (
    FORMAT_VERSION,
    LENGTHS,
    MANIFEST,
    PLAN,
    PROGRESS,
    key_filename,
    read_json,
    verify_files,
)

__all__ = ["CachedImages", "open_cache"]


class CachedImages:
    """A cache folder written by :func:`~olas_utils.similarity.imagecache.extract_to_cache`
    (read-only view).

    Opening a complete cache checks every array against the size and SHA-256 recorded when
    it was completed (:func:`~olas_utils.similarity.imagecache.verify_files`); a missing,
    truncated, zeroed or otherwise changed array, or a damaged JSON file, raises
    :class:`~olas_utils.similarity.imagecache.CacheCorruptError` naming the file.

    Attributes:
        root: the folder.
        manifest: the parsed ``manifest.json``.
        keys: names of the stored maps (``"ola:1"``, ``"rollout"``, ``"layer:-1"``, ...).
        n_chunks: number of chunks (rows).
        image_size: S.
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        mpath = self.root / MANIFEST
        if not mpath.is_file():
            raise FileNotFoundError(f"{self.root} is not an OLAS image cache (no {MANIFEST})")
        self.manifest: dict = read_json(mpath)
        if self.manifest.get("format") != FORMAT_VERSION:
            raise ValueError(
                f"{self.root}: cache format {self.manifest.get('format')!r}, this OLAS reads {FORMAT_VERSION}"
            )
        self.keys: list[str] = list(self.manifest["keys"])
        self.n_chunks: int = int(self.manifest["n_chunks"])
        self.image_size: int = int(self.manifest["image_size"])
        self.verify()

    def array_shapes(self) -> dict[str, tuple[int, ...]]:
        """``{file name: shape}`` of the cache's arrays (one per key, and the lengths)."""
        shapes = {key_filename(k): (self.n_chunks, self.image_size, self.image_size) for k in self.keys}
        return {**shapes, LENGTHS: (self.n_chunks,)}

    def verify(self) -> None:
        """Check the arrays: a complete cache against the sizes and SHA-256 recorded at
        completion (older caches without them: the shapes), an incomplete one's shapes.

        Raises:
            CacheCorruptError: naming the damaged file.
        """
        p = self.progress
        files = p.get("files") if p.get("complete") else None
        verify_files(self.root, files, None if files else self.array_shapes())

    def __repr__(self) -> str:
        p = self.progress
        return (
            f"CachedImages({str(self.root)!r}, model={self.manifest['model']!r}, protocol="
            f"{self.manifest['protocol']!r}, keys={self.keys}, {p['chunks_done']}/{self.n_chunks} chunks)"
        )

    @property
    def progress(self) -> dict:
        """The parsed ``progress.json`` (read afresh)."""
        return read_json(self.root / PROGRESS)

    @property
    def complete(self) -> bool:
        """Whether every batch is committed."""
        return bool(self.progress["complete"])

    @property
    def plan(self) -> list[list[int]]:
        """The batches (chunk indices) in processing order."""
        return read_json(self.root / PLAN)

    @property
    def done(self) -> np.ndarray:
        """``(n_chunks,)`` bool: rows whose batch is committed."""
        out = np.zeros(self.n_chunks, dtype=bool)
        for batch in self.plan[: int(self.progress["batches_done"])]:
            out[batch] = True
        return out

    def _check_ready(self, allow_partial: bool) -> None:
        if not allow_partial and not self.complete:
            p = self.progress
            raise RuntimeError(
                f"{self.root} is incomplete ({p['chunks_done']}/{self.n_chunks} chunks): run "
                f"extract_to_cache again to finish it, or pass allow_partial=True (rows not done are 0; see .done)"
            )

    def images(self, key: str, *, allow_partial: bool = False) -> np.memmap:
        """``(n_chunks, S, S)`` float32 read-only memory map of one key's images.

        Raises:
            KeyError: unknown key (the message lists the stored ones).
            RuntimeError: the cache is incomplete and ``allow_partial`` is False.
        """
        if key not in self.keys:
            raise KeyError(f"{key!r} is not in this cache; stored keys: {self.keys}")
        self._check_ready(allow_partial)
        return np.load(self.root / key_filename(key), mmap_mode="r")

    def stack(self, keys: Sequence[str] | None = None, *, allow_partial: bool = False) -> np.ndarray:
        """``(n_chunks, C, S, S)`` float32 array (in memory) of the given keys (default all)."""
        keys = list(self.keys if keys is None else keys)
        return np.stack([np.asarray(self.images(k, allow_partial=allow_partial)) for k in keys], axis=1)

    def lengths(self) -> np.ndarray:
        """``(n_chunks,)`` int32: side of each map before resizing (tokens or words; 0 if not done)."""
        return np.load(self.root / LENGTHS, mmap_mode="r")


def open_cache(root: str | os.PathLike) -> CachedImages:
    """Open an existing cache folder for reading (no settings needed).

    Raises:
        FileNotFoundError: the folder has no ``manifest.json``.
    """
    return CachedImages(root)
