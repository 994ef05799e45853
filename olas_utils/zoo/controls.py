"""Negative controls: model copies that keep the architecture and tokenizer but not the learned
computation, for the similarity experiment (``docs/method.md#controls``) and the TOA's random-init target.

Makers (:data:`CONTROLS`, keyed by :class:`olas_utils.vocabulary.Control`):
:func:`random_weights_copy`, :func:`shuffled_layers_copy`, :func:`half_random_copy`,
:func:`uniform_attention_copy`. Each returns a new :class:`~olas_utils.zoo.LoadedModel` (the
original is never modified) whose ``name`` says what was done (``"qwen2.5-0.5b+shuffled(seed=0)"``),
so cached extractions of a control never collide with the real model's. How a layer shuffle
keeps layer types and the KV cache consistent: ``docs/method.md#controls``.

Importing this module does no work.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Sequence

import torch
from torch import nn

from olas_utils.vocabulary import Control

__all__ = [
    "layer_permutation",
    "find_layer_list",
    "permute_layers",
    "shuffled_layers_copy",
    "random_weights_copy",
    "half_random_layers",
    "half_random_copy",
    "uniform_attention_copy",
    "CONTROLS",
    "make_control",
    "control_identity",
]


def layer_permutation(num_layers: int, seed: int = 0) -> tuple[int, ...]:
    """The fixed, seeded layer order used by :func:`shuffled_layers_copy`.

    ``perm[i]`` is the original index of the layer run at position ``i``; ``torch.randperm``
    from a private generator seeded with ``seed``, an identity draw redrawn when
    ``num_layers >= 2``.

    Args:
        num_layers: N, number of layers (>= 1).
        seed: the seed.

    Returns:
        A permutation of ``range(num_layers)`` as a tuple of ints.

    Raises:
        ValueError: if ``num_layers < 1``.
    """
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    gen = torch.Generator().manual_seed(int(seed))
    identity = tuple(range(num_layers))
    while True:
        perm = tuple(int(i) for i in torch.randperm(num_layers, generator=gen))
        if perm != identity or num_layers == 1:
            return perm


def find_layer_list(model: nn.Module, num_layers: int) -> tuple[str, nn.ModuleList]:
    """The ``nn.ModuleList`` that holds a model's transformer layers.

    Among the ``nn.ModuleList`` submodules of length ``num_layers``, the one with the most
    parameters (``encoder.layer`` of BERT, ``model.layers`` of Llama).

    Args:
        model: a ``torch.nn.Module``.
        num_layers: N, the model's number of transformer layers.

    Returns:
        ``(qualified name, module list)``.

    Raises:
        ValueError: if no ModuleList has length ``num_layers``, or if two of them tie for
            the most parameters (ambiguous).
    """
    cands = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.ModuleList) and len(m) == num_layers]
    if not cands:
        raise ValueError(
            f"{type(model).__name__} has no nn.ModuleList of length {num_layers} "
            "(the number of layers); cannot find its transformer layers"
        )
    sizes = [sum(p.numel() for p in m.parameters()) for _, m in cands]
    best = max(sizes)
    winners = [c for c, s in zip(cands, sizes) if s == best]
    if len(winners) > 1:
        raise ValueError(
            f"ambiguous layer list in {type(model).__name__}: "
            f"{[n for n, _ in winners]} all have length {num_layers} and {best} parameters"
        )
    return winners[0]


def _configs(model: nn.Module) -> list:
    cfg = getattr(model, "config", None)
    if cfg is None:
        return []
    out = [cfg]
    if hasattr(cfg, "get_text_config"):
        text = cfg.get_text_config()
        if text is not cfg:
            out.append(text)
    return out


def permute_layers(loaded, perm: Sequence[int], *, name: str | None = None):
    """A deep copy of a loaded model whose transformer layers run in the order ``perm``.

    Position ``i`` of the copy runs the original layer ``perm[i]``; ``config.layer_types`` and
    every ``layer_idx`` are permuted with it (``docs/method.md#controls``). The copy's
    ``model.olas_layer_permutation`` is relative to the unpermuted model.

    Args:
        loaded: a :class:`~olas_utils.zoo.LoadedModel`.
        perm: a permutation of ``range(loaded.num_layers)``.
        name: the copy's name; default ``"<name>+permuted(<perm>)"``.

    Returns:
        A new :class:`~olas_utils.zoo.LoadedModel` (same tokenizer object, eval mode, same
        device and dtype, ``weights_sha256=None``).

    Raises:
        ValueError: if ``perm`` is not a permutation of ``range(N)``, or the layer list
            cannot be found (:func:`find_layer_list`).
    """
    n = loaded.num_layers
    perm = tuple(int(p) for p in perm)
    if sorted(perm) != list(range(n)):
        raise ValueError(f"perm must be a permutation of range({n}), got {perm}")
    find_layer_list(loaded.model, n)  # fail before copying a large model
    model = copy.deepcopy(loaded.model)
    _, layers = find_layer_list(model, n)
    old = list(layers)
    for new_pos, old_pos in enumerate(perm):
        layers[new_pos] = old[old_pos]
    for new_pos, layer in enumerate(layers):
        for m in layer.modules():
            if isinstance(getattr(m, "layer_idx", None), int) and not isinstance(m.layer_idx, bool):
                m.layer_idx = new_pos
    seen: set[int] = set()
    for cfg in _configs(model):
        if id(cfg) in seen:
            continue
        seen.add(id(cfg))
        types = getattr(cfg, "layer_types", None)
        if isinstance(types, (list, tuple)) and len(types) == n:
            cfg.layer_types = [types[p] for p in perm]
    before = getattr(loaded.model, "olas_layer_permutation", None) or tuple(range(n))
    model.olas_layer_permutation = tuple(before[p] for p in perm)
    model.eval()
    if name is None:
        name = f"{loaded.name}+permuted({','.join(map(str, perm))})"
    return dataclasses.replace(loaded, model=model, name=name, weights_sha256=None)


def shuffled_layers_copy(loaded, seed: int = 0):
    """Layer-shuffle control: the same trained weights, layers run in a seeded random order.

    The permutation is :func:`layer_permutation` ``(loaded.num_layers, seed)``, applied by
    :func:`permute_layers` (``docs/method.md#controls``).

    Args:
        loaded: a :class:`~olas_utils.zoo.LoadedModel` (not modified).
        seed: seed of the permutation.

    Returns:
        A new :class:`~olas_utils.zoo.LoadedModel` named ``"<name>+shuffled(seed=<seed>)"``
        (e.g. ``"qwen2.5-0.5b+shuffled(seed=0)"``); the permutation itself is in
        ``.model.olas_layer_permutation``; ``weights_sha256`` is
        ``"<parent hash>+shuffled(seed=<seed>)"`` (None if the parent has no pinned hash).
        The copy needs as much memory as the original.

    Raises:
        ValueError: if the model's layer list cannot be found.
    """
    perm = layer_permutation(loaded.num_layers, seed)
    out = permute_layers(loaded, perm, name=_copy_name(loaded, Control.SHUFFLED_LAYERS, seed))
    return dataclasses.replace(out, weights_sha256=_derived(loaded, Control.SHUFFLED_LAYERS, seed))


def random_weights_copy(loaded, seed: int = 0):
    """Random-weights control: same config and tokenizer, randomly initialised weights (the
    one function that builds a randomly initialised copy).

    ``transformers``' ``from_config`` initialisation under ``torch.manual_seed(seed)`` in a
    forked RNG (the global RNG is untouched).

    Args:
        loaded: a :class:`~olas_utils.zoo.LoadedModel` (not modified).
        seed: initialisation seed.

    Returns:
        A new :class:`~olas_utils.zoo.LoadedModel` named ``"<name>+random(seed=<seed>)"``,
        eval mode, same device and dtype, with ``weights_sha256`` =
        ``"<parent hash>+random(seed=<seed>)"`` (None if the parent has no pinned hash:
        then caches hash the state dict).
    """
    from transformers import AutoModel, AutoModelForCausalLM

    cls = AutoModelForCausalLM if loaded.is_causal else AutoModel
    p = next(loaded.model.parameters())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            model = cls.from_config(loaded.model.config, dtype=p.dtype)
        except ValueError:
            model = AutoModel.from_config(loaded.model.config, dtype=p.dtype)
    model.eval().to(p.device)
    return dataclasses.replace(
        loaded,
        model=model,
        name=_copy_name(loaded, Control.RANDOM_WEIGHTS, seed),
        weights_sha256=_derived(loaded, Control.RANDOM_WEIGHTS, seed),
    )


def half_random_layers(num_layers: int, seed: int = 0) -> tuple[int, ...]:
    """The layers :func:`half_random_copy` re-initialises: ``num_layers // 2`` of ``range(num_layers)``
    (at least one), drawn with ``torch.randperm`` from a private generator seeded with ``seed``, sorted.

    Raises:
        ValueError: if ``num_layers < 1``.
    """
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    gen = torch.Generator().manual_seed(int(seed))
    return tuple(sorted(int(i) for i in torch.randperm(num_layers, generator=gen)[: max(1, num_layers // 2)]))


def half_random_copy(loaded, seed: int = 0):
    """Half-random control (the paper's "half-random weights"): the trained model with half of its
    transformer layers randomly re-initialised, everything else (embeddings, the other layers, final
    norm) trained.

    The layers :func:`half_random_layers` ``(loaded.num_layers, seed)`` take the weights of
    :func:`random_weights_copy` ``(loaded, seed)`` at the same positions (``docs/method.md#controls``).

    Args:
        loaded: a :class:`~olas_utils.zoo.LoadedModel` (not modified).
        seed: seed of the choice of layers and of their initialisation.

    Returns:
        A new :class:`~olas_utils.zoo.LoadedModel` named ``"<name>+half-random(seed=<seed>)"``, eval
        mode, same device and dtype; the re-initialised layers in ``.model.olas_reinitialised_layers``;
        ``weights_sha256`` = ``"<parent hash>+half-random(seed=<seed>)"`` (None if the parent has none).
        Building it needs the memory of two more copies of the model for a moment.

    Raises:
        ValueError: if the model's layer list cannot be found (:func:`find_layer_list`).
    """
    n = loaded.num_layers
    find_layer_list(loaded.model, n)  # fail before copying a large model
    chosen = half_random_layers(n, seed)
    model = copy.deepcopy(loaded.model)
    _, layers = find_layer_list(model, n)
    random = random_weights_copy(loaded, seed).model
    _, random_layers = find_layer_list(random, n)
    with torch.no_grad():
        for i in chosen:
            layers[i].load_state_dict(random_layers[i].state_dict())
    del random, random_layers
    model.olas_reinitialised_layers = chosen
    model.eval()
    return dataclasses.replace(
        loaded,
        model=model,
        name=_copy_name(loaded, Control.HALF_RANDOM, seed),
        weights_sha256=_derived(loaded, Control.HALF_RANDOM, seed),
    )


#: The weight hash of the tokenizer-only control (no weights are used).
_UNIFORM_WEIGHTS = "uniform-attention"


def uniform_attention_copy(loaded, seed: int = 0):
    """Tokenizer-only control: uniform attention in every layer, no forward pass.

    Shares ``loaded``'s model object (for its config only) and tokenizer, with
    ``attention="uniform"`` (honoured by :func:`olas_utils.extract.extract_ola` and the image cache).

    Args:
        loaded: a :class:`~olas_utils.zoo.LoadedModel` (not modified).
        seed: unused (uniform attention has no randomness); accepted so that every
            control has the same signature.

    Returns:
        A :class:`~olas_utils.zoo.LoadedModel` named ``"<name>+uniform"`` with
        ``weights_sha256="uniform-attention"``.
    """
    return dataclasses.replace(
        loaded,
        name=_copy_name(loaded, Control.TOKENIZER_ONLY, seed),
        weights_sha256=_UNIFORM_WEIGHTS,
        attention="uniform",
    )


#: Model-copy controls (:class:`~olas_utils.vocabulary.Control`) → maker ``(loaded, seed) -> LoadedModel``.
CONTROLS = {
    Control.RANDOM_WEIGHTS: random_weights_copy,
    Control.SHUFFLED_LAYERS: shuffled_layers_copy,
    Control.TOKENIZER_ONLY: uniform_attention_copy,
    Control.HALF_RANDOM: half_random_copy,
}


def _copy_name(loaded, control: Control, seed: int) -> str:
    """A control copy's name: its parent's and :meth:`Control.copy_suffix` (feeds cache keys)."""
    return f"{loaded.name}{control.copy_suffix(seed)}"


def _derived(loaded, control: Control, seed: int) -> str | None:
    """A control copy's weight identity, derived from its parent's pinned hash without hashing
    the copy (``docs/method.md#controls``); None (hash the state dict) when it has none."""
    sha = getattr(loaded, "weights_sha256", None)
    return f"{sha}{control.copy_suffix(seed)}" if sha else None


def make_control(loaded, control, seed: int = 0):
    """The control copy of ``loaded`` (``control``: a :class:`~olas_utils.vocabulary.Control`
    of :data:`CONTROLS` or its identifier); :attr:`Control.TRAINED` returns ``loaded`` itself.

    Raises:
        ValueError: on a control that is not a model copy.
    """
    control = _model_control(control)
    return loaded if control is Control.TRAINED else CONTROLS[control](loaded, seed)


def _model_control(control) -> Control:
    control = Control.parse(control)
    if control is not Control.TRAINED and control not in CONTROLS:
        raise ValueError(
            f"{control.ident!r} is not a model-copy control; use one of {sorted(c.ident for c in CONTROLS)}"
        )
    return control


def control_identity(loaded, control, seed: int = 0):
    """What a control copy *would* be called and fingerprinted, without building it.

    The result shares ``loaded``'s model object: use it only to look a cache up
    (:func:`olas_utils.similarity.imagecache.cache_complete`), never to extract.

    Args:
        loaded: the trained :class:`~olas_utils.zoo.LoadedModel`.
        control: a key of :data:`CONTROLS` (or its identifier).
        seed: the control's seed.

    Returns:
        A :class:`~olas_utils.zoo.LoadedModel` with the copy's ``name`` and
        ``weights_sha256``, or None when the copy's identity cannot be known in advance
        (the parent has no pinned weight hash).

    Raises:
        ValueError: on an unknown control.
    """
    control = _model_control(control)
    if control is Control.TRAINED:
        raise ValueError(f"the trained model is not a control copy; use one of {sorted(c.ident for c in CONTROLS)}")
    if control is Control.TOKENIZER_ONLY:
        return uniform_attention_copy(loaded, seed)
    sha = _derived(loaded, control, seed)
    if sha is None:
        return None
    return dataclasses.replace(loaded, name=_copy_name(loaded, control, seed), weights_sha256=sha)
