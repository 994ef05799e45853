"""Loading a zoo model, local folder or Hugging Face id as a :class:`LoadedModel` ready for
attention analysis, and a fingerprint of its weights (a model's controls, its randomly
initialised copy included, are made in :mod:`olas_utils.zoo.controls`).
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import logging
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from olas_utils.capture.architecture import is_causal_config
from olas_utils.infra import settings
from olas_utils.infra.fingerprint import sha256_chunks
from olas_utils.vocabulary import family_of
from olas_utils.zoo.errors import UnknownModelError
from olas_utils.zoo.folders import read_marker, verify_folder
from olas_utils.zoo.preparation import prepare
from olas_utils.zoo.registry import REGISTRY, ZooEntry, get_entry, zoo_names_text

__all__ = ["LoadedModel", "load_model", "weights_fingerprint"]

#: Files of which a model folder must hold one to carry its own tokenizer (fast, WordPiece,
#: BPE or SentencePiece vocabularies).
TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
)

#: The zoo's one logger, named ``olas_utils.zoo`` as before the package was split.
logger = logging.getLogger("olas_utils.zoo")


@dataclass
class LoadedModel:
    """A loaded model with what OLAS needs to know about it.

    Attributes:
        model: the ``torch.nn.Module`` (eval mode, on its device). Causal models are
            ``AutoModelForCausalLM`` (with their LM head); others are ``AutoModel``.
        tokenizer: its tokenizer. If it had no pad token, the EOS token was set as pad.
        name: zoo short name, or the folder name / hub id.
        source: the folder or hub id it was loaded from.
        is_causal: whether its self-attention is causal (read from the config).
        num_layers: number of transformer layers.
        weights_sha256: the verified SHA-256 of the original weight file (zoo models and
            prepared folders), else None.
        entry: the zoo entry, if it is a zoo model.
        attention: ``"model"``, or ``"uniform"`` for the tokenizer-only control
            (:func:`olas_utils.zoo.controls.uniform_attention_copy`): extraction then runs no
            forward pass and feeds uniform attention to every layer.
    """

    model: Any = field(repr=False)
    tokenizer: Any = field(repr=False)
    name: str
    source: str
    is_causal: bool
    num_layers: int
    weights_sha256: str | None = None
    entry: ZooEntry | None = field(default=None, repr=False)
    attention: str = "model"

    @property
    def family(self) -> str:
        """``"causal"`` or ``"encoder"``, from :attr:`is_causal` (read from the config)."""
        return family_of(self.is_causal)

    @functools.cached_property
    def facts(self):
        """The model's :class:`~olas_utils.capture.facts.ModelFacts` (layers, heads, causality,
        windows, capture path, context-mixing methods), read on first use and kept; the map keys
        it can have: ``lm.facts.map_keys(keys)``."""
        from olas_utils.capture.facts import ModelFacts

        return ModelFacts.of(self.model)

    @property
    def config(self):
        """The model's ``transformers`` config."""
        return self.model.config

    @property
    def device(self) -> torch.device:
        """The device of the model's parameters."""
        return next(self.model.parameters()).device


