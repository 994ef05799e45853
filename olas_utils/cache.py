"""Cached, resumable extraction of OLA images for the cross-model similarity experiments.

:func:`extract_to_cache` runs :func:`olas_utils.extract.extract_ola` over a corpus batch by
batch, turns every sentence's maps into fixed-size images with the protocol's
pre-processing (:func:`to_image`), and stores them on disk, memory-mappable, committing
progress after every batch. A run killed at any point (exception, Ctrl-C, ``SIGKILL``)
resumes from its last committed batch and ends with arrays bit-for-bit identical to an
uninterrupted run (same machine, same software, same thread settings).

Protocols (images are ``image_size × image_size`` float32):

``"paper"``  the released code's protocol: subword level, each model's own special tokens
             kept (``level="subword"``).
``"word"``   OLAS protocol: word-level maps (``level="word"``: subword rows averaged,
             columns summed, special tokens dropped), so every model has the same W × W
             grid; with 50-word chunks and ``image_size=50`` no resize happens at all.

Pre-processing, the same for every key (OLA orders, rollout, single layers), from
``../shared/paper.md`` §1–2 via :func:`olas_utils.sinks.preprocess`:

1. outliers (attention sinks) zeroed: per row, over the valid positions (lower triangle
   for causal models), entries above mean + 3σ plus the row's argmax
   (:func:`olas_utils.sinks.outlier_mask`);
2. every row renormalised to sum 1 (this also makes rollout's scale irrelevant);
3. causal models: the transposed lower triangle is copied into the upper triangle;
4. resize to ``image_size × image_size`` with ``torch.nn.functional.interpolate(x,
   size=(S, S), mode="bilinear", align_corners=False, antialias=True)`` (area-weighted
   when shrinking); skipped when the map already has that size.

Cache folder layout (default ``<cache>/ola/<model>/<protocol>-<settings hash>``, with
``<cache>`` from :func:`olas_utils.settings.cache_dir`)::

    manifest.json       settings that identify the cache (see below); written last at creation
    plan.json           the batches (lists of chunk indices) in processing order
    progress.json       {"batches_done", "n_batches", "chunks_done", "complete", ...}
    <key>.npy           one per key, ":" → "_" (ola_1.npy, rollout.npy, layer_-1.npy):
                        (n_chunks, S, S) float32, NumPy .npy (np.load(..., mmap_mode="r"))
    lengths.npy         (n_chunks,) int32: side of each map before resizing (tokens or words)
    .lock               advisory lock held by the writing process (fcntl.flock)

``manifest.json`` holds: ``format``, ``model``, ``weights_sha256`` (the zoo's pinned hash,
else a SHA-256 of the state dict), ``is_causal``, ``num_layers``, ``model_dtype``,
``orders``, ``keys``, ``protocol``, ``level``, ``preprocessing``, ``resize``,
``image_size``, ``dtype``, ``n_chunks``, ``corpus_sha256`` (:func:`olas_utils.corpus.corpus_hash`),
``seed``, ``batch_size``, ``plan_sha256``, ``tokenizer`` (``name_or_path`` — the folder
name for local folders —, ``class``, ``vocab_size``, ``vocab_sha256``,
``special_tokens_added``, ``padding_side``, ``pad_token``) and ``versions`` (``olas``,
``torch``, ``transformers``). Any difference refuses the cache (:class:`CacheMismatchError`).

Commit protocol per batch: write the batch's rows into the memory maps, ``flush`` them
(``msync``), then replace ``progress.json`` atomically (write a temporary file, ``fsync``,
:func:`os.replace`). Rows written after the last commit are simply recomputed on resume.

Importing this module does no work.
"""

from __future__ import annotations

import contextlib
import errno as _errno
import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import torch

from . import __version__

