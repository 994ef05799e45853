"""Run the numbered notebooks with papermill (the main job).

``python -m olas_utils.ui.reproduce --profile quick`` executes every ``notebooks/NN_*.ipynb``
in order with ``profile=quick`` and writes the executed copies to ``results/executed/``;
the notebooks themselves write their figures to ``figures/`` and tables to ``results/``.
Any other profile writes to ``results/<profile>/`` and ``figures/<profile>/`` (executed copies
in ``results/<profile>/executed/``), so it never overwrites the committed quick results. The
``wide`` and ``tagging`` profiles exist for notebook 04 only, ``gemma`` for notebook 02 only and
``mixing`` and ``flow`` for notebooks 02 and 03 (:data:`NOTEBOOKS_OF`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Sequence

from olas_utils.settings import project_root

__all__ = ["PROFILES", "NOTEBOOKS_OF", "list_notebooks", "output_dirs", "run_notebook", "reproduce", "main"]

PROFILES = ("smoke", "quick", "wide", "tagging", "gemma", "mixing", "flow", "paper")
#: Profiles that only some notebooks have: profile → notebook number prefixes.
NOTEBOOKS_OF: dict[str, tuple[str, ...]] = {
    "wide": ("04",),
    "tagging": ("04",),
    "gemma": ("02",),
    "mixing": ("02", "03"),
    "flow": ("02", "03"),
}
#: Profiles whose committed outputs the README's results summary quotes
#: (:func:`olas_utils.studies.summary.update_readme` runs after them).
SUMMARISED = ("quick", "wide", "tagging", "gemma")


def list_notebooks(folder: str | Path | None = None) -> list[Path]:
    """The numbered notebooks (``NN_name.ipynb``) in ``folder`` (default ``notebooks/``), sorted."""
    folder = Path(folder) if folder else project_root() / "notebooks"
    return sorted(p for p in folder.glob("[0-9][0-9]_*.ipynb"))


def _check_profile(profile: str) -> None:
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; use one of {PROFILES}")


def output_dirs(profile: str, root: str | Path | None = None) -> tuple[Path, Path]:
    """``(results, figures)`` folders of a profile: ``results/`` and ``figures/`` for
    ``quick`` (the committed outputs), ``results/<profile>/`` and ``figures/<profile>/`` for
    any other (under ``root``, default the project root)."""
    root = Path(root) if root else project_root()
    if profile == "quick":
        return root / "results", root / "figures"
    return root / "results" / profile, root / "figures" / profile


def run_notebook(
    path: str | Path,
    out_path: str | Path,
    *,
    profile: str = "quick",
    parameters: dict | None = None,
    progress: bool = True,
) -> Path:
    """Execute one notebook with papermill.

    Args:
        path: the notebook.
        out_path: where the executed copy is written (folders created).
        profile: one of :data:`PROFILES`, passed as the ``profile`` parameter.
        parameters: further parameters (override the notebook's ``parameters`` cell).
        progress: papermill's cell progress bar.

    Returns:
        ``out_path``.

    Raises:
        ValueError: on an unknown profile.
        papermill.PapermillExecutionError: if a cell fails (the executed copy shows where).
    """
    import papermill as pm

    _check_profile(profile)
    path, out_path = Path(path), Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    pm.execute_notebook(
        str(path),
        str(out_path),
        parameters={"profile": profile, **(parameters or {})},
        kernel_name="python3",
        cwd=str(path.parent),
        progress_bar=progress,
    )
    return out_path


def reproduce(
    profile: str = "quick", only: Sequence[str] | None = None, executed_dir: str | Path | None = None
) -> list[Path]:
    """Run every numbered notebook (or those whose name starts with one of ``only``).

    Returns:
        Paths of the executed copies.

    Raises:
        ValueError: an unknown profile; ``only`` empty or a plain string (None runs every
            notebook), matches no notebook, or names one that lacks the profile.
    """
    _check_profile(profile)
    if only is not None and (isinstance(only, str) or not list(only)):
        raise ValueError(
            f"only must be a list of notebook name prefixes such as ['01'], got {only!r}; pass None to run every "
            "notebook (an empty list would run them all into the committed results/ and figures/)"
        )
    books = list_notebooks()
    if only:
        books = [b for b in books if any(b.name.startswith(o) or b.stem == o for o in only)]
        if not books:
            raise ValueError(f"no notebook matches {list(only)}; have {[b.name for b in list_notebooks()]}")
    if profile in NOTEBOOKS_OF:
        allowed = NOTEBOOKS_OF[profile]
        lacking = [b.name for b in books if not b.name.startswith(allowed)]
        if only and lacking:
            raise ValueError(
                f"profile {profile!r} exists for notebooks {list(allowed)} only, not {lacking}; "
                f"drop --only or pick one of those"
            )
        books = [b for b in books if b.name.startswith(allowed)]
    results, figures = output_dirs(profile)
    executed_dir = Path(executed_dir) if executed_dir else results / "executed"
    # relative to notebooks/, where the notebooks run; quick keeps the notebooks' defaults
    here = project_root() / "notebooks"
    params = (
        {}
        if profile == "quick"
        else {"results_dir": os.path.relpath(results, here), "figures_dir": os.path.relpath(figures, here)}
    )
    done = []
    for b in books:
        t0 = time.time()
        print(f"[olas reproduce] {b.name} (profile={profile})", flush=True)
        done.append(run_notebook(b, executed_dir / b.name, profile=profile, parameters=params))
        print(f"[olas reproduce] {b.name} done in {time.time() - t0:.0f} s", flush=True)
    if profile in SUMMARISED:
        from olas_utils.studies.summary import update_readme

        changed = update_readme(results_dir=output_dirs("quick")[0])
        print(f"[olas reproduce] README.md results summary {'rewritten' if changed else 'unchanged'}", flush=True)
    return done


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: ``python -m olas_utils.ui.reproduce [--profile P] [--only NB ...]``."""
    ap = argparse.ArgumentParser(prog="olas-reproduce", description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=PROFILES, default="quick")
    ap.add_argument("--only", nargs="+", metavar="NB", help="notebook name prefixes, e.g. 01 (at least one)")
    ap.add_argument(
        "--executed-dir",
        help="where executed notebooks go (default results/executed, "
        "results/<profile>/executed for a profile other than quick)",
    )
    args = ap.parse_args(argv)
    try:
        reproduce(args.profile, args.only, args.executed_dir)
    except Exception as e:  # noqa: BLE001 - command line: one clear line, non-zero exit
        print(f"olas reproduce: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
