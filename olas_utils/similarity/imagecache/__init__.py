"""The OLA image cache: resumable, settings-checked, memory-mapped images of a corpus, one
folder per model and protocol — its public interface.

Write or resume a cache (one forward pass per batch for every protocol and key):
:func:`extract_protocols`, :func:`extract_to_cache`, with what to compute as one
:class:`CacheSettings` value; check without running a model whether
caches are complete: :func:`cache_complete`. Open and read one: :func:`open_cache`,
:class:`CachedImages` (``.images(key)``, ``.stack()``, ``.lengths()``, ``.done``); verify
it: opening checks every array against the sizes and SHA-256 recorded at completion
(:meth:`CachedImages.verify`, :func:`verify_files`). Multi-process runs: each process
writes a shard (``shard=(index, count)``, folder :func:`shard_root`) and
:func:`merge_shards` assembles the cache, bit for bit a single-process run's
(:func:`parse_shard_root` reads a shard folder's name back). Manifests: what a cache's
folder name is made of (:func:`default_cache_root`), the tokenizer's identity
(:func:`tokenizer_settings`), the difference of two manifests (:func:`manifest_diff`);
array file names (:func:`key_filename`). Errors: :class:`CacheMismatchError` (other
settings), :class:`CacheCorruptError` (a damaged file, named), :class:`CacheBusyError`
(another process writes the folder).

Modules, one job each:

- ``manifest``: what identifies a cache (its settings, their hash, their difference);
- ``folder``: a cache folder on disk (file names, I/O errors naming the path, atomic JSON,
  checksums, the lock, creating and clearing the files);
- ``plan``: what a run will write, decided before any model runs (keys, batches, folders);
- ``write``: the extraction run, batch by batch, with its commits;
- ``read``: reading a cache (:class:`CachedImages`);
- ``shards``: shard folders and their deterministic merge.

Everything else should be imported from here; importing this package loads its modules
and runs nothing.
"""

from __future__ import annotations

from olas_utils.similarity.imagecache.folder import (
    FORMAT_VERSION,
    CacheBusyError,
    CacheCorruptError,
    key_filename,
    verify_files,
)
from olas_utils.similarity.imagecache.manifest import (
    RECORDED,
    CacheMismatchError,
    default_cache_root,
    manifest_diff,
    tokenizer_settings,
)
from olas_utils.similarity.imagecache.plan import CacheSettings, cache_complete
from olas_utils.similarity.imagecache.read import CachedImages, open_cache
from olas_utils.similarity.imagecache.shards import merge_shards, parse_shard_root, shard_root
from olas_utils.similarity.imagecache.write import extract_protocols, extract_to_cache

__all__ = [
    "CacheSettings",
    "extract_protocols",
    "extract_to_cache",
    "cache_complete",
    "open_cache",
    "CachedImages",
    "verify_files",
    "merge_shards",
    "shard_root",
    "parse_shard_root",
    "default_cache_root",
    "tokenizer_settings",
    "manifest_diff",
    "RECORDED",
    "key_filename",
    "FORMAT_VERSION",
    "CacheMismatchError",
    "CacheCorruptError",
    "CacheBusyError",
]