__all__ = [
    "FORMAT_VERSION",
    "PROTOCOLS",
    "RESIZE",
    "PREPROCESSING",
    "CacheMismatchError",
    "CacheBusyError",
    "CachedImages",
    "to_image",
    "weights_fingerprint",
    "tokenizer_settings",
    "key_filename",
    "default_cache_root",
    "extract_to_cache",
    "open_cache",
    "shard_root",
    "merge_shards",
]

#: Version of the folder layout; part of the manifest.
FORMAT_VERSION = 1
#: Protocol name → extraction level.
PROTOCOLS: dict[str, str] = {"paper": "subword", "word": "word"}
#: How maps are resized (recorded in the manifest).
RESIZE = "torch.nn.functional.interpolate(mode='bilinear', align_corners=False, antialias=True); none if already SxS"
#: The pre-processing (recorded in the manifest).
PREPROCESSING = ("olas_utils.sinks.preprocess: outliers (mean+3sd over valid, lower triangle if causal, "
                 "plus row argmax) zeroed; rows renormalised to 1; causal: lower triangle mirrored")

_MANIFEST, _PROGRESS, _PLAN, _LENGTHS, _LOCK = "manifest.json", "progress.json", "plan.json", "lengths.npy", ".lock"


class CacheMismatchError(ValueError):
    """An existing cache was made with other settings than the ones asked for.

    Attributes:
        path: the cache folder.
        fields: ``{field: (stored, wanted)}`` for every differing manifest field.
    """

    def __init__(self, message: str, *, path: Path, fields: dict[str, tuple[Any, Any]]):
        super().__init__(message)
        self.path = path
        self.fields = fields


class CacheBusyError(RuntimeError):
    """Another process is writing the same cache folder (its lock is held)."""


# --------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def _io(path: Path | str, what: str):
    """Re-raise an ``OSError`` (same type and errno) with the path and what was being done."""
    try:
        yield
    except OSError as e:
        if getattr(e, "_olas_wrapped", False):
            raise
        msg = f"OLAS cache: cannot {what} {path}: {e.strerror or e}"
        if e.errno == _errno.ENOSPC:
            msg += " (disk full: free space or choose another cache_root / $OLAS_CACHE_DIR)"
        elif isinstance(e, PermissionError):
            msg += " (not writable: choose another cache_root or set $OLAS_CACHE_DIR)"
        try:
            new = type(e)(e.errno, msg, str(path)) if e.errno is not None else type(e)(msg)
        except Exception:  # exotic OSError subclasses
            new = OSError(e.errno, msg, str(path))
        new._olas_wrapped = True  # type: ignore[attr-defined]
        raise new from e


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON to ``path`` atomically: temporary file, fsync, :func:`os.replace`."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with _io(path, "write"):
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1, sort_keys=True, ensure_ascii=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


def _read_json(path: Path) -> Any:
    with _io(path, "read"):
        with open(path, encoding="utf-8") as f:
            return json.load(f)


def key_filename(key: str) -> str:
    """File name of a key's images: ``"ola:1"`` → ``"ola_1.npy"``, ``"layer:-1"`` → ``"layer_-1.npy"``."""
    return key.replace(":", "_") + ".npy"


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", name).strip("._") or "model"


# --------------------------------------------------------------------------------------
# Pre-processing
# --------------------------------------------------------------------------------------


def to_image(m: torch.Tensor, *, causal: bool, image_size: int = 50) -> torch.Tensor:
    """One sentence's map as a pre-processed ``image_size × image_size`` image.

    Outliers zeroed, rows renormalised, causal maps symmetrised
    (:func:`olas_utils.sinks.preprocess` with ``remove_sinks=True``), then resized with
    bilinear interpolation, ``align_corners=False``, ``antialias=True`` (no resize if the
    map is already ``image_size`` wide).

    Args:
        m: ``(T, T)`` map (any float dtype).
        causal: the model is causal.
        image_size: S.

    Returns:
        ``(S, S)`` float32 tensor on the CPU.

    Raises:
        ValueError: if ``m`` is not square 2-D or ``image_size < 1``.
    """
    from .sinks import preprocess

    if m.dim() != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"expected a square (T, T) map, got {tuple(m.shape)}")
    if image_size < 1:
        raise ValueError(f"image_size must be >= 1, got {image_size}")
    x = preprocess(m.detach().float().cpu().unsqueeze(0), causal=causal, remove_sinks=True,
                   keep_raw=False, renormalize=True, symmetrize=True)
    if x.shape[-1] != image_size:
        x = torch.nn.functional.interpolate(x.unsqueeze(0), size=(image_size, image_size), mode="bilinear",
                                            align_corners=False, antialias=True)[0]
    return x[0].contiguous()


