"""Progress bars that read well where they are shown: tqdm's widget in an interactive notebook,
plain text lines in a batch run (papermill, a log file), so an executed notebook keeps a readable
last line instead of a widget placeholder stuck at 0 %.

``OLAS_PROGRESS`` chooses: ``auto`` (default: ``tqdm.auto``), ``text`` (plain tqdm on stderr, one
update every :data:`TEXT_INTERVAL_S` seconds at most; ``olas_utils.ui.reproduce`` sets it for the
notebooks it runs) or ``off``.
"""

from __future__ import annotations

import os

#: Values ``OLAS_PROGRESS`` may take.
MODES = ("auto", "text", "off")
#: Seconds between two text updates of one bar (a log stays short).
TEXT_INTERVAL_S = 30.0


def progress_mode() -> str:
    """The progress mode from ``OLAS_PROGRESS`` (``auto`` when unset).

    Raises:
        ValueError: the variable holds something else than one of :data:`MODES`.
    """
    mode = os.environ.get("OLAS_PROGRESS", "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise ValueError(f"OLAS_PROGRESS={mode!r} is not one of {MODES}; unset it or set OLAS_PROGRESS=text")
    return mode


def tqdm(*args, **kwargs):
    """A tqdm bar (same arguments as ``tqdm.tqdm``) in the form :func:`progress_mode` asks for."""
    mode = progress_mode()
    if mode == "auto":
        from tqdm.auto import tqdm as bar

        return bar(*args, **kwargs)
    from tqdm import tqdm as bar

    if mode == "off":
        kwargs["disable"] = True
    else:
        kwargs.setdefault("mininterval", TEXT_INTERVAL_S)
        kwargs.setdefault("ascii", True)
        kwargs["dynamic_ncols"] = False
        kwargs.setdefault("ncols", 100)
    return bar(*args, **kwargs)


def _write(s: str, file=None, end: str = "\n", nolock: bool = False) -> None:
    from tqdm import tqdm as bar

    bar.write(s, file=file, end=end, nolock=nolock)


#: ``tqdm.write``: print a line without breaking an open bar.
tqdm.write = _write
