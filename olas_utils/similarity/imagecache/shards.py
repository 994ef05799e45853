"""Shards of a multi-process extraction: each process's folder and their deterministic merge.

A process given ``shard=(index, count)`` computes the batches ``b`` of the full plan with
``b % count == index`` into ``<root>.shard-III-of-NNN`` (:func:`shard_root`;
:func:`olas_utils.similarity.imagecache.extract_to_cache`); :func:`merge_shards` assembles
the cache, equal bit for bit to a single-process run; :func:`parse_shard_root` reads a
shard folder's name back.

Importing this module does no work.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import numpy as np

from olas_utils.infra.fingerprint import sha256_json
from olas_utils.similarity.imagecache.folder import (
    LENGTHS,
    MANIFEST,
    PROGRESS,
    file_checksums,
    init_folder,
    io_errors,
    key_filename,
    locked,
    read_json,
    write_json,
)
from olas_utils.similarity.imagecache.manifest import CacheMismatchError, manifest_diff
from olas_utils.similarity.imagecache.read import CachedImages

__all__ = ["shard_root", "parse_shard_root", "merge_shards"]


_SHARD_RE = re.compile(r"^(?P<name>.+)\.shard-(?P<index>\d{3})-of-(?P<count>\d{3})$")


def shard_root(root: str | os.PathLike, index: int, count: int) -> Path:
    """Folder of shard ``index`` of ``count`` of the cache at ``root``:
    ``<root>.shard-III-of-NNN`` (beside the final cache, never inside it)."""
    root = Path(root)
    return root.with_name(f"{root.name}.shard-{index:03d}-of-{count:03d}")


def parse_shard_root(path: str | os.PathLike) -> tuple[Path, int, int]:
    """``(root, index, count)`` of a shard folder ``<root>.shard-III-of-NNN`` (the inverse of
    :func:`shard_root`).

    Raises:
        ValueError: the folder name is not a shard's.
    """
    m = _SHARD_RE.match(Path(path).name)
    if m is None:
        raise ValueError(f"{path} is not a shard folder (<root>.shard-III-of-NNN)")
    return Path(path).with_name(m["name"]), int(m["index"]), int(m["count"])


def merge_shards(any_shard_root: str | os.PathLike, *, remove_shards: bool = False) -> CachedImages:
    """Assemble the cache from its complete shards (deterministic: row ``i`` comes from the
    shard that computed chunk ``i``, and the batches are those of a single-process run, so
    the merged arrays equal a single-process run's bit for bit).

    Args:
        any_shard_root: the folder of any shard (``<root>.shard-III-of-NNN``).
        remove_shards: delete the shard folders after a successful merge.

    Returns:
        The merged :class:`CachedImages` at ``<root>``.

    Raises:
        ValueError: if the folder name is not a shard's, or the shards' settings differ.
        RuntimeError: if a shard is missing or incomplete (naming it).
        CacheMismatchError: if ``<root>`` holds a cache with other settings.
    """
    import shutil

    root, _, count = parse_shard_root(any_shard_root)
    shards = [
        CachedImages(shard_root(root, i, count)) if (shard_root(root, i, count) / MANIFEST).is_file() else None
        for i in range(count)
    ]
    for i, sh in enumerate(shards):
        if sh is None or not sh.complete:
            raise RuntimeError(
                f"shard {i} of {count} ({shard_root(root, i, count)}) is missing or incomplete; "
                f"run its process again (it resumes) before merging"
            )
    manifest = {k: v for k, v in shards[0].manifest.items() if k != "shard"}
    for i, sh in enumerate(shards[1:], 1):
        diff = manifest_diff({k: v for k, v in sh.manifest.items() if k != "shard"}, manifest)
        if diff:
            raise ValueError(f"shard {i} was made with other settings than shard 0: {sorted(diff)}")
    plans = [sh.plan for sh in shards]
    n_batches = sum(len(p) for p in plans)
    full_plan = [plans[b % count][b // count] for b in range(n_batches)]
    if sha256_json(full_plan) != manifest["plan_sha256"]:
        raise ValueError("the shards' batches do not add up to the planned batches")
    with io_errors(root, "create the cache folder"):
        root.mkdir(parents=True, exist_ok=True)
    with locked(root):
        mpath = root / MANIFEST
        if mpath.is_file():
            diff = manifest_diff(read_json(mpath), manifest)
            if diff:
                raise CacheMismatchError(
                    f"{root} holds a cache with other settings ({', '.join(diff)})", path=root, fields=diff
                )
            if CachedImages(root).complete:
                return CachedImages(root)
        keys = list(manifest["keys"])
        init_folder(root, manifest, full_plan, keys, int(manifest["image_size"]))
        for key in keys + [None]:
            name = LENGTHS if key is None else key_filename(key)
            with io_errors(root / name, "write"):
                out = np.lib.format.open_memmap(root / name, mode="r+")
                for sh, plan in zip(shards, plans):
                    src = np.load(sh.root / name, mmap_mode="r")
                    for batch in plan:
                        out[batch] = src[batch]
                out.flush()
                del out
        write_json(
            root / PROGRESS,
            {
                "batches_done": n_batches,
                "n_batches": n_batches,
                "chunks_done": int(manifest["n_chunks"]),
                "complete": True,
                "devices": sorted({d for sh in shards for d in sh.progress.get("devices", [])}),
                "merged_from": count,
                "updated": time.time(),
                "files": file_checksums(root, [key_filename(k) for k in keys] + [LENGTHS]),
            },
        )
    if remove_shards:
        for i in range(count):
            shutil.rmtree(shard_root(root, i, count))
    return CachedImages(root)
