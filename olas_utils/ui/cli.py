"""The ``olas`` command line.

::

    olas models                         # the zoo: installed, prepared, hash ok
    olas extract -m minilm-l6 -i sentences.txt -o maps.pt --orders 1 2 3 --level word
    olas extract -m minilm-l6 -i sentences.txt -o maps.pt --mixing alti valuenorm:2 --npz   # + maps.npz
    olas similarity --models minilm-l6 mpnet-base -i sentences.txt --order 1 --metric ssim
    olas similarity --models smollm2-135m qwen2.5-0.5b --dataset conll2003 --n 200 --out hits.csv
    olas reproduce --profile quick --only 01

Exit codes: 0 success, 1 a failure with a one-line ``error:`` message (``OLAS_DEBUG=1``
for the traceback), 2 bad usage (argparse, or an invalid value or combination of options,
in every subcommand). Errors about a sentence of an input file give its 1-based line.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from olas_utils.ui.reproduce import PROFILES as REPRODUCE_PROFILES
from olas_utils.ui.reproduce import add_folder_arguments
from olas_utils.ui.sentences import read_sentences, with_lines

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["main", "read_sentences", "build_parser", "similarity_table"]


def _cmd_models(args) -> int:
    from olas_utils import zoo

    return zoo.main(["list"] + (["--no-verify"] if args.no_verify else []))


def _cmd_extract(args) -> int:
    from olas_utils.extract import extract_ola
    from olas_utils.zoo import load_model

    sentences = read_sentences(args.input)
    if Path(args.output).is_dir():
        raise IsADirectoryError(
            f"output {args.output} is a directory; give a file name, e.g. {Path(args.output) / 'maps.pt'}"
        )
    lm = load_model(args.model, device=args.device)
    try:
        res = extract_ola(
            lm.model,
            lm.tokenizer,
            sentences,
            orders=args.orders,
            rollout=not args.no_rollout,
            level=args.level,
            batch_size=args.batch_size,
            progress=not args.quiet,
            model_name=lm.name,
            truncation=args.truncation,
            pooling=args.pooling,
            mixing=tuple(args.mixing),
        )
    except (ValueError, TypeError) as e:
        raise with_lines(e, sentences) from None
    out = res.save(args.output)
    print(f"wrote {len(res)} sentences × {len(res.keys())} maps ({', '.join(res.keys())}) to {out}")
    if args.npz:
        print(
            f"wrote the same maps, padded, with their mask and labels to {res.save_npz(Path(out).with_suffix('.npz'))}"
        )
    return 0


def similarity_table(
    models: Sequence[str],
    sentences: Sequence[Sequence[str]],
    *,
    orders: Sequence[int] = (1,),
    metric: str = "ssim",
    level: str = "subword",
    image_size: int = 50,
    batch_size: int = 8,
    device=None,
    truncation: str = "error",
    pooling: str | None = None,
    progress: bool = True,
) -> "pd.DataFrame":
    """Cross-model retrieval (Hit@1, Hit@5) between the OLA of two or more models on the
    same sentences — the paper's test (notebook 02) on any sentences, in memory.

    Each model is loaded once (:func:`olas_utils.zoo.load_model`) and released; its maps
    (:func:`olas_utils.extract.extract_ola`) become ``image_size × image_size`` images with
    notebook 02's pre-processing — its ``"paper"`` protocol at subword level, ``"word"`` at
    word level (:func:`olas_utils.similarity.images.to_image`: sinks zeroed, rows
    renormalised, causal maps symmetrised, bilinear resize) — and every ordered model pair
    is scored by notebook 02's retrieval, :func:`olas_utils.similarity.retrieval_table`
    with the protocol's tie rule (:data:`olas_utils.similarity.images.TIES`): image *i* of
    the target queries all images of the source, a hit is the source's image *i* in the
    top *k*. Unlike notebook 02, nothing is cached and models of different families are
    compared too.

    Args:
        models: two or more zoo names / folders / Hugging Face ids.
        sentences: n ≥ 2 sentences, each a list of words.
        orders: OLA orders, one table block per order (each in ``0..N`` for every model).
        metric: ``"ssim"`` (paper) or ``"pearson"``.
        level: ``"subword"`` (the paper's protocol) or ``"word"`` (OLAS protocol).
        image_size: S, pixels per side (SSIM's 11 × 11 window needs S ≥ 6).
        batch_size, device, truncation, pooling: passed to :func:`~olas_utils.extract.extract_ola`
            (``pooling``: word level only, ``"neutral"`` (None: the default) or ``"clark"``;
            a pooling with ``level="subword"`` is a ``ValueError``).
        progress: progress bars.

    Returns:
        A DataFrame, one row per (order, target, source): ``key, level, metric, target,
        source, target_family, source_family, n, hit@1, hit@5, chance@1`` (hits as
        fractions; chance ``1/n``).

    Raises:
        ValueError: fewer than two models or sentences, duplicate models, an unknown metric
            or level, an image size too small for SSIM, an order out of range, or a bad
            sentence (see :func:`~olas_utils.extract.extract_ola`).
    """
    import gc

    import numpy as np
    import pandas as pd
    import torch

    from olas_utils.extract import extract_ola
    from olas_utils.infra.progress import tqdm
    from olas_utils.similarity.images import TIES, to_image
    from olas_utils.similarity.retrieval import check_metric, retrieval_table
    from olas_utils.vocabulary import MapKey, family_of
    from olas_utils.zoo import load_model

    models = list(models)
    if len(models) < 2 or len(set(models)) != len(models):
        raise ValueError(f"need two or more different models, got {models}")
    if len(sentences) < 2:
        raise ValueError(f"retrieval needs at least 2 sentences, got {len(sentences)}")
    check_metric(metric)  # before any model is loaded
    if level not in ("subword", "word"):
        raise ValueError(f"level must be 'subword' or 'word', got {level!r}")
    if image_size < 1 or (metric == "ssim" and image_size < 6):
        raise ValueError(
            f"image size {image_size} is too small"
            + (" for SSIM's 11x11 window (use >= 6)" if metric == "ssim" else "")
        )
    protocol = "word" if level == "word" else "paper"  # notebook 02's protocol at this level
    keys = [str(MapKey.ola(int(k))) for k in orders]
    images: dict[str, dict[str, np.ndarray]] = {k: {} for k in keys}
    families: dict[str, str] = {}
    for name in tqdm(models, desc="models", disable=not progress, unit="model"):
        lm = load_model(name, device=device)
        maps = extract_ola(
            lm.model,
            lm.tokenizer,
            sentences,
            orders=orders,
            rollout=False,
            layers=(),
            level=level,
            batch_size=batch_size,
            progress=progress,
            model_name=name,
            truncation=truncation,
            pooling=pooling,
        )
        families[name] = family_of(maps.is_causal)  # as the maps were made (checked on them)
        for key in keys:
            images[key][name] = torch.stack(
                [to_image(m, causal=maps.is_causal, image_size=image_size, protocol=protocol) for m in maps[key]]
            ).numpy()
        del lm, maps
        gc.collect()
    rows = []
    for key in keys:
        for r in retrieval_table(images[key], metric=metric, ks=(1, 5), ties=TIES[protocol], progress=progress):
            rows.append(
                {
                    "key": key,
                    "level": level,
                    "metric": metric,
                    "target": r["target"],
                    "source": r["source"],
                    "target_family": families[r["target"]],
                    "source_family": families[r["source"]],
                    "n": r["n"],
                    "hit@1": r["hit@1"],
                    "hit@5": r["hit@5"],
                    "chance@1": 1.0 / r["n"],
                }
            )
    return pd.DataFrame(rows)


def _similarity_sentences(args) -> list[list[str]]:
    if args.input is not None:
        return read_sentences(args.input)
    from olas_utils.data.corpus import build_chunks

    return build_chunks(args.dataset, n_chunks=args.n, chunk_words=args.chunk_words, seed=args.seed)


def _cmd_similarity(args) -> int:
    sentences = _similarity_sentences(args)
    try:
        table = similarity_table(
            args.models,
            sentences,
            orders=args.order,
            metric=args.metric,
            level=args.level,
            image_size=args.size,
            batch_size=args.batch_size,
            device=args.device,
            truncation=args.truncation,
            progress=not args.quiet,
            pooling=args.pooling,
        )
    except (ValueError, TypeError) as e:
        raise with_lines(e, sentences) from None
    if table["hit@5"].isna().any():
        n = int(table["n"].min())
        print(
            f"note: hit@5 is NaN: with {n} sentences every true match is in the top 5, so Hit@5 would read 1.000 "
            "whatever the maps; use more than 5 sentences",
            file=sys.stderr,
        )
    if table["target_family"].ne(table["source_family"]).any():
        print("note: encoders and causal LMs are mixed; the paper compares models within a family", file=sys.stderr)
    shown = table[["key", "target", "source", "n", "hit@1", "hit@5", "chance@1"]]
    print(
        f"Cross-model retrieval by {args.metric.upper()} on {len(sentences)} sentences "
        f"({args.level} level, {args.size}x{args.size} images); Hit@k as fractions:"
    )
    print(shown.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(out, index=False, float_format="%.4f")
        print(f"wrote {len(table)} rows to {out}")
    return 0


def _check_similarity(parser: argparse.ArgumentParser, args) -> None:
    if args.input is not None and args.n is not None:
        parser.error("--n goes with --dataset (a text file is used whole)")
    if args.dataset is not None and args.n is None:
        args.n = 200
    if args.n is not None and args.n < 2:
        parser.error(f"--n must be at least 2 (retrieval ranks sentences against each other), got {args.n}")
    if len(args.models) < 2 or len(set(args.models)) != len(args.models):
        parser.error(f"--models needs two or more different models, got {' '.join(args.models)}")
    if any(not m.strip() for m in args.models):
        parser.error(f"--models holds an empty name {args.models}; give zoo names, model folders or Hugging Face ids")
    _check_output(parser, "--out", args.out, [args.input], args.overwrite)
    if any(k < 1 for k in args.order):
        parser.error(
            f"--order values must be >= 1, got {args.order}: order 0 is the identity map, the same for every "
            "model, so its retrieval would measure nothing but sentence lengths"
        )
    if args.size < 2 or (args.metric == "ssim" and args.size < 6):
        parser.error(
            f"--size {args.size} is too small"
            + (
                " for SSIM's 11x11 window (use 6 or more)"
                if args.metric == "ssim"
                else " for pearson: a 1x1 image has no variance, so every correlation is undefined (use 2 or more)"
            )
        )
    _check_pooling(parser, args)
    if args.batch_size < 1:
        parser.error(f"--batch-size must be >= 1, got {args.batch_size}")


def _check_pooling(parser: argparse.ArgumentParser, args) -> None:
    if args.pooling is not None and args.level != "word":
        parser.error(
            f"--pooling {args.pooling} applies at word level only (subword maps are not pooled); "
            f"add --level word, or drop --pooling"
        )


def _check_output(parser: argparse.ArgumentParser, flag: str, out: str | None, inputs, overwrite: bool) -> None:
    """Refuse, before any work, an output file that would destroy what the user owns: an input
    file, a folder, a path below a file, or an existing file without ``--overwrite``."""
    if out is None:
        return
    if not out.strip():
        parser.error(f"{flag} is empty; give a file name")
    path = Path(out).expanduser()
    for src in inputs:
        if src is None:
            continue
        same = Path(src).expanduser().resolve() == path.resolve()
        try:
            same = same or (path.exists() and Path(src).exists() and path.samefile(src))
        except OSError:
            pass
        if same:
            parser.error(
                f"{flag} {out} is the input file {src}: writing there would overwrite its sentences; "
                "choose another output file"
            )
    if path.is_dir():
        parser.error(f"{flag} {out} is a folder; give a file name, e.g. {path / 'out'}")
    above = next((p for p in path.parents if p.exists()), None)
    if above is not None and not above.is_dir():
        parser.error(f"{flag} {out} lies below {above}, which is a file, not a folder; choose another output path")
    if path.exists() and not overwrite:
        parser.error(f"{flag} {out} already exists; pass --overwrite to replace it, or choose another file name")


def _check_extract(parser: argparse.ArgumentParser, args) -> None:
    if not args.model.strip():
        parser.error("-m/--model is empty; give a zoo name (see `olas models`), a model folder or a Hugging Face id")
    _check_output(parser, "-o/--output", args.output, [args.input], args.overwrite)
    if args.npz:
        npz = Path(args.output).with_suffix(".npz")
        if npz == Path(args.output):
            parser.error(f"--npz writes {npz} beside the output, which is that file; name the output .pt")
        _check_output(parser, "--npz", str(npz), [args.input], args.overwrite)
    _check_pooling(parser, args)
    if args.mixing:
        from olas_utils.vocabulary import MapKey

        for key in args.mixing:
            try:
                ok = MapKey.parse(key).on_request
            except ValueError:
                ok = False
            if not ok:
                parser.error(
                    f"--mixing {key!r} is not a context-mixing key: give valuenorm, alti, globenc (each also with "
                    "an order, e.g. alti:2) or flow"
                )
    if any(k < 0 for k in args.orders):
        parser.error(f"--orders values must be >= 0, got {args.orders}")
    if args.batch_size < 1:
        parser.error(f"--batch-size must be >= 1, got {args.batch_size}")


def _check_reproduce(parser: argparse.ArgumentParser, args) -> None:
    if args.only is not None:
        from olas_utils.ui.reproduce import list_notebooks

        names = [b.name for b in list_notebooks()]
        if any(not o.strip() for o in args.only):
            parser.error(
                f"--only {args.only} holds an empty name, which would match every notebook; give prefixes such as 01"
            )
        bad = [o for o in args.only if not any(n.startswith(o) or Path(n).stem == o for n in names)]
        if bad:
            parser.error(f"--only {' '.join(bad)} matches no notebook; have {', '.join(names)}")


def _cmd_reproduce(args) -> int:
    from olas_utils.ui.reproduce import reproduce

    reproduce(
        args.profile,
        args.only,
        args.executed_dir,
        results_dir=args.results_dir,
        figures_dir=args.figures_dir,
        refresh_committed=args.refresh_committed,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``olas`` (exposed for documentation and tests)."""
    ap = argparse.ArgumentParser(
        prog="olas", description="Order-Level Attention (OLA) analysis across language models."
    )
    from olas_utils import __version__

    ap.add_argument("--version", action="version", version=f"olas {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("models", help="list the offline model zoo with its status")
    p.add_argument("--no-verify", action="store_true", help="skip re-hashing the installed weights")
    p.set_defaults(func=_cmd_models)

    p = sub.add_parser("extract", help="extract OLA for sentences in a text file")
    p.add_argument("-m", "--model", required=True, help="zoo name, local folder or Hugging Face id")
    p.add_argument("-i", "--input", required=True, help="text file, one sentence per line, words separated by spaces")
    p.add_argument("-o", "--output", required=True, help="where to write the maps (.pt, read with OLAMaps.load)")
    p.add_argument("--orders", type=int, nargs="+", default=[1, 2, 3], help="OLA orders (default 1 2 3)")
    p.add_argument("--level", choices=["subword", "word"], default="subword")
    p.add_argument(
        "--pooling",
        choices=["neutral", "clark"],
        default=None,
        help="word level: neutral (default; lift over uniform attention) or clark (rows averaged, "
        "columns summed; confounded across tokenizers)",
    )
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: CUDA if available)")
    p.add_argument("--no-rollout", action="store_true", help="skip attention rollout")
    p.add_argument(
        "--mixing",
        nargs="+",
        default=[],
        metavar="KEY",
        help="context-mixing keys from the same forward pass: valuenorm, alti, globenc (post-LN encoders), each "
        "also with an order (alti:2), and flow (attention flow; slow)",
    )
    p.add_argument(
        "--npz",
        action="store_true",
        help="also write the maps beside the output as NumPy .npz (same name, .npz: one padded (B, L, L) array "
        "per key, mask, labels; numpy.load reads it)",
    )
    p.add_argument(
        "--truncation",
        choices=["error", "warn"],
        default="error",
        help="a sentence longer than the model's maximum: error (default) or cut it at a word boundary with a warning",
    )
    p.add_argument("--overwrite", action="store_true", help="replace the output file if it exists")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_extract, check=_check_extract)

    p = sub.add_parser(
        "similarity",
        help="cross-model retrieval (Hit@1/Hit@5) between the OLA of two or more models",
        description=textwrap.fill(
            "Cross-model retrieval as in the paper: each model's order-k OLA of every sentence becomes an image "
            "(sinks removed, rows renormalised, causal maps symmetrised, resized to SIZE x SIZE); for each ordered "
            "pair of models, each target image is matched against all source images by SSIM or Pearson, and Hit@k "
            "is the fraction whose own sentence ranks in the top k (chance 1/n). Exit codes: 0 ok, 1 failure, "
            "2 bad usage.",
            88,
        ),
        epilog="examples:\n  olas similarity --models minilm-l6 mpnet-base -i sentences.txt\n"
        "  olas similarity --models smollm2-135m gemma3-270m qwen2.5-0.5b --dataset conll2003 --n 200 "
        "--order 1 2 --out hits.csv",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("-i", "--input", help="text file, one sentence per line, words separated by whitespace")
    src.add_argument(
        "--dataset",
        choices=["ewt", "conll2003"],
        help="50-word chunks of a training corpus (olas_utils.data.corpus.build_chunks), as in the paper",
    )
    p.add_argument("--n", type=int, default=None, help="with --dataset: number of chunks (default 200; paper 1000)")
    p.add_argument("--chunk-words", type=int, default=50, help="with --dataset: words per chunk (default 50)")
    p.add_argument("--seed", type=int, default=0, help="with --dataset: seed of the chunk sample (default 0)")
    p.add_argument(
        "-m", "--models", nargs="+", required=True, help="two or more zoo names / folders / Hugging Face ids"
    )
    p.add_argument("--order", type=int, nargs="+", default=[1], help="OLA order(s) (default 1)")
    p.add_argument(
        "--metric", choices=["ssim", "pearson"], default="ssim", help="image similarity (default ssim, as the paper)"
    )
    p.add_argument(
        "--level",
        choices=["subword", "word"],
        default="subword",
        help="subword: each model's tokens (the paper's protocol, default); word: subwords pooled to words",
    )
    p.add_argument(
        "--pooling",
        choices=["neutral", "clark"],
        default=None,
        help="word level: neutral (default; lift over uniform attention) or clark (confounded across tokenizers)",
    )
    p.add_argument("--size", type=int, default=50, help="image side in pixels (default 50)")
    p.add_argument("--out", help="also write the table as CSV here")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: CUDA if available)")
    p.add_argument(
        "--truncation",
        choices=["error", "warn"],
        default="error",
        help="a sentence longer than a model's maximum: error (default) or cut at a word boundary with a warning",
    )
    p.add_argument("--overwrite", action="store_true", help="replace the --out file if it exists")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_similarity, check=_check_similarity)

    p = sub.add_parser("reproduce", help="run the numbered notebooks with papermill")
    p.add_argument(
        "--profile",
        choices=REPRODUCE_PROFILES,
        default="quick",
        help="quick (default), smoke, wide or tagging (notebook 04 only), mixing "
        "(notebooks 02 and 03: quick with ALTI and value norms; 02 on 64 chunks), gemma (notebook 02 only: quick on every offline "
        "model, the optional embeddinggemma-300m and qwen2.5-1.5b included: make models-optional), flow (notebooks 02 and 03: quick with attention flow; 02 on 64 chunks of 20 words) or paper; "
        "writes runs/<profile>/ unless --refresh-committed",
    )
    p.add_argument("--only", nargs="+", metavar="NB", help="notebook name prefixes, e.g. 01 (at least one)")
    add_folder_arguments(p)  # --results-dir, --figures-dir, --executed-dir, --refresh-committed
    p.set_defaults(func=_cmd_reproduce, check=_check_reproduce)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``olas`` console script.

    Args:
        argv: arguments (default ``sys.argv[1:]``).

    Returns:
        The exit code: 0 success, 1 a failure (one ``error:`` line on stderr), 130 on
        Ctrl-C. Bad usage exits with 2 through ``SystemExit`` (argparse).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "check", None) is not None:
        args.check(parser, args)  # option combinations argparse cannot express: exit 2
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - one clear line for scripts; details with OLAS_DEBUG=1
        import os

        if os.environ.get("OLAS_DEBUG"):
            raise
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
