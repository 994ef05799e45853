"""Where OLAS reads data and keeps prepared models, and which device it uses.

Each setting is resolved when asked for (never frozen at import time): an explicit
argument wins, then the environment variable, then the default.

| setting | environment variable | default |
|---|---|---|
| data folder | ``OLAS_DATA_DIR`` | ``../shared/data`` next to the project root |
| model cache | ``OLAS_CACHE_DIR`` | ``~/.cache/olas`` (``$XDG_CACHE_HOME/olas``) |
| device | ``OLAS_DEVICE`` | ``cuda`` when available, else ``cpu`` |
| a notebook's tables and figures | (the notebook's ``results_dir`` / ``figures_dir``) | ``runs/<profile>/`` in the project (git-ignored) |
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["project_root", "data_dir", "cache_dir", "resolve_device", "cpu_workers", "RUNS", "output_folder"]

#: Folder of the project where notebook runs write by default (git-ignored): ``runs/<profile>/results``,
#: ``runs/<profile>/figures``. The committed ``results/`` and ``figures/`` are written only when asked
#: (``python -m olas_utils.ui.reproduce --refresh-committed``).
RUNS = "runs"


def project_root() -> Path:
    """The OLAS checkout (the folder holding ``olas_utils/``)."""
    return Path(__file__).resolve().parent.parent.parent


def output_folder(path: str | os.PathLike | None, profile: str, kind: str) -> Path:
    """Where a notebook writes its ``kind`` (``"results"`` or ``"figures"``) for ``profile``.

    Args:
        path: the notebook's ``results_dir`` / ``figures_dir`` parameter. None: the run folder
            ``<project>/runs/<profile>/<kind>`` (git-ignored), so a notebook run in the lab or by
            papermill never overwrites the committed ``results/`` and ``figures/``. A relative path
            is read from the project root (not from the kernel's working directory); an absolute
            one is used as it is.
        profile: the notebook's profile (names the run folder).
        kind: ``"results"`` or ``"figures"``.

    Returns:
        The absolute folder (not created here: the notebook's writers create it).

    Raises:
        ValueError: an unknown ``kind``, or an empty ``path`` or ``profile``.
        NotADirectoryError: the folder, or a folder above it, is an existing file.
    """
    if kind not in ("results", "figures"):
        raise ValueError(f"kind must be 'results' or 'figures', got {kind!r}")
    if not str(profile or "").strip():
        raise ValueError(f"profile must be a profile name such as 'quick', got {profile!r}")
    if path is None:
        folder = project_root() / RUNS / str(profile) / kind
    else:
        if not str(path).strip():
            raise ValueError(
                f"{kind}_dir is empty; pass a folder (relative to the project root) or None for {RUNS}/{profile}/{kind}"
            )
        folder = Path(path).expanduser()
        folder = folder if folder.is_absolute() else project_root() / folder
    folder = Path(os.path.abspath(folder))
    for p in (folder, *folder.parents):
        if p.exists():
            if not p.is_dir():
                raise NotADirectoryError(
                    f"{kind} folder {folder}: {p} is a file, not a folder; pass another {kind}_dir"
                )
            break
    return folder


def shown_path(path: str | os.PathLike) -> str:
    """``path`` as a message or an executed notebook shows it: relative to the repository when
    inside it (no machine's absolute paths in committed outputs), else as given."""
    p = Path(path).resolve()
    root = project_root()
    return str(p.relative_to(root)) if p.is_relative_to(root) else str(path)


def data_dir(path: str | os.PathLike | None = None) -> Path:
    """The folder holding the real datasets (``ud_english_ewt/``, ``conll2000/``, ...).

    Args:
        path: explicit folder; else ``$OLAS_DATA_DIR``; else ``<project>/../shared/data``.

    Raises:
        FileNotFoundError: if the folder does not exist, naming where it was looked for and
            how to point OLAS elsewhere.
    """
    if path is not None:
        p, how = Path(path), "the data_dir argument"
    elif os.environ.get("OLAS_DATA_DIR"):
        p, how = Path(os.environ["OLAS_DATA_DIR"]), "$OLAS_DATA_DIR"
    else:
        p, how = project_root().parent / "shared" / "data", "the default (../shared/data beside the project)"
    p = p.expanduser().resolve()
    if not p.is_dir():
        raise FileNotFoundError(
            f"data folder {p} (from {how}) does not exist. Put the datasets there, or set "
            f"OLAS_DATA_DIR=/path/to/data or pass data_dir=... (see data/README.md)."
        )
    return p


def cache_dir(path: str | os.PathLike | None = None) -> Path:
    """Folder for prepared (reassembled, dequantised) models and other caches; created if absent.

    Args:
        path: explicit folder; else ``$OLAS_CACHE_DIR``; else ``$XDG_CACHE_HOME/olas`` or
            ``~/.cache/olas``.

    Raises:
        PermissionError / OSError: if the folder cannot be created, with its path.
    """
    if path is not None:
        p = Path(path)
    elif os.environ.get("OLAS_CACHE_DIR"):
        p = Path(os.environ["OLAS_CACHE_DIR"])
    else:
        p = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "olas"
    p = p.expanduser().resolve()
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise type(e)(
            f"cannot create the OLAS cache folder {p}: {e.strerror or e}. Set OLAS_CACHE_DIR to a writable folder."
        ) from e
    return p


def resolve_device(device: "str | torch.device | None" = None) -> "torch.device":
    """The torch device to run on.

    Args:
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``, a ``torch.device``, or None for
            ``$OLAS_DEVICE`` or else CUDA when available, else CPU.

    Raises:
        ValueError: ``device`` (or ``$OLAS_DEVICE`` when ``device`` is None) is not a device
            name torch knows; the message names the argument or the variable, its value and
            the valid forms.
        RuntimeError: if CUDA is asked for and not available (names the argument or the
            variable).
    """
    import torch

    if isinstance(device, torch.device):
        source, value = "device", device
    elif device is not None:
        source, value = "device", device
    elif os.environ.get("OLAS_DEVICE"):
        source, value = "OLAS_DEVICE", os.environ["OLAS_DEVICE"]
    else:
        source, value = "default", "cuda" if torch.cuda.is_available() else "cpu"
    named = f"the environment variable OLAS_DEVICE={value!r}" if source == "OLAS_DEVICE" else f"device={value!r}"
    undo = "unset OLAS_DEVICE or set it to one of them" if source == "OLAS_DEVICE" else "pass one of them"
    try:
        dev = torch.device(value)
    except (RuntimeError, TypeError, ValueError) as e:
        raise ValueError(
            f"{named} is not a device: valid values are 'cpu', 'cuda', 'cuda:0', 'cuda:1', ... (a GPU by index) "
            f"and 'mps'; {undo} (torch: {str(e).splitlines()[0] if str(e) else type(e).__name__})"
        ) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"{named} asks for CUDA but CUDA is not available in this PyTorch "
            f"(torch {torch.__version__}); use device='cpu' or unset OLAS_DEVICE."
        )
    return dev


def cpu_workers() -> int:
    """Worker processes to run side by side on the CPU, one thread each: one per CPU core this
    process may use (``os.sched_getaffinity``), at most ``torch.get_num_threads()`` (so a run
    limited to one thread, e.g. ``OMP_NUM_THREADS=1``, gets one worker); at least 1."""
    import torch

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, torch.get_num_threads()))
