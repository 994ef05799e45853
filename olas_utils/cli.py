"""The ``olas`` command line.

::

    olas models                         # the zoo: installed, prepared, hash ok
    olas extract -m minilm-l6 -i sentences.txt -o maps.pt --orders 1 2 3 --level word
    olas reproduce --profile quick --only 01

Exit codes: 0 success, 1 a failure with a one-line ``error:`` message, 2 bad usage
(argparse).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

__all__ = ["main", "read_sentences"]


def read_sentences(path: str | Path) -> list[list[str]]:
    """Sentences from a text file: one sentence per line, words separated by whitespace;
    blank lines are skipped.

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: if it holds no sentence.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"input file {path} does not exist")
    sents = [line.split() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not sents:
        raise ValueError(f"{path} holds no sentence (one sentence per line, words separated by spaces)")
    return sents


def _cmd_models(args) -> int:
    from . import zoo

    return zoo.main(["list"] + (["--no-verify"] if args.no_verify else []))


def _cmd_extract(args) -> int:
    from .extract import extract_ola
    from .zoo import load_model

    sentences = read_sentences(args.input)
    lm = load_model(args.model, device=args.device)
    res = extract_ola(
        lm.model, lm.tokenizer, sentences, orders=args.orders, rollout=not args.no_rollout,
        level=args.level, batch_size=args.batch_size, progress=not args.quiet, model_name=lm.name,
    )
    out = res.save(args.output)
    print(f"wrote {len(res)} sentences × {len(res.keys())} maps ({', '.join(res.keys())}) to {out}")
    return 0


def _cmd_reproduce(args) -> int:
    from .reproduce import reproduce

    reproduce(args.profile, args.only, args.executed_dir)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``olas`` (exposed for documentation and tests)."""
    ap = argparse.ArgumentParser(prog="olas", description="Order-Level Attention (OLA) analysis across language models.")
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
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: CUDA if available)")
    p.add_argument("--no-rollout", action="store_true", help="skip attention rollout")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_extract)

    p = sub.add_parser("reproduce", help="run the numbered notebooks with papermill")
    p.add_argument("--profile", choices=["smoke", "quick", "paper"], default="quick")
    p.add_argument("--only", nargs="*", help="notebook name prefixes, e.g. 01")
    p.add_argument("--executed-dir", help="where executed notebooks go (default results/executed)")
    p.set_defaults(func=_cmd_reproduce)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``olas`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
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