def _num_layers(config) -> int:
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for attr in ("num_hidden_layers", "n_layer", "num_layers", "n_layers"):
        v = getattr(text, attr, None)
        if isinstance(v, int):
            return v
    raise ValueError(f"cannot tell the number of layers of a {type(config).__name__}")


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub can be asked at all: False with ``HF_HUB_OFFLINE=1`` or
    when its host cannot be reached within ``timeout`` seconds (so an unknown id fails at
    once offline instead of after the hub client's retries); True behind a proxy."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY")):
        return True
    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~", ".\\", os.sep)) or name.endswith(("/", os.sep))


def load_model(
    name_or_path: str | os.PathLike,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
    attn_implementation: str | None = "eager",
    cache_dir: str | os.PathLike | None = None,
    tokenizer: Any = None,
) -> LoadedModel:
    """Load a zoo model, a local folder or a Hugging Face id, ready for attention analysis.

    Zoo short names are prepared first if needed (see :func:`prepare`); later loads read
    the prepared folder and take seconds. A prepared folder (a zoo name's, or a folder with
    an ``olas_prepared.json`` marker) is checked first against the SHA-256s its marker records
    (:func:`olas_utils.zoo.folders.verify_folder`, fast check: a file whose size and time are
    unchanged is not read). The class is ``AutoModelForCausalLM`` when the
    config says decoder-only causal (:func:`is_causal_config`), else ``AutoModel`` (no
    task head).

    Args:
        name_or_path: zoo short name (``"minilm-l6"``), path to a Hugging Face folder,
            or a Hugging Face id (passed to ``from_pretrained`` as is; needs it in the
            local Hugging Face cache or hub access).
        device: device for :func:`olas_utils.infra.settings.resolve_device` (None: ``$OLAS_DEVICE``,
            else CUDA if available, else CPU).
        dtype: parameter dtype (default fp32).
        attn_implementation: passed through to ``from_pretrained`` (default ``"eager"``,
            which OLAS needs for ``output_attentions=True``).
        cache_dir: OLAS cache for zoo models (see :func:`prepare`).
        tokenizer: None (default: the tokenizer files beside the weights), a tokenizer
            object, or a folder / Hugging Face id to load one from (``AutoTokenizer``), for a
            model folder that holds weights only.

    Returns:
        A :class:`LoadedModel` with the model in eval mode on ``device``.

    Raises:
        UnknownModelError: if the name is not a zoo name, not an existing folder, and could
            not be loaded as a Hugging Face id; the message lists the zoo names.
        FileNotFoundError: if a path-like name (``./x``, ``/x``, ``~/x``) does not exist, or a
            model folder has no tokenizer files (:data:`TOKENIZER_FILES`) and no ``tokenizer=``
            is given (else ``transformers`` would build an empty tokenizer of a few special tokens).
        ValueError: for encoder-decoder models.
        ModelNotInstalledError, HashMismatchError: from :func:`prepare` for zoo models.
        DamagedFolderError: a prepared folder's file is missing or changed (names it and the fix).
        UnverifiedFolderError: a folder passed as a path has a marker without per-file hashes
            (older OLAS); the message says how to prepare it again.
        RuntimeError: if CUDA is asked for and not available.
    """
    from transformers import AutoConfig

    dev = settings.resolve_device(device)
    entry: ZooEntry | None = None
    sha: str | None = None
    raw = os.fspath(name_or_path)
    if not isinstance(name_or_path, os.PathLike) and raw in REGISTRY:
        entry = REGISTRY[raw]
        folder = prepare(raw, cache_dir=cache_dir)
        verify_folder(folder, full=False, name=raw)
        source, display = str(folder), raw
        sha = (read_marker(folder) or {}).get("source_sha256")
    elif Path(raw).expanduser().is_dir():
        folder = Path(raw).expanduser().resolve()
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(
                f"model folder {folder} has no config.json, so it is not a Hugging Face model folder (config.json, "
                f"weights, tokenizer files); pass the folder that holds config.json, or a zoo model: "
                f"{zoo_names_text()}."
            )
        source, display = str(folder), folder.name
        marker = read_marker(folder)
        if marker is not None:
            verify_folder(folder, full=False)
            sha = marker.get("source_sha256")
            entry = REGISTRY.get(marker.get("entry", ""))
    elif isinstance(name_or_path, os.PathLike) or _looks_like_path(raw) or Path(raw).expanduser().exists():
        raise FileNotFoundError(
            f"model folder {Path(raw).expanduser()} does not exist (or is not a folder). "
            f"Zoo models: {zoo_names_text()}."
        )
    else:
        close = difflib.get_close_matches(raw, list(REGISTRY), n=3, cutoff=0.75)
        if close and "/" not in raw:
            get_entry(raw)  # raises UnknownModelError with the suggestions, without the hub
        source = display = raw

    try:
        if entry is None and not Path(source).is_dir() and not _hub_reachable():
            config = AutoConfig.from_pretrained(source, local_files_only=True)  # offline: fail at once
        else:
            config = AutoConfig.from_pretrained(source)
    except OSError as e:
        if entry is not None or Path(source).is_dir():
            raise
        raise UnknownModelError(
            f"could not load model {raw!r}: it is not a zoo model, not an existing folder, and the "
            f"Hugging Face id could not be found locally (Hugging Face cache) or fetched from the hub "
            f"({str(e).splitlines()[0] if str(e) else type(e).__name__}). Offline, use a zoo model: "
            f"{zoo_names_text()} (see `python -m olas_utils.zoo list`), or pass a local folder.",
            name=raw,
        ) from e

    causal = is_causal_config(config)  # raises ValueError for encoder-decoder
    folder = Path(source)
    if tokenizer is None and folder.is_dir() and not any((folder / f).is_file() for f in TOKENIZER_FILES):
        raise FileNotFoundError(
            f"model folder {folder}: this folder has no tokenizer files: pass `tokenizer=` (a tokenizer, or the "
            f"folder or Hugging Face id of the model's tokenizer) to load_model, or copy the tokenizer files "
            f"({', '.join(TOKENIZER_FILES[:3])}, ...) into it"
        )
    try:
        model = _load_weights(source, config, causal, dtype, attn_implementation)
    except Exception as e:  # noqa: BLE001 - re-raised unless it is a damaged weight file
        _raise_if_damaged_weights(source, entry, e)
        raise
    model.eval()
    model.to(dev)
    tokenizer = _load_tokenizer(source if tokenizer is None else tokenizer)
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        name=display,
        source=source,
        is_causal=causal,
        num_layers=_num_layers(config),
        weights_sha256=sha,
        entry=entry,
    )


