"""Run the numbered notebooks with papermill (the main job).

``python -m olas_utils.ui.reproduce --profile quick`` executes every ``notebooks/NN_*.ipynb``
in order with ``profile=quick``. By default every run writes into the git-ignored run folder
``runs/<profile>/`` (``results/``, ``figures/`` and ``executed/`` in it), so it never overwrites
the committed outputs; ``--results-dir`` / ``--figures-dir`` / ``--executed-dir`` choose other
folders. ``--refresh-committed`` regenerates the committed outputs instead (what ``make
reproduce`` does): ``results/`` and ``figures/`` for quick, ``results/<profile>/`` and
``figures/<profile>/`` for any other profile (executed copies in ``results[/<profile>]/executed/``),
then the README's results summary. The ``wide`` and ``tagging`` profiles exist for notebook 04
only, ``gemma`` for notebook 02 only and ``mixing`` and ``flow`` for notebooks 02 and 03
(:data:`NOTEBOOKS_OF`).

Before any notebook runs, a folder that is a file, an executed copy that would replace a source
notebook, a committed folder without ``--refresh-committed`` and an empty ``--only`` are refused.

After each notebook, ``run_environment.json`` in the results folder records what it ran with
(:func:`run_environment`: the thread count a fresh kernel starts with and the thread variables,
torch / transformers / numpy versions, the platform and CPU), one entry per notebook, written
atomically: maps and trained verdicts are bit-reproducible only on the same machine type, thread
count and versions (docs/reproducibility.md).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from olas_utils.infra.settings import RUNS, project_root, shown_path

__all__ = [
    "PROFILES",
    "NOTEBOOKS_OF",
    "list_notebooks",
    "output_dirs",
    "run_dirs",
    "run_notebook",
    "run_environment",
    "record_environment",
    "ENVIRONMENT_FILE",
    "THREAD_VARIABLES",
    "reproduce",
    "main",
]

PROFILES = ("smoke", "quick", "wide", "tagging", "gemma", "mixing", "flow", "paper-size", "paper")
#: Profiles that only some notebooks have: profile → notebook number prefixes.
NOTEBOOKS_OF: dict[str, tuple[str, ...]] = {
    "wide": ("04",),
    "tagging": ("04",),
    "gemma": ("02",),
    "mixing": ("02", "03"),
    "flow": ("02", "03"),
    "paper-size": ("02",),
}
#: Profiles whose committed outputs the README's results summary quotes
#: (:func:`olas_utils.studies.summary.update_readme` runs after them).
SUMMARISED = ("quick", "wide", "tagging", "gemma", "paper-size")
#: The file in a run's results folder that records what each notebook ran with.
ENVIRONMENT_FILE = "run_environment.json"
#: Environment variables that set (or change) the CPU thread count and the BLAS code path.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "MKL_CBWR",
    "OLAS_DEVICE",
)
#: What a fresh Python process (a notebook's kernel) starts with, printed as JSON.
_PROBE = (
    "import json, torch; print(json.dumps({'torch_num_threads': torch.get_num_threads(), "
    "'torch_num_interop_threads': torch.get_num_interop_threads()}))"
)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def run_environment(*, probe: bool = True) -> dict:
    """What a notebook run here computes with: the facts that decide whether its maps and trained
    verdicts are bit for bit those of another run.

    Args:
        probe: also start a fresh Python process (this interpreter, this environment: what a
            notebook's kernel starts with) and record its ``torch.get_num_threads()``; the
            calling process may have changed its own count.

    Returns:
        A JSON-serialisable dict: ``torch_num_threads`` (this process's ``torch.get_num_threads()``),
        ``kernel_torch_num_threads`` (the fresh process's; None without ``probe`` or if it
        failed), ``environment`` (:data:`THREAD_VARIABLES`, None where unset), ``versions``
        (python, torch, transformers, numpy, scipy, numba, olas), ``platform`` (system, machine, CPU
        model, CPU cores usable), ``torch_build`` (CPU capability, BLAS, OpenMP, CUDA), ``started_utc``.
    """
    import numpy
    import torch
    import transformers

    kernel = None
    if probe:
        try:
            done = subprocess.run(
                [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300, check=True
            )
            kernel = json.loads(done.stdout.strip().splitlines()[-1])
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            kernel = None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    config = torch.__config__.show()
    return {
        "started_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch_num_threads": torch.get_num_threads(),
        "torch_num_interop_threads": torch.get_num_interop_threads(),
        "kernel_torch_num_threads": None if kernel is None else kernel["torch_num_threads"],
        "environment": {k: os.environ.get(k) for k in THREAD_VARIABLES},
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "numpy": numpy.__version__,
            "scipy": _version("scipy"),
            "numba": _version("numba"),
            "olas": _version("olas"),
        },
        "platform": {
            "system": platform.system(),
            "release": platform.release(),
            "machine": platform.machine(),
            "cpu": _cpu_model(),
            "cpu_count": os.cpu_count(),
            "cpus_usable": usable,
            "platform": platform.platform(),
        },
        "torch_build": {
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "mkl": torch.backends.mkl.is_available(),
            "mkldnn": torch.backends.mkldnn.is_available(),
            "openmp": "OpenMP" in config,
            "blas": next(
                (p.split("=", 1)[1] for p in config.replace(",", " ").split() if p.startswith("BLAS_INFO=")), None
            ),
            "cuda_available": torch.cuda.is_available(),
        },
    }


def record_environment(results_dir: str | Path, notebook: str, profile: str, environment: dict | None = None) -> Path:
    """Add (or replace) ``notebook``'s entry in ``<results_dir>/run_environment.json``, atomically
    (:func:`olas_utils.infra.atomic.write_json_atomic`); the other notebooks' entries are kept, so a
    run of one notebook leaves the record of the others' last runs.

    Args:
        results_dir: the run's results folder (created if missing).
        notebook: the notebook's name (``"02_cross_lm_similarity"``).
        profile: the profile it ran.
        environment: :func:`run_environment`'s dict (None: measured now).

    Returns:
        The file's path.
    """
    from olas_utils.infra.atomic import write_json_atomic

    path = Path(results_dir) / ENVIRONMENT_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(record, dict) or not isinstance(record.get("notebooks"), dict):
            record = {}
    except (OSError, ValueError):
        record = {}
    notebooks = dict(record.get("notebooks", {}))
    notebooks[notebook] = {"profile": profile, **(environment if environment is not None else run_environment())}
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_json_atomic(
        path,
        {
            "about": "what each notebook of this results folder last ran with (olas_utils.ui.reproduce); "
            "bit-for-bit reproducible only with the same machine type, thread count and versions "
            "(docs/reproducibility.md)",
            "notebooks": notebooks,
        },
        what="run environment record",
    )


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


def run_dirs(profile: str, root: str | Path | None = None) -> tuple[Path, Path, Path]:
    """``(results, figures, executed)`` folders of a run that does not refresh the committed
    outputs: ``runs/<profile>/results``, ``runs/<profile>/figures`` and ``runs/<profile>/executed``
    (git-ignored; under ``root``, default the project root)."""
    root = Path(root) if root else project_root()
    base = root / RUNS / profile
    return base / "results", base / "figures", base / "executed"


def _inside(path: Path, folder: Path) -> bool:
    path, folder = Path(os.path.abspath(path)), Path(os.path.abspath(folder))
    return path == folder or folder in path.parents


def _check_folder(path: Path, flag: str) -> None:
    """A folder (or a folder above it) that exists as a file cannot be written into: refuse it now."""
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                what = "is a file" if p == path else f"is below {p}, which is a file"
                raise NotADirectoryError(
                    f"{flag} {path} {what}, not a folder; pass a folder (it is created if missing)"
                )
            return


def _for_notebook(path: Path) -> str:
    """``path`` as a notebook parameter: relative to the project root when inside it (the notebooks
    read relative folders from there, :func:`olas_utils.infra.settings.output_folder`), else absolute."""
    root = project_root()
    return os.path.relpath(path, root) if _inside(path, root) else str(path)


def run_notebook(
    path: str | Path,
    out_path: str | Path,
    *,
    profile: str = "quick",
    parameters: dict | None = None,
    progress: bool = True,
    log_output: bool = False,
) -> Path:
    """Execute one notebook with papermill. Its kernel draws progress bars as text lines
    (``OLAS_PROGRESS=text`` unless set: :mod:`olas_utils.infra.progress`), so the executed copy
    and the log stay readable.

    Args:
        path: the notebook.
        out_path: where the executed copy is written (folders created).
        profile: one of :data:`PROFILES`, passed as the ``profile`` parameter.
        parameters: further parameters (override the notebook's ``parameters`` cell).
        progress: papermill's cell progress bar.
        log_output: also stream the kernel's output (its progress lines, warnings) to this
            process's stdout and stderr while it runs.

    Returns:
        ``out_path``.

    Raises:
        ValueError: on an unknown profile, or an ``out_path`` that is a source notebook.
        NotADirectoryError: ``out_path``'s folder is a file.
        papermill.PapermillExecutionError: if a cell fails (the executed copy shows where).
    """
    import papermill as pm

    _check_profile(profile)
    path, out_path = Path(path), Path(out_path)
    sources = {Path(os.path.abspath(b)) for b in (path, *list_notebooks())}
    if Path(os.path.abspath(out_path)) in sources or (out_path.exists() and out_path.samefile(path)):
        raise ValueError(
            f"the executed copy {out_path} would overwrite the source notebook (its unsaved or uncommitted edits "
            "would be lost); write it elsewhere"
        )
    _check_folder(out_path.parent, "the executed copy's folder")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    streams = {"stdout_file": sys.stdout, "stderr_file": sys.stderr} if log_output else {}
    unset = "OLAS_PROGRESS" not in os.environ
    if unset:
        os.environ["OLAS_PROGRESS"] = "text"  # the kernel inherits this process's environment
    try:
        pm.execute_notebook(
            str(path),
            str(out_path),
            parameters={"profile": profile, **(parameters or {})},
            kernel_name="python3",
            cwd=str(path.parent),
            progress_bar=progress,
            **streams,
        )
    finally:
        if unset:
            os.environ.pop("OLAS_PROGRESS", None)
    relative_papermill_paths(out_path, path)
    return out_path


def relative_papermill_paths(executed: str | Path, source: str | Path | None = None) -> bool:
    """Rewrite the ``input_path`` and ``output_path`` that papermill records in an executed
    notebook's metadata without a machine's absolute paths: the output as
    :func:`olas_utils.infra.settings.shown_path` shows ``executed`` (relative to the repository when
    inside it), the input as it shows ``source``, or, without ``source``, the recorded path from its
    ``notebooks/`` folder on (a copy executed in another clone).

    Returns:
        Whether the file changed (written atomically, byte for byte as papermill writes it
        otherwise: cells and outputs untouched)."""
    import nbformat

    from olas_utils.infra.atomic import write_text_atomic

    nb = nbformat.read(str(executed), as_version=4)
    meta = nb.metadata.get("papermill", {})
    recorded = str(meta.get("input_path") or "")
    if source is not None:
        wanted_input = shown_path(source)
    elif "/notebooks/" in recorded:
        wanted_input = "notebooks/" + recorded.rsplit("/notebooks/", 1)[1]
    else:
        wanted_input = recorded
    wanted = {"input_path": wanted_input, "output_path": shown_path(executed)}
    changed = False
    for key, value in wanted.items():
        if meta.get(key) and meta[key] != value:
            meta[key] = value
            changed = True
    if changed:
        write_text_atomic(Path(executed), nbformat.writes(nb))
    return changed


def reproduce(
    profile: str = "quick",
    only: Sequence[str] | None = None,
    executed_dir: str | Path | None = None,
    *,
    results_dir: str | Path | None = None,
    figures_dir: str | Path | None = None,
    refresh_committed: bool = False,
    log_output: bool = False,
) -> list[Path]:
    """Run every numbered notebook (or those whose name starts with one of ``only``).

    Args:
        profile: one of :data:`PROFILES`.
        only: notebook name prefixes (e.g. ``["01"]``); None runs every notebook of the profile.
        executed_dir: where the executed copies go (default ``runs/<profile>/executed``, or the
            committed ``results[/<profile>]/executed`` with ``refresh_committed``).
        results_dir, figures_dir: where the notebooks write their tables and figures (default
            ``runs/<profile>/results`` and ``runs/<profile>/figures``). Relative paths are read from
            the current working directory.
        refresh_committed: regenerate the committed outputs (:func:`output_dirs`) and the
            README's results summary: what ``make reproduce`` does. Without it no folder under
            the committed ``results/`` or ``figures/`` is written.

    Returns:
        Paths of the executed copies.

    Raises:
        ValueError: an unknown profile; ``only`` empty, a plain string or holding an empty name
            (None runs every notebook), matching no notebook, or naming one that lacks the
            profile; a folder inside the committed ``results/`` or ``figures/`` without
            ``refresh_committed``, or ``results_dir`` / ``figures_dir`` with it; an executed copy
            that would replace a source notebook. All before any notebook runs.
        NotADirectoryError: a folder given is a file (or lies below one).
    """
    _check_profile(profile)
    if only is not None and (
        isinstance(only, str) or not list(only) or any(not isinstance(o, str) or not o.strip() for o in only)
    ):
        raise ValueError(
            f"only must be a list of notebook name prefixes such as ['01'], got {only!r}; pass None to run every "
            "notebook (an empty list or an empty name would match every notebook)"
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
    for flag, value in (
        ("--results-dir", results_dir),
        ("--figures-dir", figures_dir),
        ("--executed-dir", executed_dir),
    ):
        if value is not None and not str(value).strip():
            raise ValueError(f"{flag} is empty; pass a folder, or leave the option out for the default")
    root = project_root()
    committed = (root / "results", root / "figures")
    if refresh_committed:
        given = [f for f, v in (("--results-dir", results_dir), ("--figures-dir", figures_dir)) if v is not None]
        if given:
            raise ValueError(
                f"--refresh-committed writes the committed folders {', '.join(str(c) for c in output_dirs(profile))}; "
                f"drop {' and '.join(given)}, or drop --refresh-committed to write where they say"
            )
        results, figures = output_dirs(profile)
        executed = Path(os.path.abspath(executed_dir)) if executed_dir is not None else results / "executed"
    else:
        default = run_dirs(profile)
        results, figures, executed = (
            Path(os.path.abspath(v)) if v is not None else d
            for v, d in zip((results_dir, figures_dir, executed_dir), default)
        )
        for flag, folder in (("--results-dir", results), ("--figures-dir", figures), ("--executed-dir", executed)):
            inside = [c for c in committed if _inside(folder, c)]
            if inside:
                raise ValueError(
                    f"{flag} {folder} is inside the committed {inside[0].name}/ folder: this run would overwrite "
                    f"committed outputs. Pass --refresh-committed to regenerate them (as `make reproduce` does), or "
                    f"choose a folder outside {inside[0]} (default {RUNS}/{profile}/)"
                )
    for flag, folder in (("--results-dir", results), ("--figures-dir", figures), ("--executed-dir", executed)):
        _check_folder(folder, flag)
    sources = {Path(os.path.abspath(b)) for b in list_notebooks()}
    clash = [executed / b.name for b in books if Path(os.path.abspath(executed / b.name)) in sources]
    if clash:
        raise ValueError(
            f"--executed-dir {executed} would overwrite the source notebook {clash[0]} with its executed copy "
            f"(its unsaved or uncommitted edits would be lost); choose another folder (default {RUNS}/{profile}/executed)"
        )
    params = {"results_dir": _for_notebook(results), "figures_dir": _for_notebook(figures)}
    # the notebooks read them with olas_utils.infra.settings.output_folder, from the project root
    done = []
    environment = run_environment() if books else None
    for b in books:
        t0 = time.time()
        print(
            f"[olas reproduce] {b.name} (profile={profile}) -> {params['results_dir']}, {params['figures_dir']}",
            flush=True,
        )
        done.append(run_notebook(b, executed / b.name, profile=profile, parameters=params, log_output=log_output))
        print(f"[olas reproduce] {b.name} done in {time.time() - t0:.0f} s", flush=True)
        recorded = record_environment(
            results,
            b.stem,
            profile,
            {
                **environment,
                "seconds": round(time.time() - t0),
                "finished_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            },
        )
        print(
            f"[olas reproduce] ran with {environment['kernel_torch_num_threads']} torch thread(s), torch "
            f"{environment['versions']['torch']}: recorded in {recorded}",
            flush=True,
        )
    if refresh_committed and profile in SUMMARISED:
        from olas_utils.studies.summary import update_readme

        changed = update_readme(results_dir=output_dirs("quick")[0])
        print(f"[olas reproduce] README.md results summary {'rewritten' if changed else 'unchanged'}", flush=True)
    elif profile in SUMMARISED:
        print(
            "[olas reproduce] README.md results summary left as it is (it quotes the committed results; "
            "--refresh-committed regenerates them and the summary)",
            flush=True,
        )
    return done


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: ``python -m olas_utils.ui.reproduce [--profile P] [--only NB ...] [--quiet]
    [--results-dir D] [--figures-dir D] [--executed-dir D] [--refresh-committed]``."""
    ap = argparse.ArgumentParser(prog="olas-reproduce", description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=PROFILES, default="quick")
    ap.add_argument("--only", nargs="+", metavar="NB", help="notebook name prefixes, e.g. 01 (at least one)")
    add_folder_arguments(ap)
    ap.add_argument(
        "--quiet",
        action="store_true",
        help="do not stream the notebooks' progress lines and warnings here (papermill's cell bar only)",
    )
    args = ap.parse_args(argv)
    try:
        reproduce(
            args.profile,
            args.only,
            args.executed_dir,
            results_dir=args.results_dir,
            figures_dir=args.figures_dir,
            refresh_committed=args.refresh_committed,
            log_output=not args.quiet,
        )
    except Exception as e:  # noqa: BLE001 - command line: one clear line, non-zero exit
        print(f"olas reproduce: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


def add_folder_arguments(ap: argparse.ArgumentParser) -> None:
    """The output-folder options of ``reproduce`` (shared by ``olas reproduce``)."""
    ap.add_argument(
        "--results-dir",
        help=f"where the notebooks write their tables (default {RUNS}/<profile>/results, git-ignored)",
    )
    ap.add_argument(
        "--figures-dir",
        help=f"where the notebooks write their figures (default {RUNS}/<profile>/figures, git-ignored)",
    )
    ap.add_argument(
        "--executed-dir",
        help=f"where executed notebooks go (default {RUNS}/<profile>/executed; with --refresh-committed "
        "results/executed, results/<profile>/executed for a profile other than quick)",
    )
    ap.add_argument(
        "--refresh-committed",
        action="store_true",
        help="regenerate the committed outputs (results/ and figures/ for quick, results/<profile>/ and "
        "figures/<profile>/ otherwise) and the README's results summary, as `make reproduce` does",
    )


if __name__ == "__main__":
    sys.exit(main())
