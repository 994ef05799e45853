"""What identifies a cache: its manifest's settings, their hashing and their comparison.

Canonical JSON and SHA-256 (:func:`default_cache_root` names one folder per settings),
the tokenizer's identity (:func:`tokenizer_settings`), the software versions, and the
field-by-field difference of two manifests (:class:`CacheMismatchError`).

``manifest.json`` holds: ``format``, ``model``, ``weights_sha256`` (the zoo's pinned hash,
else a SHA-256 of the state dict), ``is_causal``, ``num_layers``, ``model_dtype``,
``orders``, ``keys``, ``protocol``, ``level``, ``preprocessing``, ``resize``,
``image_size``, ``dtype``, ``n_chunks``, ``corpus_sha256`` (:func:`olas_utils.data.corpus.corpus_hash`),
``seed``, ``batch_size``, ``plan_sha256``, ``tokenizer`` (``name_or_path`` — the folder
name for local folders —, ``class``, ``vocab_size``, ``vocab_sha256``,
``special_tokens_added``, ``padding_side``, ``pad_token``) and ``versions`` (``olas``,
``torch``, ``transformers``). Any difference refuses the cache (:class:`CacheMismatchError`).

Importing this module does no work.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import torch

from olas_utils import __version__

__all__ = ["CacheMismatchError", "tokenizer_settings", "default_cache_root"]


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


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", name).strip("._") or "model"


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


def default_cache_root(manifest: dict, cache_dir: str | os.PathLike | None = None) -> Path:
    """``<cache>/ola/<model>/<protocol>-<first 12 hex of the manifest's SHA-256>``.

    Args:
        manifest: the manifest dict (as built by :func:`~olas_utils.similarity.cache.extract_to_cache`).
        cache_dir: OLAS cache folder (see :func:`olas_utils.settings.cache_dir`).
    """
    from olas_utils import settings

    digest = _sha256_text(_canonical(manifest))[:12]
    return settings.cache_dir(cache_dir) / "ola" / _safe_name(manifest["model"]) / f"{manifest['protocol']}-{digest}"


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