_DAMAGED = (
    "deserializ",
    "incomplete metadata",
    "header too large",
    "invalid header",
    "unexpected eof",
    "pytorchstreamreader failed",
    "failed finding central directory",
    "file not fully covered",
)


def _raise_if_damaged_weights(source: str, entry: ZooEntry | None, error: Exception) -> None:
    """Turn a weight file that cannot be parsed (truncated or damaged ``.safetensors`` /
    ``.bin``) into one ``OSError`` line naming the file and how to get it back."""
    text = str(error).lower()
    if not (type(error).__name__ == "SafetensorError" or any(m in text for m in _DAMAGED)):
        return
    folder = Path(source)
    files = sorted(folder.glob("*.safetensors")) + sorted(folder.glob("pytorch_model*.bin")) if folder.is_dir() else []
    where = ", ".join(str(f) for f in files) or source
    fix = (
        f"run `python -m olas_utils.zoo prepare {entry.name} --force`"
        if entry is not None
        else "copy or download the weights again"
    )
    first = (str(error).splitlines() or [type(error).__name__])[0]
    raise OSError(
        f"the model weights {where} cannot be read: the file is truncated or damaged ({first}); {fix}"
    ) from error


@contextlib.contextmanager
def _quiet_transformers():
    """transformers' load report and weight-loading bar off (:func:`_report_loading` says what matters)."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _report_loading(source: str, info: dict) -> None:
    """One line instead of transformers' load report: weights initialised at random (missing from
    the checkpoint) or of the wrong shape are warned about; checkpoint tensors the model class does
    not use (a task head) are logged at info level."""
    missing, mismatched = list(info.get("missing_keys", ())), list(info.get("mismatched_keys", ()))
    if missing or mismatched:
        names = ", ".join(map(str, (missing + mismatched)[:4])) + (" ..." if len(missing) + len(mismatched) > 4 else "")
        warnings.warn(
            f"{source}: {len(missing)} weight(s) missing from the checkpoint and {len(mismatched)} of the wrong "
            f"shape were initialised at random ({names}); maps of the layers they touch are not what the "
            "checkpoint learned",
            stacklevel=3,
        )
    unexpected = list(info.get("unexpected_keys", ()))
    if unexpected:
        logger.info(
            "%s: %d checkpoint tensor(s) not used by the model class ignored (e.g. %s)",
            source,
            len(unexpected),
            unexpected[0],
        )


def _load_weights(source: str, config, causal: bool, dtype, attn_implementation):
    from transformers import AutoModel, AutoModelForCausalLM

    kwargs: dict[str, Any] = {"config": config, "dtype": dtype, "output_loading_info": True}
    if attn_implementation is not None:
        kwargs["attn_implementation"] = attn_implementation
    if causal:
        try:
            with _quiet_transformers():
                model, info = AutoModelForCausalLM.from_pretrained(source, **kwargs)
            _report_loading(source, info)
            return model
        except ValueError as e:  # causal config without a registered causal-LM class
            if "Unrecognized configuration class" not in str(e):
                raise
            logger.info("%s has no AutoModelForCausalLM class; loading it with AutoModel", source)
    if _lacks_pooler(source, config):
        kwargs["add_pooling_layer"] = False  # else a randomly initialised pooler (unused, but not reproducible)
    with _quiet_transformers():
        model, info = AutoModel.from_pretrained(source, **kwargs)
    _report_loading(source, info)
    return model


def _lacks_pooler(source: str, config) -> bool:
    """Whether ``source`` is a local BERT folder whose ``model.safetensors`` has no pooler
    (the converted encoders and MLM checkpoints such as splade-tiny's)."""
    f = Path(source) / "model.safetensors"
    if getattr(config, "model_type", None) != "bert" or not f.is_file():
        return False
    from safetensors import safe_open

    with safe_open(str(f), framework="pt") as fh:
        return not any(k.endswith("pooler.dense.weight") for k in fh.keys())


def _load_tokenizer(source):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(os.fspath(source)) if isinstance(source, (str, os.PathLike)) else source
    if getattr(tok, "pad_token", None) is None and getattr(tok, "eos_token", None) is not None:
        tok.pad_token = tok.eos_token
    return tok


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

    def chunks():
        for name, t in sorted(loaded.model.state_dict().items()):
            t = t.detach().cpu().contiguous()
            yield f"{name}|{t.dtype}|{tuple(t.shape)}|".encode()
            yield t.view(torch.uint8).numpy().tobytes() if t.numel() else b""

    return "state_dict:" + sha256_chunks(chunks())