# --------------------------------------------------------------------------------------
# Identity of a model / tokenizer
# --------------------------------------------------------------------------------------


def weights_fingerprint(loaded) -> str:
    """Identify a model's weights.

    Zoo models (and prepared folders) carry the SHA-256 of their original weight file
    (``LoadedModel.weights_sha256``): that is returned. Otherwise (random or modified
    models, which must have ``weights_sha256=None``) the SHA-256 of the state dict: every
    tensor's name, dtype, shape and bytes, in name order (about a second per GB).

    Args:
        loaded: a :class:`~olas_utils.zoo.LoadedModel`.

    Returns:
        A hex string; ``"state_dict:<hex>"`` for state-dict hashes.
    """
    sha = getattr(loaded, "weights_sha256", None)
    if sha:
        return str(sha)
    h = hashlib.sha256()
    for name, t in sorted(loaded.model.state_dict().items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return "state_dict:" + h.hexdigest()


def tokenizer_settings(tokenizer) -> dict:
    """What identifies a tokenizer's output: ``name_or_path`` (the folder name for a local
    folder, so moving the cache does not matter), ``class``, ``vocab_size``
    (``len(tokenizer)``, added tokens included), ``vocab_sha256`` (of the sorted vocabulary),
    ``special_tokens_added`` (the tokens wrapped around the probe text ``"a"``, with the
    text shown as ``"<text>"``), ``padding_side`` and ``pad_token``."""
    nop = str(getattr(tokenizer, "name_or_path", "") or "")
    if nop and Path(nop).expanduser().is_dir():
        nop = Path(nop).expanduser().resolve().name
    vocab = tokenizer.get_vocab()
    enc = tokenizer("a", add_special_tokens=True, return_special_tokens_mask=True)
    toks = tokenizer.convert_ids_to_tokens(enc["input_ids"])
    added: list[str] = []
    for t, sp in zip(toks, enc["special_tokens_mask"]):
        if sp:
            added.append(t)
        elif not added or added[-1] != "<text>":
            added.append("<text>")
    return {
        "name_or_path": nop,
        "class": type(tokenizer).__name__,
        "vocab_size": len(tokenizer),
        "vocab_sha256": _sha256_text(_canonical(sorted(vocab.items(), key=lambda kv: (kv[1], kv[0])))),
        "special_tokens_added": added,
        "padding_side": getattr(tokenizer, "padding_side", None),
        "pad_token": getattr(tokenizer, "pad_token", None),
    }


def _versions() -> dict[str, str]:
    import transformers

    return {"olas": __version__, "torch": torch.__version__, "transformers": transformers.__version__}


def _keys(orders: Iterable[int], baselines: Iterable[str]) -> tuple[list[int], bool, list[int], list[str]]:
    """Validate orders and baselines → (orders, rollout, layers, keys)."""
    orders = [int(k) for k in orders]
    if len(set(orders)) != len(orders):
        raise ValueError(f"orders has duplicates: {orders}")
    rollout, layers = False, []
    base = list(baselines)
    if len(set(base)) != len(base):
        raise ValueError(f"baselines has duplicates: {base}")
    for b in base:
        if b == "rollout":
            rollout = True
        elif re.fullmatch(r"layer:-?\d+", str(b)):
            layers.append(int(b.split(":")[1]))
        else:
            raise ValueError(f"unknown baseline {b!r}: use 'rollout' or 'layer:I' (OLA orders go in orders=)")
    keys = [f"ola:{k}" for k in orders] + list(base)
    if not keys:
        raise ValueError("nothing to extract: orders and baselines are both empty")
    return orders, rollout, layers, keys


def default_cache_root(manifest: dict, cache_dir: str | os.PathLike | None = None) -> Path:
    """``<cache>/ola/<model>/<protocol>-<first 12 hex of the manifest's SHA-256>``.

    Args:
        manifest: the manifest dict (as built by :func:`extract_to_cache`).
        cache_dir: OLAS cache folder (see :func:`olas_utils.settings.cache_dir`).
    """
    from . import settings

    digest = _sha256_text(_canonical(manifest))[:12]
    return settings.cache_dir(cache_dir) / "ola" / _safe_name(manifest["model"]) / f"{manifest['protocol']}-{digest}"


# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------


class CachedImages:
    """A cache folder written by :func:`extract_to_cache` (read-only view).

    Attributes:
        root: the folder.
        manifest: the parsed ``manifest.json``.
        keys: names of the stored maps (``"ola:1"``, ``"rollout"``, ``"layer:-1"``, ...).
        n_chunks: number of chunks (rows).
        image_size: S.
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        mpath = self.root / _MANIFEST
        if not mpath.is_file():
            raise FileNotFoundError(f"{self.root} is not an OLAS image cache (no {_MANIFEST})")
        self.manifest: dict = _read_json(mpath)
        if self.manifest.get("format") != FORMAT_VERSION:
            raise ValueError(f"{self.root}: cache format {self.manifest.get('format')!r}, this OLAS reads {FORMAT_VERSION}")
        self.keys: list[str] = list(self.manifest["keys"])
        self.n_chunks: int = int(self.manifest["n_chunks"])
        self.image_size: int = int(self.manifest["image_size"])

    def __repr__(self) -> str:
        p = self.progress
        return (f"CachedImages({str(self.root)!r}, model={self.manifest['model']!r}, protocol="
                f"{self.manifest['protocol']!r}, keys={self.keys}, {p['chunks_done']}/{self.n_chunks} chunks)")

    @property
    def progress(self) -> dict:
        """The parsed ``progress.json`` (read afresh)."""
        return _read_json(self.root / _PROGRESS)

    @property
    def complete(self) -> bool:
        """Whether every batch is committed."""
        return bool(self.progress["complete"])

    @property
    def plan(self) -> list[list[int]]:
        """The batches (chunk indices) in processing order."""
        return _read_json(self.root / _PLAN)

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
                f"extract_to_cache again to finish it, or pass allow_partial=True (rows not done are 0; see .done)")

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
        return np.load(self.root / _LENGTHS, mmap_mode="r")


def open_cache(root: str | os.PathLike) -> CachedImages:
    """Open an existing cache folder for reading (no settings needed).

    Raises:
        FileNotFoundError: the folder has no ``manifest.json``.
    """
    return CachedImages(root)


# --------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(root: Path):
    """Hold an exclusive advisory lock on ``root/.lock`` (released when the process dies)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no locking
        yield
        return
    path = root / _LOCK
    with _io(path, "open the lock file"):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CacheBusyError(f"another process is writing the OLAS cache {root} (lock {path} is held); "
                                 f"wait for it, or use another cache_root") from None
        yield
    finally:
        os.close(fd)


def _known_files(root: Path, keys: Iterable[str] | None) -> set[str]:
    names = {_MANIFEST, _PROGRESS, _PLAN, _LENGTHS, _LOCK}
    if keys is not None:
        names |= {key_filename(k) for k in keys}
    return names


def _is_ours(name: str, keys: Iterable[str] | None) -> bool:
    if name in _known_files(Path("."), keys):
        return True
    if name.endswith(".tmp"):
        return True
    return bool(re.fullmatch(r"(ola_\d+|rollout|layer_-?\d+)\.npy", name))


def _clear(root: Path, keys: Iterable[str] | None) -> None:
    """Delete our files (manifest first, so an interruption leaves a re-initialisable folder)."""
    names = [p.name for p in root.iterdir()]
    foreign = [n for n in names if not _is_ours(n, keys)]
    if foreign:
        raise FileExistsError(
            f"{root} holds files that are not part of an OLAS image cache ({', '.join(sorted(foreign)[:5])}); "
            f"refusing to delete them. Choose another cache_root.")
    order = sorted(names, key=lambda n: (n != _MANIFEST, n == _LOCK))
    for n in order:
        if n == _LOCK:
            continue  # we hold it
        with _io(root / n, "delete"):
            (root / n).unlink()


def _diff(stored: dict, wanted: dict, prefix: str = "") -> dict[str, tuple[Any, Any]]:
    out: dict[str, tuple[Any, Any]] = {}
    for k in sorted(set(stored) | set(wanted)):
        a, b = stored.get(k, "<absent>"), wanted.get(k, "<absent>")
        if isinstance(a, dict) and isinstance(b, dict):
            out.update(_diff(a, b, f"{prefix}{k}."))
        elif a != b:
            out[f"{prefix}{k}"] = (a, b)
    return out


def _short(v: Any, n: int = 80) -> str:
    s = json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


def _plan(tokenizer, model, chunks: Sequence[Sequence[str]], batch_size: int) -> list[list[int]]:
    from .align import tokenize_words
    from .extract import length_buckets, max_tokens

    lengths = tokenize_words(tokenizer, chunks, max_length=max_tokens(model, tokenizer)).lengths
    return length_buckets(lengths, batch_size)


def extract_to_cache(
    model_name_or_loaded,
    chunks: Sequence[Sequence[str]],
    *,
    cache_root: str | os.PathLike | None = None,
    orders: Iterable[int] = (1, 2, 3),
    baselines: Iterable[str] = ("rollout", "layer:0", "layer:-1"),
    protocol: str = "paper",
    image_size: int = 50,
    batch_size: int = 8,
    seed: int = 0,
    progress: bool = True,
    overwrite: bool = False,
    device: str | torch.device | None = None,
    cache_dir: str | os.PathLike | None = None,
    on_batch: Callable[[int, int], None] | None = None,
    shard: tuple[int, int] | None = None,
) -> CachedImages:
    """Extract OLA images of a corpus into a resumable on-disk cache (or reuse it).

    Batches are fixed by the corpus, tokenizer and ``batch_size`` (chunks bucketed by token
    length, longest first: :func:`olas_utils.extract.length_buckets`) and run one forward
    pass each through :func:`olas_utils.extract.extract_ola`; each sentence's maps become
    images with :func:`to_image`. After each batch the rows are flushed and the progress is
    committed atomically; calling again with the same settings resumes after the last
    committed batch (or returns at once if complete). See the module docstring for the
    protocols, pre-processing, file formats and manifest.

    Args:
        model_name_or_loaded: a zoo name / folder / Hugging Face id (loaded with
            :func:`olas_utils.zoo.load_model`) or a :class:`~olas_utils.zoo.LoadedModel`. A
            model whose weights were changed must have ``weights_sha256=None`` (then its
            state dict is hashed).
        chunks: the corpus, lists of words (e.g. :func:`olas_utils.corpus.build_chunks`).
        cache_root: the cache folder; default
            ``<cache>/ola/<model>/<protocol>-<settings hash>`` (:func:`default_cache_root`).
        orders: OLA orders, stored as ``"ola:k"``.
        baselines: ``"rollout"`` and/or ``"layer:i"`` (0-based, -1 = last).
        protocol: ``"paper"`` (subword level) or ``"word"`` (word level).
        image_size: S, images are S × S.
        batch_size: sentences per forward pass (part of the settings: it fixes the batches,
            and so the exact float results).
        seed: the seed the corpus was drawn with (provenance; recorded and compared).
        progress: show a progress bar.
        overwrite: delete any existing cache at ``cache_root`` (other settings, or the same
            settings finished or not) and rebuild it from scratch.
        device: device for loading a model by name (``load_model(device=...)``).
        cache_dir: OLAS cache folder for the default ``cache_root``.
        on_batch: called as ``on_batch(batches_done, n_batches)`` after each committed batch
            (an exception raised there stops the run; the cache stays resumable).
        shard: ``(index, count)`` for multi-process extraction: this process computes only
            the batches ``b`` of the full plan with ``b % count == index`` (the very same
            batches as a single-process run) into its own shard folder
            ``<cache_root>.shard-III-of-NNN``; :func:`merge_shards` then assembles the cache.
            ``None`` or ``(0, 1)``: no sharding.

    Returns:
        :class:`CachedImages` of the complete cache.

    Raises:
        CacheMismatchError: ``cache_root`` holds a cache made with other settings (the
            message names each differing field, both values, and the fixes: another
            ``cache_root`` or ``overwrite=True``).
        CacheBusyError: another process is writing the same folder.
        FileExistsError: ``cache_root`` holds files that are not an OLAS cache.
        ValueError: unknown protocol or baseline, bad sizes, an empty corpus, or a chunk too
            long for the model (from tokenisation).
        OSError: (same type and errno) on a failed write — permission, disk full — naming
            the path.
    """
    from .corpus import corpus_hash

    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {list(PROTOCOLS)}, got {protocol!r}")
    if not isinstance(image_size, int) or image_size < 1:
        raise ValueError(f"image_size must be a positive integer, got {image_size!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    chunks = [list(c) for c in chunks]
    if not chunks:
        raise ValueError("the corpus is empty")
    orders, rollout, layers, keys = _keys(orders, baselines)
    level = PROTOCOLS[protocol]

    if isinstance(model_name_or_loaded, (str, os.PathLike)):
        from .zoo import load_model

        lm = load_model(model_name_or_loaded, device=device)
    else:
        lm = model_name_or_loaded
    model, tokenizer = lm.model, lm.tokenizer
    if model.training:
        raise RuntimeError("the model is in training mode (dropout on attention); call model.eval() first")
    from .capture import num_attention_layers
    from .extract import parse_key
    from .ola import check_orders

    n_layers = num_attention_layers(model)
    check_orders(orders, n_layers)
    for i in layers:
        parse_key(f"layer:{i}", n_layers)

    plan = _plan(tokenizer, model, chunks, batch_size)
    manifest = {
        "format": FORMAT_VERSION,
        "model": str(lm.name),
        "weights_sha256": weights_fingerprint(lm),
        "is_causal": bool(lm.is_causal),
        "num_layers": int(n_layers),
        "model_dtype": str(next(model.parameters()).dtype).replace("torch.", ""),
        "orders": orders,
        "keys": keys,
        "protocol": protocol,
        "level": level,
        "preprocessing": PREPROCESSING,
        "resize": RESIZE,
        "image_size": image_size,
        "dtype": "float32",
        "n_chunks": len(chunks),
        "corpus_sha256": corpus_hash(chunks),
        "seed": int(seed),
        "batch_size": batch_size,
        "plan_sha256": _sha256_text(_canonical(plan)),
        "tokenizer": tokenizer_settings(tokenizer),
        "versions": _versions(),
    }
    root = Path(cache_root).expanduser() if cache_root is not None else default_cache_root(manifest, cache_dir)
    if shard is not None and shard[1] > 1:
        index, count = shard
        if not 0 <= index < count:
            raise ValueError(f"shard index {index} is outside 0..{count - 1}")
        root = shard_root(root, index, count)
        manifest["shard"] = [index, count]
        plan = [batch for b, batch in enumerate(plan) if b % count == index]
    with _io(root, "create the cache folder"):
        root.mkdir(parents=True, exist_ok=True)

    with _locked(root):
        mpath = root / _MANIFEST
        if mpath.is_file():
            stored = _read_json(mpath)
            diff = _diff(stored, manifest)
            if diff and not overwrite:
                lines = "\n".join(f"  {k}: cache has {_short(a)}, asked for {_short(b)}" for k, (a, b) in diff.items())
                raise CacheMismatchError(
                    f"the OLAS image cache {root} was made with different settings ({', '.join(diff)}):\n{lines}\n"
                    f"It is never reused silently. Use another cache_root (or leave cache_root=None for a "
                    f"folder per settings), or pass overwrite=True to delete it and rebuild.",
                    path=root, fields=diff)
            if overwrite:
                _clear(root, stored.get("keys"))
        if not mpath.is_file():
            _init(root, manifest, plan, keys, image_size)

        state = _read_json(root / _PROGRESS)
        done = int(state["batches_done"])
        if done < len(plan):
            _run(root, lm, chunks, plan, state, keys=keys, orders=orders, rollout=rollout, layers=layers,
                 level=level, image_size=image_size, progress=progress, on_batch=on_batch)
    return CachedImages(root)


def _init(root: Path, manifest: dict, plan: list[list[int]], keys: list[str], image_size: int) -> None:
    """Create a fresh cache in ``root`` (leftovers of an interrupted creation are removed)."""
    _clear(root, keys)
    n = manifest["n_chunks"]
    for key in keys:
        path = root / key_filename(key)
        with _io(path, "create"):
            mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, image_size, image_size))
            mm.flush()
            del mm
    with _io(root / _LENGTHS, "create"):
        mm = np.lib.format.open_memmap(root / _LENGTHS, mode="w+", dtype=np.int32, shape=(n,))
        mm.flush()
        del mm
    _write_json_atomic(root / _PLAN, plan)
    _write_json_atomic(root / _PROGRESS, {"batches_done": 0, "n_batches": len(plan), "chunks_done": 0,
                                          "complete": False, "devices": [], "updated": time.time()})
    _write_json_atomic(root / _MANIFEST, manifest)  # last: the folder now counts as a cache


