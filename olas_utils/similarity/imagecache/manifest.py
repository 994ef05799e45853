"""What identifies a cache: its manifest's settings, building, hashing and comparing them.

:func:`run_manifest` and :func:`protocol_manifest` build the manifest of a run,
:func:`default_cache_root` names one folder per settings (the SHA-256 of the manifest's
canonical JSON, :func:`olas_utils.infra.fingerprint.sha256_json`), :func:`tokenizer_settings` is
the tokenizer's identity, and :func:`manifest_diff` / :func:`mismatch_error` the
field-by-field difference of two manifests (:class:`CacheMismatchError`).

``manifest.json`` holds: ``format``, ``model``, ``weights_sha256`` (the zoo's pinned hash,
else a SHA-256 of the state dict), ``attention``, ``is_causal``, ``num_layers``,
``model_dtype``, ``orders``, ``keys`` (the stored maps: OLA orders, then the baselines,
context-mixing keys included; a word-level protocol leaves out the keys whose neutral pooling
means nothing on the model, :func:`olas_utils.maths.uniform.neutral_problem`), ``protocol``,
``level``, ``preprocessing``, ``resize``, ``image_size``, ``dtype``, ``n_chunks``, ``corpus_sha256``
(:func:`olas_utils.data.corpus.corpus_hash`), ``seed``, ``batch_size``, ``plan_sha256``,
``recorded`` (``torch_threads``: what the run recorded but does not identify it: ignored by
:func:`manifest_diff` and the folder hash), ``tokenizer`` (``name_or_path`` — the folder name for local folders —, ``class``,
``vocab_size``, ``vocab_sha256``, ``special_tokens_added``, ``padding_side``,
``pad_token``), ``versions`` (``olas``, ``torch``, ``transformers``:
:func:`olas_utils.infra.fingerprint.library_versions`) and, for a shard, ``shard``. Any
difference refuses the cache (:class:`CacheMismatchError`).

Importing this module does no work.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from olas_utils.infra.fingerprint import library_versions, safe_name, sha256_json
from olas_utils.similarity.imagecache.folder import FORMAT_VERSION
from olas_utils.similarity.images import PREPROCESSING, PROTOCOLS, RESIZE

__all__ = [
    "RECORDED",
    "CacheMismatchError",
    "tokenizer_settings",
    "run_manifest",
    "protocol_manifest",
    "default_cache_root",
    "manifest_diff",
    "mismatch_error",
]


#: the manifest field of what a run recorded without it identifying the cache (the torch thread
#: count): left out of :func:`manifest_diff` and of :func:`default_cache_root`'s hash, so a cache
#: written before it existed, or with another thread count, is the same cache.
RECORDED = "recorded"


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
        "vocab_sha256": sha256_json(sorted(vocab.items(), key=lambda kv: (kv[1], kv[0]))),
        "special_tokens_added": added,
        "padding_side": getattr(tokenizer, "padding_side", None),
        "pad_token": getattr(tokenizer, "pad_token", None),
    }


def run_manifest(
    lm,
    chunks,
    *,
    plan: list[list[int]],
    orders: list[int],
    keys: list[str],
    image_size: int,
    batch_size: int,
    seed: int,
    num_layers: int,
) -> dict:
    """The manifest fields every protocol of one run shares (all but ``protocol``,
    ``level``, ``preprocessing``, ``resize``: :func:`protocol_manifest`).

    Args:
        lm: a :class:`~olas_utils.zoo.LoadedModel` (or a control identity stand-in): its
            name, weight fingerprint (:func:`olas_utils.zoo.weights_fingerprint`), attention,
            config, parameters' dtype and tokenizer are recorded.
        chunks: the corpus (its hash is recorded).
        plan: the batches (their hash is recorded).
        orders, keys, image_size, batch_size, seed: the settings, recorded as given.
        num_layers: the model's number of attention layers.
    """
    from olas_utils.capture.facts import model_facts
    from olas_utils.data.corpus import corpus_hash
    from olas_utils.zoo import weights_fingerprint

    model, tokenizer = lm.model, lm.tokenizer
    return {
        "format": FORMAT_VERSION,
        "model": str(lm.name),
        "weights_sha256": weights_fingerprint(lm),
        "attention": getattr(lm, "attention", "model"),
        "is_causal": bool(model_facts(lm).is_causal),  # what the images are made with (to_image)
        "num_layers": int(num_layers),
        "model_dtype": str(next(model.parameters()).dtype).replace("torch.", ""),
        "orders": orders,
        "keys": keys,
        "image_size": image_size,
        "dtype": "float32",
        "n_chunks": len(chunks),
        "corpus_sha256": corpus_hash(chunks),
        "seed": int(seed),
        "batch_size": batch_size,
        "plan_sha256": sha256_json(plan),
        "tokenizer": tokenizer_settings(tokenizer),
        "versions": library_versions(),
    }


def protocol_manifest(common: dict, protocol: str) -> dict:
    """One protocol's manifest: ``common`` (:func:`run_manifest`) with the protocol, its
    level, pre-processing and resize (:mod:`olas_utils.similarity.images`); a new dict.

    Raises:
        KeyError: an unknown protocol.
    """
    return dict(
        common,
        protocol=protocol,
        level=PROTOCOLS[protocol],
        preprocessing=PREPROCESSING[protocol],
        resize=RESIZE[protocol],
    )


def default_cache_root(manifest: dict, cache_dir: str | os.PathLike | None = None) -> Path:
    """``<cache>/ola/<model>/<protocol>-<first 12 hex of the manifest's SHA-256>``.

    Args:
        manifest: the manifest dict (:func:`protocol_manifest`, as
            :func:`~olas_utils.similarity.imagecache.extract_to_cache` builds it).
        cache_dir: OLAS cache folder (see :func:`olas_utils.infra.settings.cache_dir`).
    """
    from olas_utils.infra import settings

    digest = sha256_json({k: v for k, v in manifest.items() if k != RECORDED})[:12]
    return settings.cache_dir(cache_dir) / "ola" / safe_name(manifest["model"]) / f"{manifest['protocol']}-{digest}"


def manifest_diff(stored: dict, wanted: dict, prefix: str = "") -> dict[str, tuple[Any, Any]]:
    """Field-by-field difference of two manifests: ``{field: (stored, wanted)}``, nested
    dicts flattened to dotted fields (``"tokenizer.vocab_size"``), a field missing on one
    side shown as ``"<absent>"``, fields in sorted order; empty if they are equal. The top-level
    :data:`RECORDED` field is not compared."""
    out: dict[str, tuple[Any, Any]] = {}
    for k in sorted(set(stored) | set(wanted)):
        if not prefix and k == RECORDED:
            continue
        a, b = stored.get(k, "<absent>"), wanted.get(k, "<absent>")
        if isinstance(a, dict) and isinstance(b, dict):
            out.update(manifest_diff(a, b, f"{prefix}{k}."))
        elif a != b:
            out[f"{prefix}{k}"] = (a, b)
    return out


def mismatch_error(root: Path, diff: dict[str, tuple[Any, Any]]) -> CacheMismatchError:
    """The :class:`CacheMismatchError` for a cache in ``root`` made with other settings:
    names each differing field (``diff``, from :func:`manifest_diff`) with both values,
    and the fixes (another ``cache_root``, or ``overwrite=True``)."""
    lines = "\n".join(f"  {k}: cache has {_short(a)}, asked for {_short(b)}" for k, (a, b) in diff.items())
    return CacheMismatchError(
        f"the OLAS image cache {root} was made with different settings ({', '.join(diff)}):\n{lines}\n"
        f"It is never reused silently. Use another cache_root (or leave cache_root=None for a "
        f"folder per settings), or pass overwrite=True to delete it and rebuild.",
        path=root,
        fields=diff,
    )


def _short(v: Any, n: int = 80) -> str:
    s = json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."
