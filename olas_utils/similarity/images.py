"""One sentence's OLA map as a fixed-size, pre-processed image: the cache's protocols.

:func:`to_image` makes every image of the cache; :data:`PROTOCOLS`, :data:`RESIZE` and
:data:`PREPROCESSING` describe it and are recorded in each cache's manifest (a changed
character invalidates every existing cache).

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

Importing this module does no work.
"""

from __future__ import annotations

import torch

__all__ = ["PROTOCOLS", "RESIZE", "PREPROCESSING", "to_image"]


#: Protocol name → extraction level.
PROTOCOLS: dict[str, str] = {"paper": "subword", "word": "word"}


#: How maps are resized (recorded in the manifest).
RESIZE = "torch.nn.functional.interpolate(mode='bilinear', align_corners=False, antialias=True); none if already SxS"


#: The pre-processing (recorded in the manifest).
PREPROCESSING = ("olas_utils.sinks.preprocess: outliers (mean+3sd over valid, lower triangle if causal, "
                 "plus row argmax) zeroed; rows renormalised to 1; causal: lower triangle mirrored")


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
    from olas_utils.sinks import preprocess

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