def _run(root: Path, lm, chunks, plan, state, *, keys, orders, rollout, layers, level, image_size,
         progress, on_batch) -> None:
    from tqdm.auto import tqdm

    from .extract import extract_ola

    n_batches = len(plan)
    done = int(state["batches_done"])
    mms = {}
    for key in keys:
        path = root / key_filename(key)
        with _io(path, "open"):
            mms[key] = np.lib.format.open_memmap(path, mode="r+")
    with _io(root / _LENGTHS, "open"):
        lengths = np.lib.format.open_memmap(root / _LENGTHS, mode="r+")
    dev = str(next(lm.model.parameters()).device)
    devices = list(state.get("devices", []))
    if dev not in devices:
        devices.append(dev)
    chunks_done = int(state.get("chunks_done", 0))
    try:
        bar = tqdm(total=n_batches, initial=done, desc=f"OLA images {lm.name} ({level})", unit="batch",
                   disable=not progress)
        with bar:
            for b in range(done, n_batches):
                idx = plan[b]
                res = extract_ola(lm.model, lm.tokenizer, [chunks[i] for i in idx], orders=orders, rollout=rollout,
                                  layers=layers, level=level, batch_size=len(idx), progress=False,
                                  model_name=str(lm.name))
                for key in keys:
                    mm = mms[key]
                    for j, i in enumerate(idx):
                        mm[i] = to_image(res[key][j], causal=res.is_causal, image_size=image_size).numpy()
                for j, i in enumerate(idx):
                    lengths[i] = res[keys[0]][j].shape[-1]
                for key, mm in mms.items():
                    with _io(root / key_filename(key), "write"):
                        mm.flush()
                with _io(root / _LENGTHS, "write"):
                    lengths.flush()
                chunks_done += len(idx)
                _write_json_atomic(root / _PROGRESS, {
                    "batches_done": b + 1, "n_batches": n_batches, "chunks_done": chunks_done,
                    "complete": b + 1 == n_batches, "devices": devices, "updated": time.time()})
                bar.update(1)
                if on_batch is not None:
                    on_batch(b + 1, n_batches)
    finally:
        for mm in mms.values():
            del mm
        mms.clear()
        del lengths


