"""Multi-process (multi-GPU, multi-node) OLA image extraction with Hugging Face ``accelerate``.

Every process loads the model on its own device, computes its share of the batches of the
full plan into its own shard folder, and the main process merges the shards
deterministically (:func:`olas_utils.similarity.imagecache.merge_shards`): the result equals a
single-process run bit for bit on the same hardware and thread settings. Interrupted
processes resume their shard when launched again.

::

    # 2 CPU processes (on a machine without CUDA, or with OLAS_DEVICE=cpu; accelerate's own
    # --cpu flag would start a single process)
    accelerate launch --multi_gpu --num_processes 2 -m olas_utils.similarity.distributed \\
        --model minilm-l6 --n-chunks 1000
    # all GPUs of one machine
    accelerate launch --multi_gpu --num_processes 8 -m olas_utils.similarity.distributed \\
        --model qwen2.5-0.5b --protocol word
    # two machines (run on each, --machine_rank 0 / 1)
    accelerate launch --multi_gpu --num_machines 2 --machine_rank 0 --main_process_ip HOST \\
        --main_process_port 29500 --num_processes 16 -m olas_utils.similarity.distributed --model qwen2.5-0.5b

On several machines, ``--cache-root`` must be a folder all of them share.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

__all__ = ["extract_distributed", "main"]


def _use_cpu() -> bool:
    """CPU processes when CUDA is absent, or asked for with ``OLAS_DEVICE=cpu`` or
    ``ACCELERATE_USE_CPU=true``."""
    import os

    import torch

    asked = os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true") or os.environ.get("OLAS_DEVICE") == "cpu"
    return asked or not torch.cuda.is_available()


def extract_distributed(
    model: str,
    chunks: Sequence[Sequence[str]],
    settings=None,
    *,
    protocol: str = "paper",
    cache_root=None,
    progress: bool = True,
    **setting_keywords,
):
    """Extract OLA images of ``chunks`` with every process of the current ``accelerate``
    launch (a plain ``python`` run is a launch of one process).

    Args:
        model: zoo name, local folder or Hugging Face id (loaded on each process's device).
        chunks: the corpus (the same on every process).
        settings: a :class:`~olas_utils.similarity.imagecache.CacheSettings`, or its fields as
            keywords (``setting_keywords``).
        protocol, cache_root: as :func:`olas_utils.similarity.imagecache.extract_to_cache`.
        progress: progress bar (main process only).

    Returns:
        The merged :class:`~olas_utils.similarity.imagecache.CachedImages` (on every process, once merged).
    """
    from accelerate import PartialState

    from olas_utils.similarity.imagecache import (
        CachedImages,
        CacheSettings,
        extract_to_cache,
        merge_shards,
        parse_shard_root,
    )
    from olas_utils.zoo import load_model

    settings = CacheSettings.of(settings, **setting_keywords)  # bad settings refused before a model loads
    state = PartialState(cpu=_use_cpu())
    lm = load_model(model, device=state.device)
    n, i = state.num_processes, state.process_index
    shard = extract_to_cache(
        lm,
        chunks,
        protocol=protocol,
        cache_root=cache_root,
        settings=settings,
        shard=(i, n),
        progress=progress and state.is_local_main_process,
    )
    if n == 1:
        return shard
    state.wait_for_everyone()
    if state.is_main_process:
        merged = merge_shards(shard.root, remove_shards=True)
        root = merged.root
    state.wait_for_everyone()
    if not state.is_main_process:
        root = parse_shard_root(shard.root)[0]
    return CachedImages(root)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry for ``accelerate launch -m olas_utils.similarity.distributed``; returns the
    exit code (0 success, 1 failure with a one-line message)."""
    from olas_utils.vocabulary import DEFAULT_BASELINES

    ap = argparse.ArgumentParser(
        prog="olas_utils.similarity.distributed", description="Sharded OLA image extraction (accelerate)."
    )
    ap.add_argument("--model", required=True, help="zoo name, local folder or Hugging Face id")
    ap.add_argument("--corpus", default="conll2003", choices=["conll2003", "ewt"])
    ap.add_argument("--n-chunks", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--orders", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--baselines", nargs="*", default=list(DEFAULT_BASELINES))
    ap.add_argument("--protocol", choices=["paper", "word"], default="paper")
    ap.add_argument("--image-size", type=int, default=50)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument(
        "--cache-root", default=None, help="merged cache folder (default: per settings under the OLAS cache)"
    )
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    try:
        from olas_utils.data.corpus import build_chunks
        from olas_utils.similarity.imagecache import CacheSettings

        settings = CacheSettings(
            orders=args.orders,
            baselines=args.baselines,
            image_size=args.image_size,
            batch_size=args.batch_size,
            seed=args.seed,
        )
        chunks = build_chunks(args.corpus, n_chunks=args.n_chunks, seed=args.seed)
        res = extract_distributed(
            args.model,
            chunks,
            settings,
            protocol=args.protocol,
            cache_root=args.cache_root,
            progress=not args.quiet,
        )
    except Exception as e:  # noqa: BLE001 - one clear line per process
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    from accelerate import PartialState

    if PartialState(cpu=_use_cpu()).is_main_process:
        print(f"merged cache: {res.root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
