"""One sentence's OLA map as a fixed-size, pre-processed image: the cache's protocols.

:func:`to_image` makes every image of the cache; :data:`PROTOCOLS`, :data:`RESIZE` and
:data:`PREPROCESSING` describe it and are recorded in each cache's manifest (a changed
character invalidates every existing cache). Protocols ``"released"``, ``"paper"``, ``"word"``
(``docs/method.md#protocols``); pre-processing :func:`olas_utils.maths.sinks.preprocess`
(``docs/method.md#sinks-and-pre-processing``): outliers above mean + 3σ and the row's argmax
zeroed, rows renormalised, causal maps symmetrised, then a bilinear antialiased resize to
``image_size × image_size``.

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

    ``"paper"``/``"word"``: :func:`olas_utils.maths.sinks.preprocess` (``remove_sinks=True``), then
    ``interpolate(..., mode="bilinear", align_corners=False, antialias=True)`` unless already
    ``image_size`` wide; ``"released"``: ``causal`` ignored, torchvision's resize
    (``docs/method.md#protocols``).

    Args:
        m: ``(query, key)`` map (any float dtype): subword level for ``"paper"``/``"released"``,
            word level (already pooled) for ``"word"``.
        causal: the model is causal.
        image_size: S.
        protocol: a key of :data:`PROTOCOLS`.

    Returns:
        ``(image_size, image_size)`` float32 tensor on the CPU.

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
    """What a causal model could have attended to, from encoders' finished images:
    ``M[i, j] = I[max(i, j), min(i, j)]``, the form the :data:`SYMMETRISED` protocols give a causal
    model's map (``docs/method.md#across-the-families``); a causal model's image is unchanged.

    Args:
        images: ``(..., query, key)`` array.

    Returns:
        A new float array of the same shape, symmetric in its last two axes.

    Raises:
        ValueError: if the last two axes are not square.
    """
    x = np.asarray(images)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"expected (..., S, S) images, got shape {x.shape}")
    return np.tril(x) + np.swapaxes(np.tril(x, -1), -1, -2)