# --------------------------------------------------------------------------------------
# Sharding across processes
# --------------------------------------------------------------------------------------

_SHARD_RE = re.compile(r"^(?P<name>.+)\.shard-(?P<index>\d{3})-of-(?P<count>\d{3})$")


def shard_root(root: str | os.PathLike, index: int, count: int) -> Path:
    """Folder of shard ``index`` of ``count`` of the cache at ``root``:
    ``<root>.shard-III-of-NNN`` (beside the final cache, never inside it)."""
    root = Path(root)
    return root.with_name(f"{root.name}.shard-{index:03d}-of-{count:03d}")


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

    m = _SHARD_RE.match(Path(any_shard_root).name)
    if m is None:
        raise ValueError(f"{any_shard_root} is not a shard folder (<root>.shard-III-of-NNN)")
    root = Path(any_shard_root).with_name(m["name"])
    count = int(m["count"])
    shards = [CachedImages(shard_root(root, i, count)) if (shard_root(root, i, count) / _MANIFEST).is_file() else None
              for i in range(count)]
    for i, sh in enumerate(shards):
        if sh is None or not sh.complete:
            raise RuntimeError(f"shard {i} of {count} ({shard_root(root, i, count)}) is missing or incomplete; "
                               f"run its process again (it resumes) before merging")
    manifest = {k: v for k, v in shards[0].manifest.items() if k != "shard"}
    for i, sh in enumerate(shards[1:], 1):
        diff = _diff({k: v for k, v in sh.manifest.items() if k != "shard"}, manifest)
        if diff:
            raise ValueError(f"shard {i} was made with other settings than shard 0: {sorted(diff)}")
    plans = [sh.plan for sh in shards]
    n_batches = sum(len(p) for p in plans)
    full_plan = [plans[b % count][b // count] for b in range(n_batches)]
    if _sha256_text(_canonical(full_plan)) != manifest["plan_sha256"]:
        raise ValueError("the shards' batches do not add up to the planned batches")
    with _io(root, "create the cache folder"):
        root.mkdir(parents=True, exist_ok=True)
    with _locked(root):
        mpath = root / _MANIFEST
        if mpath.is_file():
            diff = _diff(_read_json(mpath), manifest)
            if diff:
                raise CacheMismatchError(f"{root} holds a cache with other settings ({', '.join(diff)})",
                                         path=root, fields=diff)
            if CachedImages(root).complete:
                return CachedImages(root)
        keys = list(manifest["keys"])
        _init(root, manifest, full_plan, keys, int(manifest["image_size"]))
        for key in keys + [None]:
            name = _LENGTHS if key is None else key_filename(key)
            with _io(root / name, "write"):
                out = np.lib.format.open_memmap(root / name, mode="r+")
                for sh, plan in zip(shards, plans):
                    src = np.load(sh.root / name, mmap_mode="r")
                    for batch in plan:
                        out[batch] = src[batch]
                out.flush()
                del out
        _write_json_atomic(root / _PROGRESS, {
            "batches_done": n_batches, "n_batches": n_batches, "chunks_done": int(manifest["n_chunks"]),
            "complete": True, "devices": sorted({d for sh in shards for d in sh.progress.get("devices", [])}),
            "merged_from": count, "updated": time.time()})
    if remove_shards:
        for i in range(count):
            shutil.rmtree(shard_root(root, i, count))
    return CachedImages(root)
