"""One sentence's OLA map as a fixed-size, pre-processed image: the cache's protocols.

:func:`to_image` makes every image of the cache; :data:`PROTOCOLS`, :data:`RESIZE` and
:data:`PREPROCESSING` describe it and are recorded in each cache's manifest (a changed
character invalidates every existing cache).

Protocols (images are ``image_size × image_size`` float32), all made from **one** forward
pass per model (:func:`~olas_utils.similarity.imagecache.extract_protocols`):

``"released"`` the authors' released retrieval/classifier pre-processing, reproduced so our
             numbers can be set beside the paper's (``docs/method.md#released-code``): subword level
             with each model's special tokens; the causal flag is never passed, so causal
             maps are treated as bidirectional — outlier statistics over the *whole* row
             (the empty upper triangle included), no symmetrisation; torchvision ``Resize``
             (bilinear, antialias) to S × S; retrieval ties won by the first index
             (:data:`TIES`).
``"paper"``  the paper's method as the paper states it: subword level, each model's own
             special tokens kept (``level="subword"``), causal maps handled as causal
             (steps 1–3 below).
``"word"``   OLAS protocol: word-level maps (``level="word"``, neutral pooling: each key's
             map divided by its value under uniform attention, special tokens dropped, see
             :func:`olas_utils.align.pool_to_words`), so every model has the same W × W grid
             and tokenisation alone leaves no trace; with 50-word chunks and
             ``image_size=50`` no resize happens at all.

Pre-processing of ``"paper"`` and ``"word"``, the same for every key (OLA orders, rollout,
single layers), from ``docs/method.md#sinks-and-pre-processing`` via :func:`olas_utils.maths.sinks.preprocess`:

1. outliers (attention sinks) zeroed: per row, over the valid positions (lower triangle
   for causal models), entries above mean + 3σ plus the row's argmax
   (:func:`olas_utils.maths.sinks.outlier_mask`);
2. every row renormalised to sum 1 (this also makes rollout's scale irrelevant);
3. causal models: the transposed lower triangle is copied into the upper triangle;
4. resize to ``image_size × image_size`` with ``torch.nn.functional.interpolate(x,
   size=(S, S), mode="bilinear", align_corners=False, antialias=True)`` (area-weighted
   when shrinking); skipped when the map already has that size.

Importing this module does no work.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["PROTOCOLS", "TIES", "RESIZE", "PREPROCESSING", "SYMMETRISED", "to_image", "causal_view"]


#: Protocol name → extraction level.
PROTOCOLS: dict[str, str] = {"released": "subword", "paper": "subword", "word": "word"}


#: Protocol name → retrieval tie rule (:func:`olas_utils.similarity.retrieval.true_match_ranks`).
TIES: dict[str, str] = {"released": "first", "paper": "pessimistic", "word": "pessimistic"}


#: The protocols that symmetrise a causal model's map (step 3 below): the ones on which an
#: encoder's image can be put in a causal model's form (:func:`causal_view`).
SYMMETRISED: tuple[str, ...] = ("paper", "word")


#: How maps are resized, per protocol (recorded in the manifest).
RESIZE: dict[str, str] = {
    "released": "torchvision.transforms.v2.functional.resize(BILINEAR, antialias=True) to SxS, always",
    "paper": "torch.nn.functional.interpolate(mode='bilinear', align_corners=False, antialias=True); none if already SxS",
    "word": "torch.nn.functional.interpolate(mode='bilinear', align_corners=False, antialias=True); none if already SxS",
}


_OURS = (
    "olas_utils.maths.sinks.preprocess: outliers (mean+3sd over valid, lower triangle if causal, "
    "plus row argmax) zeroed; rows renormalised to 1; causal: lower triangle mirrored"
)

#: The pre-processing, per protocol (recorded in the manifest).
PREPROCESSING: dict[str, str] = {
    "released": (
        "released code: every map treated as bidirectional: outliers (mean+3sd over the whole row, "
        "plus row argmax) zeroed; rows renormalised to 1; no symmetrisation"
    ),
    "paper": _OURS,
    "word": "word maps pooled with the 'neutral' rule (lift over uniform attention); then " + _OURS,
}


def to_image(m: torch.Tensor, *, causal: bool, image_size: int = 50, protocol: str = "paper") -> torch.Tensor:
    """One sentence's map as a pre-processed ``image_size × image_size`` image.

    ``"paper"``/``"word"``: outliers zeroed, rows renormalised, causal maps symmetrised
    (:func:`olas_utils.maths.sinks.preprocess` with ``remove_sinks=True``), then resized with
    bilinear interpolation, ``align_corners=False``, ``antialias=True`` (no resize if the
    map is already ``image_size`` wide). ``"released"``: the same with ``causal`` ignored
    (outlier statistics over the whole row, no symmetrisation), resized with torchvision.

    Args:
        m: ``(T, T)`` map (any float dtype): subword level for ``"paper"``/``"released"``,
            word level (already pooled) for ``"word"``.
        causal: the model is causal.
        image_size: S.
        protocol: a key of :data:`PROTOCOLS`.

    Returns:
        ``(S, S)`` float32 tensor on the CPU.

    Raises:
        ValueError: if ``m`` is not square 2-D, ``image_size < 1`` or the protocol is unknown.
    """
    from olas_utils.maths.sinks import preprocess

    if m.dim() != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"expected a square (T, T) map, got {tuple(m.shape)}")
    if image_size < 1:
        raise ValueError(f"image_size must be >= 1, got {image_size}")
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {list(PROTOCOLS)}, got {protocol!r}")
    released = protocol == "released"
    x = preprocess(
        m.detach().float().cpu().unsqueeze(0),
        causal=causal and not released,
        remove_sinks=True,
        keep_raw=False,
        renormalize=True,
        symmetrize=not released,
    )
    if released:
        from torchvision.transforms.v2 import InterpolationMode
        from torchvision.transforms.v2.functional import resize

        x = resize(x, [image_size, image_size], interpolation=InterpolationMode.BILINEAR, antialias=True)
    elif x.shape[-1] != image_size:
        x = torch.nn.functional.interpolate(
            x.unsqueeze(0), size=(image_size, image_size), mode="bilinear", align_corners=False, antialias=True
        )[0]
    return x[0].contiguous()


def causal_view(images: np.ndarray) -> np.ndarray:
    """What a causal model could have attended to, from encoders' images: each image's lower
    triangle (diagonal included) with its transpose copied into the upper triangle, the form
    that the :data:`SYMMETRISED` protocols give a causal model's map (step 3 of the module's
    pre-processing). An encoder's image and a causal model's image of the same chunk are then
    compared on the same entries (query attends to an earlier or the same position).

    The view is taken of the finished image: the encoder's rows were renormalised over the whole
    row and (``"paper"``) resized before, so it is not the image of the encoder's map masked to
    its lower triangle before pre-processing; for the ``"word"`` protocol with 50-word chunks and
    50-pixel images nothing is resized and the lower triangle is exactly the map's. A causal
    model's own image of these protocols is left unchanged (it is already symmetric).

    Args:
        images: ``(..., S, S)`` array.

    Returns:
        A new float array of the same shape, symmetric in its last two axes.

    Raises:
        ValueError: if the last two axes are not square.
    """
    x = np.asarray(images)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"expected (..., S, S) images, got shape {x.shape}")
    return np.tril(x) + np.swapaxes(np.tril(x, -1), -1, -2)
