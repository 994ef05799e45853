"""Fingerprints: what identifies a cache, a checkpoint or a derived seed, computed one way.

Canonical JSON (sorted keys, no whitespace, UTF-8 kept), SHA-256 of text, bytes, chunks,
files and JSON values, seeds derived from a hash, the versions of the software that produced
a result, and file names made safe from any model id. Every cache, checkpoint and shard of
the package names its settings through these functions, so two layers never disagree about
what "the same settings" means.

New keys use :func:`canonical_json`. The TOA keys (sentence ids, map-cache keys, task
fingerprints, checkpoint keys) were defined on :func:`json.dumps`' default separators before
this module existed; :func:`legacy_json` reproduces that text exactly, so the caches and
checkpoints made before stay valid.

Importing this module does no work.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, BinaryIO, Iterable

__all__ = [
    "canonical_json",
    "legacy_json",
    "sha256_text",
    "sha256_bytes",
    "sha256_chunks",
    "sha256_json",
    "sha256_file",
    "sha256_file_once",
    "sha256_stream",
    "sha256_tree",
    "check_recorded_sha256",
    "seed_from",
    "library_versions",
    "safe_name",
]

_CHUNK = 1 << 20


def canonical_json(obj: Any, *, default=None) -> str:
    """``obj`` as canonical JSON: keys sorted, no whitespace (``","`` and ``":"``), non-ASCII
    characters kept as they are, so equal values always give equal text.

    Args:
        obj: a JSON-serialisable value.
        default: called for values JSON cannot represent (e.g. ``str`` or ``list``), as in
            :func:`json.dumps`; None refuses them.

    Raises:
        TypeError: ``obj`` holds a value JSON cannot represent and ``default`` is None.
    """
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=default)


def legacy_json(obj: Any, *, ensure_ascii: bool = True, default=None) -> str:
    """``json.dumps(obj, sort_keys=True, ensure_ascii=ensure_ascii, default=default)``: keys
    sorted, but :func:`json.dumps`' default separators (``", "`` and ``": "``). The text the
    TOA keys were first defined on (module doc); only those keys use it.

    Raises:
        TypeError: as :func:`canonical_json`.
    """
    return json.dumps(obj, sort_keys=True, ensure_ascii=ensure_ascii, default=default)


def sha256_text(text: str) -> str:
    """Hex SHA-256 of ``text`` encoded as UTF-8 (64 characters)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of ``data`` (64 characters)."""
    return hashlib.sha256(data).hexdigest()


def sha256_chunks(chunks: Iterable[bytes]) -> str:
    """Hex SHA-256 of the concatenation of ``chunks``, without building it in memory."""
    h = hashlib.sha256()
    for chunk in chunks:
        h.update(chunk)
    return h.hexdigest()


def sha256_json(obj: Any, *, default=None) -> str:
    """Hex SHA-256 of :func:`canonical_json` of ``obj`` (64 characters).

    Raises:
        TypeError: as :func:`canonical_json`.
    """
    return sha256_text(canonical_json(obj, default=default))


def sha256_stream(fh: BinaryIO, out: BinaryIO | None = None) -> str:
    """Hex SHA-256 of everything read from ``fh`` (1 MiB at a time), copying it to ``out``
    when given (hash and copy in one pass)."""
    h = hashlib.sha256()
    while chunk := fh.read(_CHUNK):
        h.update(chunk)
        if out is not None:
            out.write(chunk)
    return h.hexdigest()


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of the file at ``path``.

    Raises:
        OSError: the file cannot be read.
    """
    with open(path, "rb") as fh:
        return sha256_stream(fh)


def _tree_chunks(obj: Any):
    """Bytes that identify ``obj``: a nest of dicts, lists, tuples, tensors, NumPy arrays and
    plain values (each part tagged with its type; dict items in a fixed order)."""
    import numpy as np

    if isinstance(obj, dict):
        items = sorted(obj.items(), key=lambda kv: (type(kv[0]).__name__, repr(kv[0])))
        yield f"d{len(items)}(".encode()
        for k, v in items:
            yield f"k{type(k).__name__}:{k!r}=".encode("utf-8", "backslashreplace")
            yield from _tree_chunks(v)
        yield b")"
    elif isinstance(obj, (list, tuple)):
        yield f"{'l' if isinstance(obj, list) else 't'}{len(obj)}(".encode()
        for v in obj:
            yield from _tree_chunks(v)
        yield b")"
    elif hasattr(obj, "detach") and hasattr(obj, "dtype") and hasattr(obj, "shape"):  # a torch tensor
        import torch

        t = obj.detach().cpu().contiguous()
        yield f"T{str(t.dtype).removeprefix('torch.')}{list(t.shape)}:".encode()
        if t.numel():
            yield t.reshape(-1).view(torch.uint8).numpy()
    elif isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        yield f"A{a.dtype.str}{list(a.shape)}:".encode()
        yield a.tobytes()
    else:
        yield f"v{type(obj).__name__}:{obj!r};".encode("utf-8", "backslashreplace")


