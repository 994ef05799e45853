"""OLAS: Order-Level Attention analysis across language models.

The front door::

    from olas_utils import load_model, extract_ola, OLAMaps

    lm = load_model("minilm-l6")                      # zoo name, local folder or Hugging Face id
    maps = extract_ola(lm, ["The cat sat.", ["A", "dog", "."]], orders=(1, 2))  # raw text or word lists
    maps["ola:1"][0]                                  # (T, T) order-1 OLA of sentence 0
    values, mask = maps.to_numpy("ola:1")             # (B, T_max, T_max) zero-padded, (B, T_max) mask
    maps.plot("ola:2", sentence=[0, 1], shared_scale=True)   # a matplotlib figure

Importing the package does no work: the names above are loaded on first use (PEP 562);
subpackages are imported explicitly (``from olas_utils.zoo import ...``). The package is laid
out in wings by layer (``infra``, ``maths``, ``stats``, ``capture``, this face, then ``data``,
``zoo``, ``similarity``/``toa``, ``studies``, ``ui``); ``docs/architecture.md`` is the one
description of the layers, and ``tests/project/test_architecture.py`` enforces it.
"""

__version__ = "0.1.0"

#: public name -> module that defines it (loaded on first access)
_FRONT_DOOR = {
    "load_model": "olas_utils.zoo",
    "LoadedModel": "olas_utils.zoo",
    "extract_ola": "olas_utils.extract",
    "OLAMaps": "olas_utils.extract",
}

__all__ = ["__version__", *_FRONT_DOOR]


def __getattr__(name: str):
    """Load a front-door name (``load_model``, ``extract_ola``, ``OLAMaps``, ...) on first use."""
    if name in _FRONT_DOOR:
        import importlib

        value = getattr(importlib.import_module(_FRONT_DOOR[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'olas_utils' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_FRONT_DOOR))