def sha256_tree(obj: Any) -> str:
    """SHA-256 of a nest of dicts, lists, tuples, tensors (dtype, shape and bytes), NumPy
    arrays and plain values (their ``repr``): what a checkpoint records of its own content, so
    a damaged one is found on reading. Dict items are hashed in a fixed order (keys sorted by
    type and ``repr``), so the insertion order does not matter."""
    return sha256_chunks(_tree_chunks(obj))


def seed_from(*parts: Any) -> int:
    """A 63-bit seed from ``parts``: the first 8 bytes (little-endian) of the SHA-256 of
    ``repr(parts)`` as UTF-8, shifted right by one. Independent of Python's hash
    randomisation; equal parts (equal ``repr``) give equal seeds in every process."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode("utf-8")).digest()[:8], "little") >> 1


@functools.lru_cache(maxsize=4096)
def _sha256_at(path: str, size: int, mtime_ns: int) -> str:
    return sha256_file(path)


def sha256_file_once(path: str | Path) -> str:
    """Hex SHA-256 of the file at ``path``, computed once per process for each
    (path, size, ``mtime_ns``): a file read again unchanged is not hashed again, one that was
    rewritten (new size or modification time) is. What this cannot notice: bytes changed in
    place with the size and modification time put back — use :func:`sha256_file` where that
    matters. ``sha256_file_once.cache_clear()`` forgets every hash (tests).

    Raises:
        OSError: the file cannot be stat'ed or read.
    """
    st = os.stat(path)
    return _sha256_at(str(path), st.st_size, st.st_mtime_ns)


sha256_file_once.cache_clear = _sha256_at.cache_clear  # type: ignore[attr-defined]


def library_versions() -> dict[str, str]:
    """``{"olas", "torch", "transformers"}`` → version strings: the software whose change can
    change a map, recorded in every cache manifest and checkpoint key. Imports torch and
    transformers (the caller has them loaded already)."""
    import torch
    import transformers

    from olas_utils import __version__

    return {"olas": __version__, "torch": torch.__version__, "transformers": transformers.__version__}


def safe_name(name: str) -> str:
    """A file-name-safe form of a model id or path: runs of characters outside
    ``[A-Za-z0-9._+-]`` become ``_``, leading/trailing dots and underscores are dropped;
    ``"model"`` if nothing remains (e.g. ``"Qwen/Qwen2.5-0.5B"`` → ``"Qwen_Qwen2.5-0.5B"``)."""
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", name).strip("._") or "model"


def check_recorded_sha256(data: dict, *, what: str, verify: bool = True, key: str = "content_sha256") -> None:
    """Pop the content hash ``data[key]`` that a saved artefact recorded and check it against
    :func:`sha256_tree` of the rest of ``data`` (in place: ``data`` loses ``key``).

    Args:
        data: the loaded artefact (a dict of tensors and plain values).
        what: how the messages name it, e.g. ``"the TOA model file maps.pt"``.
        verify: False reads a damaged or hashless artefact with a warning instead of refusing.
        key: the field holding the recorded hash.

    Raises:
        ValueError: (``verify``) no hash is recorded, or the content differs from it, saying
            to train and save it again or to pass ``verify=False``.
    """
    recorded = data.pop(key, None)
    if recorded == sha256_tree(data):
        return
    why = (
        f"{what} records no content hash (written by OLAS before these hashes)"
        if recorded is None
        else f"{what} is damaged: its content differs from the SHA-256 it recorded"
    )
    if verify:
        raise ValueError(f"{why}; train and save it again, or pass verify=False to read it as it is")
    import warnings

    warnings.warn(f"{why}; read anyway (verify=False)", UserWarning, stacklevel=3)
